//! Command-line surface of `tearline replay`: parses the run's knobs, loads the profile, runs the
//! phases, prints the story and the summary, writes the reports and applies `--fail-on`.
//!
//! Exit codes: 0 when the run finished and every threshold holds, 99 when a threshold failed
//! (k6's convention), 2 on errors (bad flags, unreadable profile, target not answering), 130 /
//! 143 when SIGINT / SIGTERM interrupted the run (the report is written, marked interrupted).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::lab::LabConfig;
use crate::lab::config::OnEvicted;
use crate::load::Stop;
use crate::load::config::PolicyList;
use crate::profile::{self, Profile, ProfileError};
use crate::replay::{BUILTIN_PROFILE, DEFAULT_PROFILE_PATH, ReplayConfig, ReplayError};
use crate::report::thresholds_names::Vocabulary;
use crate::report::{self, ReportError, Threshold, ThresholdError};

/// Arguments of `tearline replay`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  tearline replay                               # the documents' test against the lab server
  tearline replay --seed 7                      # reproduce a run: same seed, same cuts
  tearline replay --server-mode error           # a lab server that signals loss correctly
  tearline replay --scenario audience-narrowing  # seed 000: resume under a narrowed token
  tearline replay --scenario stateless          # the same cuts against MCP 2026-07-28
  tearline replay --upstream 127.0.0.1:8080 --target-path /mcp   # your own MCP server
  tearline replay --fail-on 'naive.silent-loss>0' --fail-on 'p99(strict.call)>5s'
  tearline replay --tls                         # every leg over TLS (local CA, created once)
  tearline replay --http2 --sessions 4          # the same story with the client on HTTP/2
  tearline replay --scenario goaway             # HTTP/2: a gateway's graceful GOAWAY, then its close
  tearline replay --scenario hold-headers       # HTTP/2: a hop holds SSE heads until the first event

Exit codes: 0 ok, 99 a --fail-on threshold failed, 2 error, 130/143 interrupted by SIGINT/SIGTERM
(the report says so and holds what ran; a second signal stops at once).")]
pub struct Args {
    /// Concurrent MCP sessions per client policy. With one (the default) a seed reproduces the
    /// run exactly; with more, connections reach the proxy in a varying order, so each
    /// connection's decisions still follow the seed but which call meets which cut varies.
    #[arg(long, default_value_t = 1)]
    pub sessions: usize,
    /// Calls per policy (over all sessions).
    #[arg(long, default_value_t = 24, conflicts_with = "duration")]
    pub calls: u64,
    /// Run each policy for this long instead of a number of calls (e.g. 20s, 1m).
    #[arg(long, value_parser = crate::units::parse_duration)]
    pub duration: Option<Duration>,
    /// Seed of every fault decision (default: the profile's seed, else random; always printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Fault profile (default: profiles/reset-250ms.toml, or the built-in copy of it).
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// What the lab server does when a resume asks for an evicted event.
    #[arg(long, value_enum, default_value_t = OnEvicted::Fresh)]
    pub server_mode: OnEvicted,
    /// Events in each lab session's ring buffer.
    #[arg(long, default_value_t = 64)]
    pub buffer: usize,
    /// Lab ring memory budget in bytes (oldest events are evicted when a stream's client
    /// disconnects and the ring holds more: the documents' eviction under memory pressure).
    #[arg(long, default_value_t = 1 << 20)]
    pub buffer_bytes: usize,
    /// `blob` result size in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub size: u64,
    /// `data:` lines the result event is split across.
    #[arg(long, default_value_t = 3)]
    pub lines: u32,
    /// Your MCP server (HOST:PORT) instead of the lab server.
    #[arg(long)]
    pub upstream: Option<String>,
    /// MCP endpoint path on the server.
    #[arg(long, default_value = "/mcp")]
    pub target_path: String,
    /// Client policies to run, in order: `strict`, `naive`, `retry`, a comma-separated list,
    /// or `both` (strict then naive). `--scenario stateless` adds a `retry` phase (calling the
    /// NOT idempotent `append`) when the list has none.
    #[arg(long, default_value = "both", value_name = "POLICY[,POLICY]")]
    pub policy: PolicyList,
    /// Per-call timeout.
    #[arg(long, default_value = "30s", value_parser = crate::units::parse_duration)]
    pub call_timeout: Duration,
    /// How long a cut call may wait for its answer, a resume or a proven re-send before the
    /// audit reports it `abandoned` (lost); at the end of each phase every such call is reported
    /// whatever it waited.
    #[arg(long, default_value = "30s", value_parser = crate::units::parse_duration)]
    pub abandon_after: Duration,
    /// After a TCP reset, events written less than this long before it may be unread by the
    /// client: a resume from inside that window is judged from its cursor, one behind older
    /// events is a stale cursor.
    #[arg(long, default_value = "50ms", value_parser = crate::units::parse_duration)]
    pub rst_unread: Duration,
    /// Report directory (default: ./tearline-report/<UTC timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Fail the run (exit 99) when this condition is TRUE, e.g. 'naive.silent-loss>0',
    /// 'p99(strict.call)>2s'; repeatable. Every name is checked before the run starts; the
    /// language is in `tearline report show --help`.
    #[arg(long = "fail-on", value_name = "EXPR")]
    pub fail_on: Vec<String>,
    /// Run every leg over TLS (load client → proxy → lab), with certificates from the local CA.
    #[arg(long)]
    pub tls: bool,
    /// The load client speaks HTTP/2 to the proxy (h2c by prior knowledge; ALPN h2 with
    /// --tls), its sessions multiplexed over one connection per 100; the lab answers h2 too.
    /// With `reset-250ms` and no --profile, the cut resets one stream (RST_STREAM CANCEL) at a
    /// random byte of half the SSE streams, instead of the TCP connection: the connection and
    /// its other streams flow on. A --profile whose sse_cut has `scope = "connection"` resets
    /// the whole connection (every stream on it ends) as over HTTP/1.1.
    #[arg(long)]
    pub http2: bool,
    /// Directory of the local CA for --tls (default: $XDG_DATA_HOME/tearline/ca or
    /// ~/.local/share/tearline/ca).
    #[arg(long, value_name = "DIR", env = "TEARLINE_CA_DIR")]
    pub tls_ca_dir: Option<PathBuf>,
    /// Which document to reproduce: `reset-250ms` (seed 004, 2025-11-25 resumption),
    /// `audience-narrowing` (seed 000: a resume under a narrowed per-tool audience ends
    /// cleanly with a call pending; its own built-in profile unless --profile is given) or
    /// `stateless` (the same cuts against MCP 2026-07-28: no resumption, re-issue or lose;
    /// plus a `retry` phase re-issuing the NOT idempotent `append`: `reexecuted`) or `goaway`
    /// (HTTP/2 only, implies --http2: a gateway's GOAWAY(NO_ERROR), then its close, cuts slow
    /// streams in flight; the naive client takes it as a normal end, the strict one resumes
    /// on a new connection; its own built-in profile unless --profile is given).
    #[arg(long, value_enum, default_value_t = crate::replay::scenario::Scenario::Reset250ms)]
    pub scenario: crate::replay::scenario::Scenario,
}

