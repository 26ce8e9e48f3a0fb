//! Command-line surface of `tearline load`: flags → [`LoadConfig`], one run per policy
//! (`--policy both` runs strict then naive on the same target), then a summary on stdout.
//!
//! Invariant: a bad target or bad flags end in an error (non-zero exit) before any load is
//! generated; the progress bar goes to stderr only when it is a terminal.

pub mod agent;
pub mod eventsource;
pub mod llm;
pub mod verdict;

use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::cmd::signals::Signal;
use crate::load::config::{LoadConfig, Policy, PolicyList, Stop, Target, TargetError};
use crate::load::{LoadError, LoadOutcome, summary};

pub use crate::units::parse_duration;

/// Drive MCP Streamable HTTP sessions against a server and measure them.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  # 200 sessions calling the lab's blob tool for 30 s, closed loop, strict client
  tearline load --target http://127.0.0.1:7000/mcp --sessions 200 --duration 30s \\
      --tool blob --args '{\"size\":4194304,\"lines\":3}'
  # open loop at 500 calls/s (latency from the intended start, no coordinated omission)
  tearline load --target http://127.0.0.1:7000/mcp --sessions 100 --rate 500 --duration 60s
  # strict and naive side by side, 1,000 calls each, JSON summary
  tearline load --target http://127.0.0.1:7000/mcp --calls 1000 --policy both --json
  # fail (exit 99) when a call was silently lost or the strict p99 passed 2 s
  tearline load --target http://127.0.0.1:7000/mcp --calls 1000 --policy both \\
      --fail-on 'silent-loss>0' --fail-on 'p99(strict.call)>2s'
  # agent 2 of 4 of one plan (10,000 calls over 400 sessions), started together, report kept
  tearline load --target http://proxy:8931/mcp --sessions 400 --calls 10000 --seed 7 \
      --segment 2/4 --start-at 2026-11-30T14:00:00Z --report-dir out/agent-2
  # then, with every agent's directory copied into out/ on one machine:
  tearline report merge out/agent-* -o out/merged --fail-on 'p99(call)>2s'

  # Seed 000 by hand: per-tool audiences, a resume under a narrowed refresh token
  tearline serve --auth --on-unauthorized silent-end &
  tearline load --target http://127.0.0.1:8931/mcp --tool fetch --args '{\"url\":\"u\",\"n\":8}' \\
      --token aud=https://lab/tools/search,https://lab/tools/fetch \\
      --resume-token aud=https://lab/tools/search --policy both

  # Over HTTP/2 (h2c by prior knowledge): 400 sessions multiplexed over 4 connections
  tearline load --target http://127.0.0.1:8931/mcp --http2 --sessions 400 --calls 4000
  # HTTP/2 over TLS (ALPN h2), e.g. against `tearline serve --tls-self-signed`
  tearline load --target https://localhost:8931/mcp --http2 --h2-connections 2 \\
      --cacert ~/.local/share/tearline/ca/ca.pem

  # Over HTTPS, through `tearline proxy --tls-self-signed` (trust the CA it printed)
  tearline load --target https://localhost:7443/mcp --cacert ~/.local/share/tearline/ca/ca.pem

  # A client with a known bug, for checking the audit: after a cut resume, resume again with
  # the original cursor (the proxy's --findings-log must then show cursor-behind)
  tearline load --target http://127.0.0.1:8931/mcp --calls 50 --client-bug stale-cursor

  # What a browser's EventSource does (no MCP, no session): GET the URL, resume with
  # Last-Event-ID after every cut, plus a /favicon.ico side request on the same connection pool;
  # here against the lab's plain SSE feed (put `tearline proxy` in between for cuts)
  tearline serve --plain-path /events &
  tearline load --client eventsource --target http://127.0.0.1:8931/events \
      --side-path /favicon.ico --max-attempts 8 --timeout 30s

  # LLM token streams: a target path naming an LLM API runs the LLM client (TTFT,
  # inter-token latency, time per output token, end-to-end, tokens/s); strict re-sends an
  # answer without its completion signal (same Idempotency-Key), naive takes it
  tearline load --target http://127.0.0.1:7000/v1/chat/completions --sessions 8 \
      --calls 200 --policy both --llm-tools --api-key-env OPENAI_API_KEY

