//! Command-line surface of `tearline load`: flags → [`LoadConfig`], one run per policy
//! (`--policy both` runs strict then naive on the same target), then a summary on stdout.
//!
//! Invariant: a bad target or bad flags end in an error (non-zero exit) before any load is
//! generated; the progress bar goes to stderr only when it is a terminal.

use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use thiserror::Error;
use tokio_util::sync::CancellationToken;

use super::config::{LoadConfig, Policy, Stop, Target, TargetError};
use super::{LoadError, summary};

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

Policies:
  strict  cursor = last dispatched event id; a partial event at a disconnect is a torn-boundary
          detection; replays are verified; a call completes only with its verified result;
          a server that cannot replay makes the client renegotiate and re-issue the call.
  naive   cursor = last id line seen; resumes with it and accepts whatever comes; a clean stream
          end counts as completion (calls without a valid result are counted silently_lost).")]
pub struct Args {
    /// MCP endpoint URL (plain http).
    #[arg(long, default_value = "http://127.0.0.1:8931/mcp")]
    pub target: String,
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
    /// Client policy.
    #[arg(long, value_enum, default_value_t = PolicyArg::Strict)]
    pub policy: PolicyArg,
    /// Connections (POSTs and resume GETs) one call may use.
    #[arg(long, default_value_t = 5)]
    pub max_attempts: u32,
    /// Budget of one call.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Budget of a TCP connect and of the probe `initialize`.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// Reconnect delay when the server sent no `retry:`.
    #[arg(long, value_parser = parse_duration, default_value = "100ms")]
    pub backoff: Duration,
    /// Disconnect stories to keep per run.
    #[arg(long, default_value_t = 16)]
    pub traces: usize,
    /// MCP era: `auto` probes with server/discover and falls back to initialize; `legacy`
    /// always initializes (2025-11-25, resumable); `modern` always speaks 2026-07-28.
    #[arg(long, value_enum, default_value = "auto")]
    pub era: super::era::EraChoice,
    /// Bearer token sent on every request, e.g. a lab audience token
    /// `aud=https://lab/tools/search,https://lab/tools/fetch` (see `tearline serve --auth`).
    #[arg(long)]
    pub token: Option<String>,
    /// Print the summary as JSON (with the disconnect stories).
    #[arg(long)]
    pub json: bool,
}

/// `--policy` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// The correct client.
    Strict,
    /// The documents' client.
    Naive,
    /// Strict, then naive, on the same target.
    Both,
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
}

/// Builds the run configuration from the flags.
pub fn config(args: &Args) -> Result<LoadConfig, CliError> {
    let target = Target::parse(&args.target)?;
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
    cfg.backoff = args.backoff;
    cfg.max_traces = args.traces;
    cfg.era = args.era;
    cfg.token.clone_from(&args.token);
    cfg.progress = true;
    Ok(cfg)
}

/// Runs `tearline load`.
pub async fn run(args: Args) -> Result<ExitCode, CliError> {
    let base = config(&args)?;
    let policies: &[Policy] = match args.policy {
        PolicyArg::Strict => &[Policy::Strict],
        PolicyArg::Naive => &[Policy::Naive],
        PolicyArg::Both => &[Policy::Strict, Policy::Naive],
    };
    let shutdown = CancellationToken::new();
    let ctrl_c = shutdown.clone();
    let watcher = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let mut outcomes = Vec::new();
    for &policy in policies {
        let mut cfg = base.clone();
        cfg.policy = policy;
        let result = super::run(cfg, shutdown.clone()).await;
        match result {
            Ok(o) => outcomes.push(o),
            Err(e) => {
                watcher.abort();
                return Err(e.into());
            }
        }
        if shutdown.is_cancelled() {
            break;
        }
    }
    watcher.abort();
    if args.json {
        println!("{:#}", summary::json(&outcomes));
    } else {
        print!("{}", summary::text(&outcomes));
    }
    Ok(ExitCode::SUCCESS)
}