/// Errors of `tearline replay`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A `--fail-on` expression is malformed.
    #[error("--fail-on '{expr}'")]
    Threshold {
        /// The expression.
        expr: String,
        /// What is wrong.
        #[source]
        source: ThresholdError,
    },
    /// The profile is unreadable or invalid.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The run failed.
    #[error(transparent)]
    Replay(#[from] ReplayError),
    /// The reports could not be written or evaluated.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// A threshold names a policy or histogram the run will not produce (checked before it
    /// starts).
    #[error("--fail-on names what this run does not report (checked before it starts)")]
    Names(#[source] ThresholdError),
    /// A threshold could not be evaluated against the report.
    #[error("cannot evaluate a --fail-on threshold")]
    Evaluate(#[source] ThresholdError),
    /// `--sessions 0` or similar.
    #[error("{0}")]
    Usage(&'static str),
}

/// Runs `tearline replay`.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    let thresholds = args
        .fail_on
        .iter()
        .map(|expr| {
            expr.parse::<Threshold>()
                .map_err(|source| CliError::Threshold {
                    expr: expr.clone(),
                    source,
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    vocabulary(args.scenario, &args.policy.0, args.size)
        .check_all(&thresholds)
        .map_err(CliError::Names)?;
    if args.sessions == 0 {
        return Err(CliError::Usage("--sessions must be at least 1"));
    }
    let (profile, text) = match (&args.profile, args.scenario, args.http2) {
        (None, crate::replay::scenario::Scenario::Reset250ms, true) => {
            let text = crate::replay::scenario::http2_profile(args.size);
            (
                profile::parse(&text, "reset-250ms over HTTP/2 (built in)")?,
                text,
            )
        }
        _ => load_profile(args.profile.as_deref(), args.scenario)?,
    };
    let seed = args
        .seed
        .or(profile.seed)
        .unwrap_or_else(rand::random::<u64>);
    let out = args.out.clone().unwrap_or_else(report::default_out_dir);
    std::fs::create_dir_all(&out).map_err(|e| ReportError::io(&out, e))?;
    eprintln!(
        "tearline replay: seed {seed} (reproduce with --seed {seed}), profile {}",
        profile.origin
    );
    println!("{}", args.scenario.intro());
    if args.http2 && !args.scenario.implies_http2() {
        println!("{}", crate::replay::scenario::HTTP2_INTRO);
    }

    let mut cfg = config(&args, seed, &out);
    if args.tls {
        let dir = crate::tls::ca::dir(args.tls_ca_dir.as_deref()).map_err(ReplayError::from)?;
        cfg.tls_ca_dir = Some(dir);
    }
    let shutdown = CancellationToken::new();
    let started = std::time::Instant::now();
    let interrupt = super::signals::spawn_signal_watch(
        shutdown.clone(),
        "stopping the calls in flight, then writing the report of what ran".to_owned(),
    )
    .ok();
    let mut outcome = crate::replay::run(&cfg, &profile, &text, &shutdown).await?;
    let caught = interrupt
        .as_ref()
        .and_then(super::signals::Interrupt::caught);
    if let Some((signal, at)) = caught {
        outcome.report.facts.interrupted = Some(report::Interruption {
            signal: signal.name().to_owned(),
            at_ms: crate::units::millis(at.saturating_duration_since(started)),
            during: outcome.during.map(str::to_owned),
            not_run: outcome.not_run.iter().map(|s| (*s).to_owned()).collect(),
        });
    }

    println!("{}", crate::report::summary::render(&outcome.report));
    let written = report::write_all(&outcome.report, &out)?;
    println!("reports written to {}", written.dir.display());

    if let Some((signal, _)) = caught {
        for t in &args.fail_on {
            println!("FAIL --fail-on '{t}': not evaluated, the run was interrupted");
        }
        eprintln!(
            "tearline replay: interrupted by {}; the report holds what ran (exit {})",
            signal.name(),
            signal.exit_code()
        );
        return Ok(ExitCode::from(signal.exit_code()));
    }
    let verdicts = report::thresholds::evaluate_all(&thresholds, &outcome.report)
        .map_err(CliError::Evaluate)?;
    for v in &verdicts {
        println!("{v}");
    }
    Ok(ExitCode::from(report::thresholds::exit_code(&verdicts)))
}

/// The policies and histograms a replay of `policies` in `scenario` will report, known before it starts: one
/// phase per policy (as the scenario plans them), each with the client's histograms (the LLM
/// client's in `llm-truncation`) and the audit's per-phase proxy histograms.
pub fn vocabulary(
    scenario: crate::replay::scenario::Scenario,
    policies: &[crate::load::Policy],
    size: u64,
) -> Vocabulary {
    let phases = scenario.phases(policies, size);
    let labels: Vec<&str> = phases.iter().map(|p| p.label).collect();
    let client: &[&str] = if scenario.is_llm() {
        &report::names::LLM_NAMES
    } else {
        &report::names::NAMES
    };
    Vocabulary::of_run(&labels, client, &crate::audit::histo::NAMES)
}

fn config(args: &Args, seed: u64, out: &std::path::Path) -> ReplayConfig {
    let mut lab = LabConfig {
        buffer: args.buffer,
        buffer_bytes: Some(args.buffer_bytes),
        on_evicted: args.server_mode,
        retry: Duration::from_millis(250),
        max_blob_bytes: usize::try_from(args.size)
            .unwrap_or(usize::MAX)
            .max(LabConfig::default().max_blob_bytes),
        ..LabConfig::default()
    };
    args.scenario.apply(&mut lab);
    let policies = args.policy.0.clone();
    ReplayConfig {
        sessions: args.sessions,
        stop: args
            .duration
            .map_or(Stop::Calls(args.calls), Stop::Duration),
        seed,
        size: args.size,
        lines: args.lines,
        lab,
        upstream: args.upstream.clone(),
        target_path: args.target_path.clone(),
        call_timeout: args.call_timeout,
        policies,
        progress: std::io::stderr().is_terminal(),
        findings_dir: Some(out.to_path_buf()),
        tls_ca_dir: None,
        scenario: args.scenario,
        abandon_after: Some(args.abandon_after),
        rst_unread: Some(args.rst_unread),
        http2: args.http2 || args.scenario.implies_http2(),
    }
}

/// The profile named on the command line, else the scenario's built-in one, else the shipped
/// default (from the working directory, else the built-in copy). Returns it with its text.
fn load_profile(
    path: Option<&std::path::Path>,
    scenario: crate::replay::scenario::Scenario,
) -> Result<(Profile, String), ProfileError> {
    let path = match (path, scenario.default_profile()) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(text)) => {
            let label = format!("{} (built in)", crate::replay::value_name(scenario));
            let profile = profile::parse(text, &label)?;
            return Ok((profile, text.to_owned()));
        }
        (None, None) if std::path::Path::new(DEFAULT_PROFILE_PATH).is_file() => {
            PathBuf::from(DEFAULT_PROFILE_PATH)
        }
        (None, None) => {
            let label = format!("{DEFAULT_PROFILE_PATH} (built in)");
            let profile = profile::parse(BUILTIN_PROFILE, &label)?;
            return Ok((profile, BUILTIN_PROFILE.to_owned()));
        }
    };
    let text = std::fs::read_to_string(&path).map_err(|error| ProfileError::Read {
        path: path.display().to_string(),
        error,
    })?;
    let profile = profile::parse(&text, &path.display().to_string())?;
    Ok((profile, text))
}
