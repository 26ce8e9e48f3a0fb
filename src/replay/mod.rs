//! `tearline replay`: the documents' 250 ms reset load test in one command.
//!
//! For each client policy (strict, then naive) it starts a lab server (ring buffer of 64 events,
//! `on-evicted = fresh`, as in seed 004) unless the user brings a server, a proxy with the
//! profile's faults (by default `profiles/reset-250ms.toml`: one reset at a uniformly random
//! byte of each SSE stream, then a 250 ms outage) and the HTTP/SSE observer feeding the audit,
//! and the load client calling the `blob` tool (4 MiB results over SSE) — all on loopback ports
//! chosen by the OS. It then tells the story of one affected call, prints the summary and
//! writes the reports.
//!
//! Reproducible: the seed fixes every fault decision (connection `i` of each phase draws the
//! same decisions) and is recorded in the report with the profile's text.

pub mod assemble;
pub mod hold_story;
pub mod legs;
pub mod llm;
pub mod phase;
pub mod reconcile;
pub mod scenario;
pub mod story;
pub mod tap;

use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::lab::LabConfig;
use crate::load::{Policy, Stop};
use crate::profile::Profile;
use crate::report::{Report, Target};

pub use phase::PhaseOutcome;

/// The shipped profile of the documents' test, used when the working directory has no
/// `profiles/reset-250ms.toml`.
pub const BUILTIN_PROFILE: &str = include_str!("../../profiles/reset-250ms.toml");

/// Where the default profile is looked up first.
pub const DEFAULT_PROFILE_PATH: &str = "profiles/reset-250ms.toml";

/// One replay run.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// Concurrent MCP sessions per policy.
    pub sessions: usize,
    /// When each policy's load stops.
    pub stop: Stop,
    /// The run's seed.
    pub seed: u64,
    /// `blob` result size in bytes.
    pub size: u64,
    /// `data:` lines the result event is split across.
    pub lines: u32,
    /// The lab server's configuration (unused with `upstream`).
    pub lab: LabConfig,
    /// The user's server (`HOST:PORT`) instead of the lab.
    pub upstream: Option<String>,
    /// The MCP endpoint path.
    pub target_path: String,
    /// Per-call timeout of the load client.
    pub call_timeout: Duration,
    /// Policies to run, in order.
    pub policies: Vec<Policy>,
    /// Progress bars on stderr (only shown on a terminal).
    pub progress: bool,
    /// Where each phase's findings are logged as JSONL (`findings-<label>.jsonl`: `strict`,
    /// `naive`, `retry`), if anywhere.
    pub findings_dir: Option<PathBuf>,
    /// Every leg over TLS (`--tls`): the local CA in this directory issues the lab's and the
    /// proxy's certificates; the proxy and the load client trust it.
    pub tls_ca_dir: Option<PathBuf>,
    /// Which document's run (`scenario::Scenario`): the lab's era and the phases.
    pub scenario: scenario::Scenario,
    /// The audit's `abandon_after` (`--abandon-after`); `None`: the audit's default.
    pub abandon_after: Option<Duration>,
    /// The audit's `rst_unread` (`--rst-unread`); `None`: the audit's default.
    pub rst_unread: Option<Duration>,
    /// The load client speaks HTTP/2 (`--http2`): h2c through the proxy (ALPN h2 with
    /// `tls_ca_dir`), its sessions over one connection per 100; the lab answers either.
    pub http2: bool,
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A loopback listener could not be bound.
    #[error("cannot bind a loopback port")]
    Bind {
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The findings log could not be opened.
    #[error("cannot open the findings log")]
    Audit {
        /// The audit's error.
        #[source]
        source: crate::audit::AuditError,
    },
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The HTTP/2 client could not be set up (`--http2`).
    #[error("--http2: {0}")]
    Http2(String),
    /// The user's server (`--upstream`) could not be reached at all.
    #[error("cannot reach --upstream {address} (is your MCP server running and listening there?)")]
    Unreachable {
        /// The address as given.
        address: String,
        /// The connect error.
        #[source]
        source: std::io::Error,
    },
    /// The user's server answered, but not as the MCP server the run needs.
    #[error(
        "your server at --upstream {address} (reached through tearline's proxy) did not answer \
         as an MCP server at {path} (--target-path)"
    )]
    UpstreamLoad {
        /// The address as given.
        address: String,
        /// The MCP endpoint path.
        path: String,
        /// The load client's error.
        #[source]
        source: Box<crate::load::LoadError>,
    },
    /// The load client could not run against the target.
    #[error("the load client could not run")]
    Load {
        /// The load client's error.
        #[source]
        source: crate::load::LoadError,
    },
}

/// A finished replay: its report and the phases it came from.
pub struct ReplayOutcome {
    /// The report (files not yet written).
    pub report: Report,
    /// One phase per policy, in run order (those that started).
    pub phases: Vec<PhaseOutcome>,
    /// The phase a signal interrupted, if one did.
    pub during: Option<&'static str>,
    /// Phases that did not start because a signal had come.
    pub not_run: Vec<&'static str>,
}