Policies:
  strict  cursor = last dispatched event id; a partial event at a disconnect is a torn-boundary
          detection; replays are verified; a call completes only with its verified result;
          a server that cannot replay makes the client renegotiate and re-issue the call.
  naive   cursor = last id line seen; resumes with it and accepts whatever comes; a clean stream
          end counts as completion (calls without a valid result are counted silent-loss).
  retry   strict, plus a retry layer that re-sends a cut 2026-07-28 call whatever the tool's
          annotations say (a repeated side effect is possible: the audit's `reexecuted`).
  strict and retry send a fresh `Idempotency-Key` with every call and repeat it on its re-sends
  (the re-send marker the audit reads; see the README).

Exit codes: 0 ok, 99 a --fail-on condition is true, 2 error (also when no call succeeded: the
first message of each error kind is shown), 130/143 interrupted by SIGINT/SIGTERM (what ran is
printed and, with --report-dir, written, marked interrupted; calls in flight are not counted;
thresholds are not evaluated; a second signal stops at once).")]
pub struct Args {
    /// MCP endpoint URL (http:// or https://).
    #[arg(long, default_value = "http://127.0.0.1:8931/mcp")]
    pub target: String,
    /// Trust this CA certificate (PEM) for an https:// target, besides the system roots
    /// (repeatable); e.g. the CA `tearline proxy --tls-self-signed` prints.
    #[arg(long, value_name = "FILE")]
    pub cacert: Vec<std::path::PathBuf>,
    /// Concurrent sessions.
    #[arg(long, default_value_t = 10)]
    pub sessions: usize,
    /// Stop after this long (e.g. 30s, 500ms, 2m). Default: 10s unless --calls is given.
    #[arg(long, value_parser = parse_duration, conflicts_with = "calls")]
    pub duration: Option<Duration>,
    /// Stop after this many calls in total.
    #[arg(long)]
    pub calls: Option<u64>,
    /// Tool to call.
    #[arg(long, default_value = "blob")]
    pub tool: String,
    /// Tool arguments, a JSON object.
    #[arg(long, default_value = r#"{"size":65536,"lines":3}"#)]
    pub args: String,
    /// Open-loop rate in calls/s over all sessions (default: closed loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Client policies, run one after another on the same target: `strict`, `naive`,
    /// `retry`, a comma-separated list, or `both` (strict then naive).
    #[arg(long, default_value = "strict", value_name = "POLICY[,POLICY]")]
    pub policy: PolicyList,
    /// Connections (POSTs and resume GETs) one call may use.
    #[arg(long, default_value_t = 5)]
    pub max_attempts: u32,
    /// Budget of one call.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Budget of a TCP connect and of the probe `initialize`.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Budget of a call's response head, from its POST (default: the call's --timeout, as
    /// Node, httpx and Go's default Transport wait). Past it the client gives up on the head
    /// (`head-timeout`) and re-sends under the same Idempotency-Key while attempts remain.
    #[arg(long, value_parser = parse_duration)]
    pub head_timeout: Option<Duration>,
    /// Speak HTTP/2: h2c by prior knowledge on http://, ALPN h2 on https://. The sessions
    /// multiplex their requests over a small pool of connections (--h2-connections); a stream
    /// reset or GOAWAY is a cut, counted by its error code (e.g. h2-reset-cancel).
    #[arg(long)]
    pub http2: bool,
    /// HTTP/2 connections the sessions share (default: one per 100 sessions, at least 1).
    #[arg(long, value_name = "N", requires = "http2")]
    pub h2_connections: Option<usize>,
    /// Reconnect delay when the server sent no `retry:`.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    pub backoff: Duration,
    /// Disconnect stories to keep per run.
    #[arg(long, default_value_t = 16)]
    pub traces: usize,
    /// MCP era: `auto` probes with server/discover and falls back to initialize; `legacy`
    /// always initializes (2025-11-25, resumable); `modern` always speaks 2026-07-28.
    #[arg(long, value_enum, default_value = "auto")]
    pub era: crate::load::era::EraChoice,
    /// Bearer token sent on every request, e.g. a lab audience token
    /// `aud=https://lab/tools/search,https://lab/tools/fetch` (see `tearline serve --auth`).
    #[arg(long)]
    pub token: Option<String>,
    /// Same as `--policy retry` in place of `strict`: re-send a cut MCP 2026-07-28 call even
    /// when the tool is not declared idempotent (a retry layer that ignores annotations; the
    /// proxy's audit reports `reexecuted` when the first execution had visibly started).
    #[arg(long)]
    pub reissue_unsafe: bool,
    /// Token presented on a call's first resume after a cut instead of --token: a refresh
    /// that narrowed the audience (seed 000), e.g. `aud=https://lab/tools/search` while
    /// calling `fetch`. Strict re-authorizes with --token when that resume ends cleanly with
    /// its call pending; naive takes the clean end as completion.
    #[arg(long, value_name = "TOKEN")]
    pub resume_token: Option<String>,
    /// Print the summary as JSON (with the disconnect stories).
    #[arg(long)]
    pub json: bool,
    /// Which client: `mcp` (MCP Streamable HTTP sessions, the default) or `eventsource` (one
    /// browser-like EventSource: plain GETs of --target resumed by `Last-Event-ID`, no MCP; it
    /// uses --max-attempts as its connection budget, --timeout as its whole budget, --backoff,
    /// --side-path and --json, and ignores the session and call flags).
    #[arg(long, value_enum, default_value = "mcp")]
    pub client: ClientKind,
    /// Misbehave on purpose, to check that an audit flags it. `stale-cursor`: after a resume
    /// is itself cut, resume again with the cursor that resume used (mcp client only).
    #[arg(long, value_enum)]
    pub client_bug: Option<ClientBug>,
    /// EventSource client: after the first interruption, also GET this path (e.g.
    /// /favicon.ico) on the same connection pool, as a browser tab does.
    #[arg(long, value_name = "PATH")]
    pub side_path: Option<String>,
    /// Run only share I of N of the plan (`2/8`: the second of eight agents). Sessions are
    /// split exactly; --rate stays the plan's rate and each session keeps its plan-wide
    /// pacing; --calls is split exactly (closed loop) or, with --rate, each agent makes the
    /// plan's scheduled calls of its own sessions: N agents together run the plan.
    #[arg(long, value_name = "I/N", default_value = "1/1")]
    pub segment: crate::load::segment::Segment,
    /// The plan's seed, shared by its agents and recorded in the report.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Start the load at this wall-clock time (RFC 3339 UTC, e.g. 2026-11-30T14:00:00Z, or
    /// Unix seconds), after probing the target: agents of one plan then share second 0.
    #[arg(long, value_parser = parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Write the report directory (report.json, per-second report.hlog, report.html,
    /// calls.jsonl) here, for `tearline report merge`; keeps up to 10,000 call stories.
    #[arg(long, value_name = "DIR")]
    pub report_dir: Option<std::path::PathBuf>,
    /// LLM endpoints (a --target path ending in /v1/chat/completions, /v1/responses or
    /// /v1/messages runs the LLM client).
    #[command(flatten)]
    pub llm: llm::LlmFlags,
    /// Fail (exit 99) when this condition is TRUE of the load's report, e.g. 'silent-loss>0',
    /// 'p99(strict.call)>2s'; repeatable; names are checked before the load starts (language:
    /// `tearline report show --help`).
    #[arg(long = "fail-on", value_name = "EXPR")]
    pub fail_on: Vec<crate::report::Threshold>,
}

/// Parses `--start-at`: RFC 3339 UTC or Unix seconds.
pub fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    let secs = s
        .parse::<f64>()
        .ok()
        .or_else(|| crate::report::clock::parse_rfc3339(s))
        .filter(|x| x.is_finite() && *x >= 0.0)
        .ok_or_else(|| {
            format!("{s:?} is neither RFC 3339 UTC (2026-11-30T14:00:00Z) nor Unix seconds")
        })?;
    Ok(std::time::UNIX_EPOCH + Duration::from_secs_f64(secs))
}