/// Runs every policy's phase, one after the other, and assembles the report.
pub async fn run(
    cfg: &ReplayConfig,
    profile: &Profile,
    profile_text: &str,
    shutdown: &CancellationToken,
) -> Result<ReplayOutcome, ReplayError> {
    if let Some(address) = &cfg.upstream {
        reachable(address).await?;
    }
    let started = std::time::Instant::now();
    let started_at = std::time::SystemTime::now();
    let plans = cfg.scenario.phases(&cfg.policies, cfg.size);
    let mut phases = Vec::with_capacity(plans.len());
    let mut not_run = Vec::new();
    for plan in &plans {
        if shutdown.is_cancelled() {
            not_run.push(plan.label);
            continue;
        }
        let log = cfg
            .findings_dir
            .as_ref()
            .map(|d| d.join(format!("findings-{}.jsonl", plan.label)));
        let t0 = std::time::Instant::now();
        // On a terminal the progress bar names the phase; off one, a milestone line does.
        if !cfg.progress {
            eprintln!(
                "tearline replay: {} client ({}): {} through the proxy",
                plan.label,
                plan.tool,
                match cfg.stop {
                    crate::load::Stop::Calls(n) => format!("{n} calls"),
                    crate::load::Stop::Duration(d) => format!("calls for {d:?}"),
                }
            );
        }
        let phase = match phase::run_phase(cfg, profile, plan, log, shutdown).await {
            Err(ReplayError::Load { source }) if cfg.upstream.is_some() => {
                return Err(ReplayError::UpstreamLoad {
                    address: cfg.upstream.clone().unwrap_or_default(),
                    path: cfg.target_path.clone(),
                    source: Box::new(source),
                });
            }
            r => r?,
        };
        let c = &phase.load.counters;
        eprintln!(
            "tearline replay: {} client: {} calls in {:.1} s, {} ok, {} cuts, {} silently lost",
            plan.label,
            c.calls,
            t0.elapsed().as_secs_f64(),
            c.ok,
            phase.tap.cuts(),
            c.silent_loss
        );
        if c.failed > 0 {
            eprintln!(
                "tearline replay: {} client: {}",
                plan.label,
                failed_line(
                    &phase.load,
                    plan.attempts.unwrap_or(phase::DEFAULT_ATTEMPTS)
                )
            );
        }
        phases.push(phase);
    }
    let target = match &cfg.upstream {
        Some(address) => Target::User {
            address: address.clone(),
            path: cfg.target_path.clone(),
        },
        None => Target::Lab {
            address: phases
                .first()
                .map(|p| p.upstream.clone())
                .unwrap_or_default(),
            server_mode: format!(
                "ring={} on-evicted={}",
                cfg.lab.buffer,
                value_name(cfg.lab.on_evicted)
            ),
        },
    };
    let story = if cfg.scenario.is_llm() {
        llm::story(&phases)
    } else if cfg.scenario == scenario::Scenario::HoldHeaders {
        hold_story::tell(&phases, cfg.call_timeout)
    } else {
        story::tell(&phases)
    };
    let run = assemble::RunDescription {
        started_at,
        seed: cfg.seed,
        profile_name: profile.origin.clone(),
        profile_text: profile_text.to_owned(),
        target,
        elapsed: started.elapsed(),
    };
    let report = assemble::assemble(run, &phases, story);
    let during = phases.iter().find(|p| p.interrupted).map(|p| p.label);
    Ok(ReplayOutcome {
        report,
        phases,
        during,
        not_run,
    })
}

/// Connects once to the user's server, so a wrong `--upstream` is named as such before any
/// phase starts (not as the proxy's internal port failing later).
async fn reachable(address: &str) -> Result<(), ReplayError> {
    let connect = tokio::net::TcpStream::connect(address);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(source)) => Err(ReplayError::Unreachable {
            address: address.to_owned(),
            source,
        }),
        Err(_) => Err(ReplayError::Unreachable {
            address: address.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 5 s"),
        }),
    }
}

/// The command-line spelling of a clap value (`replay-from-oldest`).
pub fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .map_or_else(String::new, |p| p.get_name().to_owned())
}

/// Why a phase's calls failed, as far as the client's own records say: how many used every
/// attempt they had (each one cut or answered without the result) and how many ended sooner
/// (the call timeout, a refused session). A failed call is known to the client, unlike a
/// silently lost one.
fn failed_line(load: &crate::load::LoadOutcome, attempts: u32) -> String {
    let failed: Vec<_> = load
        .calls
        .iter()
        .filter(|c| c.end == crate::load::CallEnd::Failed)
        .collect();
    let used_all = failed
        .iter()
        .filter(|c| 1 + c.counts.resumes + c.counts.reissued >= u64::from(attempts))
        .count();
    let total = load.counters.failed;
    let mut line = format!("{total} failed, each known to the client (none taken as complete)");
    if used_all > 0 {
        line.push_str(&format!(
            "; {used_all} used all {attempts} attempts, every one cut or answered without the result"
        ));
    }
    let sooner = failed.len() - used_all;
    if sooner > 0 {
        line.push_str(&format!(
            "; {sooner} ended with attempts left (call timeout or a refused session)"
        ));
    }
    line
}