/// `--client` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClientKind {
    /// MCP Streamable HTTP sessions.
    Mcp,
    /// A browser-like EventSource (plain SSE, no MCP).
    Eventsource,
}

/// `--client-bug` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClientBug {
    /// After a cut resume, resume again with the original cursor.
    StaleCursor,
}

/// Why `tearline load` failed.
#[derive(Debug, Error)]
pub enum CliError {
    /// `--target` is not a usable URL.
    #[error("bad --target")]
    Target(#[from] TargetError),
    /// `--args` is not a JSON object.
    #[error("--args must be a JSON object")]
    Args(#[source] Option<serde_json::Error>),
    /// The run could not start.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The report directory could not be written.
    #[error("cannot write the report directory")]
    Report(#[from] crate::report::ReportError),
    /// Flags that do not go together.
    #[error("{0}")]
    Flags(&'static str),
    /// The EventSource client ended without the feed's final event.
    #[error(
        "the EventSource feed did not complete ({0}); raise --max-attempts or --timeout, or \
         check that --target serves text/event-stream"
    )]
    Incomplete(String),
    /// A `--fail-on` names a policy or histogram the load will not produce (checked before it
    /// starts).
    #[error("--fail-on names what this load does not report (checked before it starts)")]
    Names(#[source] crate::report::ThresholdError),
    /// A `--fail-on` could not be evaluated against the load's report.
    #[error("cannot evaluate a --fail-on threshold")]
    Threshold(#[source] crate::report::ThresholdError),
    /// Every call failed.
    #[error("no call succeeded: {0}")]
    NothingSucceeded(String),
}

/// The `--target`, over HTTP/2 with its connection pool when `--http2` is given.
pub fn target(args: &Args) -> Result<Target, CliError> {
    let target = Target::parse_with_ca(&args.target, &args.cacert)?;
    if !args.http2 {
        return Ok(target);
    }
    let connections = match args.h2_connections {
        Some(0) => return Err(CliError::Flags("--h2-connections must be at least 1")),
        Some(n) => n,
        None => args.sessions.div_ceil(100).max(1),
    };
    Ok(target.with_http2(connections, &args.cacert)?)
}

/// Builds the run configuration from the flags.
pub fn config(args: &Args) -> Result<LoadConfig, CliError> {
    let target = target(args)?;
    let tool_args: serde_json::Value =
        serde_json::from_str(&args.args).map_err(|e| CliError::Args(Some(e)))?;
    if !tool_args.is_object() {
        return Err(CliError::Args(None));
    }
    let mut cfg = LoadConfig::new(target, &args.tool, tool_args);
    cfg.sessions = args.sessions;
    cfg.stop = match (args.calls, args.duration) {
        (Some(n), _) => Stop::Calls(n),
        (None, Some(d)) => Stop::Duration(d),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    cfg.rate = args.rate;
    cfg.max_attempts = args.max_attempts;
    cfg.call_timeout = args.timeout;
    cfg.connect_timeout = args.connect_timeout;
    cfg.head_timeout = args.head_timeout;
    cfg.backoff = args.backoff;
    cfg.max_traces = if args.report_dir.is_some() {
        args.traces.max(10_000)
    } else {
        args.traces
    };
    cfg.era = args.era;
    cfg.token.clone_from(&args.token);
    cfg.resume_token.clone_from(&args.resume_token);
    cfg.progress = true;
    cfg.segment = args.segment;
    cfg.start_at = args.start_at;
    cfg.stale_cursor = args.client_bug == Some(ClientBug::StaleCursor);
    Ok(cfg)
}

/// Runs `tearline load`.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    if args.client == ClientKind::Eventsource {
        if !args.fail_on.is_empty() {
            return Err(CliError::Flags(
                "--fail-on is for the MCP and LLM clients (they write a report); drop it for \
                 --client eventsource",
            ));
        }
        return eventsource::run(&args).await;
    }
    if args.side_path.is_some() {
        return Err(CliError::Flags(
            "--side-path is for --client eventsource; drop it for the MCP client",
        ));
    }
    let target = target(&args)?;
    if crate::vocab::LlmApi::from_path(&target.path).is_some() {
        return llm::run(&args, target).await;
    }
    let base = config(&args)?;
    let policies: Vec<Policy> = args
        .policy
        .0
        .iter()
        .map(|&p| match p {
            Policy::Strict if args.reissue_unsafe => Policy::Retry,
            p => p,
        })
        .collect();
    let labels: Vec<&str> = policies.iter().map(|p| p.as_str()).collect();
    verdict::check_before(&args, &labels, false)?;
    let ran = per_policy(policies, |policy, shutdown| {
        let mut cfg = base.clone();
        cfg.policy = policy;
        async move { Ok(crate::load::run(cfg, shutdown).await?) }
    })
    .await?;
    let outcomes = &ran.done;
    let interruption = ran.interruption(outcomes.last().map(|o| o.policy.to_string()));
    write_report(&args, outcomes, &base.target, None, interruption.as_ref())?;
    if args.json {
        let mut v = summary::json(outcomes);
        mark_interrupted(&mut v, interruption.as_ref());
        println!("{v:#}");
    } else {
        if let Some(i) = &interruption {
            println!("{}", i.line());
        }
        print!("{}", summary::text(outcomes));
    }
    if ran.interrupted.is_some() {
        verdict::not_evaluated(&args);
        return Ok(ran.exit(ExitCode::SUCCESS));
    }
    verdict::judge(&args, outcomes, &base.target)
}

/// Adds `"interrupted"` to a `--json` summary when a signal cut the run short.
fn mark_interrupted(v: &mut serde_json::Value, i: Option<&crate::report::Interruption>) {
    if let (Some(i), Some(map)) = (i, v.as_object_mut()) {
        map.insert(
            "interrupted".to_owned(),
            serde_json::to_value(i).unwrap_or_default(),
        );
    }
}

/// What [`per_policy`] ran: the runs that finished and, when a signal stopped it, which.
pub struct Ran<T> {
    /// The runs, in policy order (the interrupted one included: it stopped its calls).
    pub done: Vec<T>,
    /// The signal, the run's share of time until it came, and the policies never started.
    pub interrupted: Option<(Signal, std::time::Duration, Vec<String>)>,
}

impl<T> Ran<T> {
    /// The report's record of the interrupt, if any; `during` names the policy that ran then.
    pub fn interruption(&self, during: Option<String>) -> Option<crate::report::Interruption> {
        self.interrupted
            .as_ref()
            .map(|(signal, at, not_run)| crate::report::Interruption {
                signal: signal.name().to_owned(),
                at_ms: crate::units::millis(*at),
                during,
                not_run: not_run.clone(),
            })
    }

    /// Prints the interrupt (if any) and returns the exit code: 130/143 when interrupted, else
    /// `ok`.
    pub fn exit(&self, ok: ExitCode) -> ExitCode {
        match &self.interrupted {
            Some((signal, at, not_run)) => {
                eprintln!(
                    "tearline load: interrupted by {} after {:.1} s{}; calls in flight were not \
                     counted (exit {})",
                    signal.name(),
                    at.as_secs_f64(),
                    if not_run.is_empty() {
                        String::new()
                    } else {
                        format!("; policies not run: {}", not_run.join(", "))
                    },
                    signal.exit_code()
                );
                ExitCode::from(signal.exit_code())
            }
            None => ok,
        }
    }
}

/// Runs `one` for each policy in turn (with the token a signal cancels) until every policy
/// ran, one failed (its error is returned), or SIGINT/SIGTERM came (the runs so far are
/// returned, with the signal and the policies not run).
async fn per_policy<P: std::fmt::Display, T, Fut>(
    policies: impl IntoIterator<Item = P>,
    mut one: impl FnMut(P, CancellationToken) -> Fut,
) -> Result<Ran<T>, CliError>
where
    Fut: std::future::Future<Output = Result<T, CliError>>,
{
    let shutdown = CancellationToken::new();
    let started = std::time::Instant::now();
    let interrupt = crate::cmd::signals::spawn_signal_watch(
        shutdown.clone(),
        "stopping the calls in flight, then printing what ran".to_owned(),
    )
    .ok();
    let mut done = Vec::new();
    let mut not_run = Vec::new();
    for policy in policies {
        if shutdown.is_cancelled() {
            not_run.push(policy.to_string());
            continue;
        }
        done.push(one(policy, shutdown.clone()).await?);
    }
    let interrupted = interrupt
        .as_ref()
        .and_then(crate::cmd::signals::Interrupt::caught)
        .map(|(signal, at)| (signal, at.saturating_duration_since(started), not_run));
    Ok(Ran { done, interrupted })
}

/// With `--report-dir`: writes the run's report there (with an LLM run's `run_id`, marked
/// interrupted if a signal cut it short) and says where on stderr.
fn write_report(
    args: &Args,
    outcomes: &[LoadOutcome],
    target: &Target,
    run_id: Option<String>,
    interruption: Option<&crate::report::Interruption>,
) -> Result<(), CliError> {
    if let Some(dir) = &args.report_dir {
        let written = agent::write(outcomes, target, args.seed, run_id, interruption, dir)?;
        eprintln!("report: {}", written.dir.display());
    }
    Ok(())
}
