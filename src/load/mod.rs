//! The load client: many concurrent MCP Streamable HTTP sessions calling one tool, following
//! each call's SSE stream through disconnects the way real clients do, and measuring what users
//! feel.
//!
//! Two policies ([`Policy`]): `strict` resumes only from a dispatched event's id, counts a
//! partial event at a disconnect as a torn-boundary detection (seed 004), verifies replays and
//! results, and takes a call as complete only with its result (seed 000); `naive` is the
//! documents' client. Run both on the same target to see the silent loss the naive one suffers.
//!
//! Invariants of [`run`]:
//! - The target is probed with one `initialize` first: a bad target (refused, not HTTP, 404,
//!   silent) fails the run with [`LoadError::Target`] within the connect timeout.
//! - Every finished call is counted once: `calls == ok + failed + silently_lost`.
//! - Latencies are measured from each call's intended start ([`histo::Pacer`]) and recorded in
//!   per-task histograms merged at the end (no contention, no coordinated omission).
//! - Cancelling `shutdown` stops issuing calls and abandons calls in flight (not counted).

pub mod call;
pub mod cli;
pub mod config;
pub mod consume;
pub mod eventsource;
pub mod histo;
pub mod http;
pub mod policy;
pub mod progress;
pub mod session;
pub mod stats;
pub mod summary;
pub mod tail;
pub mod truth;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use thiserror::Error;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use config::{LoadConfig, Policy, Stop, Target, TargetError};
pub use session::SessionError;
pub use stats::{CallEnd, CallTrace, Counters, ResumeAnswer};

/// Why a run could not start.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The configuration is unusable.
    #[error("invalid load configuration: {0}")]
    Config(&'static str),
    /// The target did not open a session.
    #[error("target {target} does not answer as an MCP server")]
    Target {
        /// The target URL.
        target: String,
        /// What went wrong.
        #[source]
        source: SessionError,
    },
}

/// What a run measured.
#[derive(Debug)]
pub struct LoadOutcome {
    /// The policy the run used.
    pub policy: Policy,
    /// Counters over all sessions.
    pub counters: Counters,
    /// Histograms by name ([`histo::NAMES`]), µs.
    pub histograms: BTreeMap<&'static str, Histogram<u64>>,
    /// Disconnect stories (bounded by `max_traces`).
    pub traces: Vec<CallTrace>,
    /// Failures by kind.
    pub errors: BTreeMap<&'static str, u64>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Runs `config` until its stop condition (or `shutdown`), then merges what every session
/// task recorded.
pub async fn run(
    config: LoadConfig,
    shutdown: CancellationToken,
) -> Result<LoadOutcome, LoadError> {
    if config.sessions == 0 {
        return Err(LoadError::Config("sessions must be at least 1"));
    }
    if config.max_attempts == 0 {
        return Err(LoadError::Config("max attempts must be at least 1"));
    }
    if config.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(LoadError::Config("rate must be a positive number"));
    }
    let probe_deadline = Instant::now() + config.connect_timeout;
    let first = session::Session::open(&config, probe_deadline)
        .await
        .map_err(|source| LoadError::Target {
            target: config.target.to_string(),
            source,
        })?;
    let cfg = Arc::new(config);
    let start = Instant::now();
    let tally = Arc::new(progress::Tally::default());
    let bar_stop = CancellationToken::new();
    let bar = if cfg.progress {
        progress::spawn(
            Arc::clone(&tally),
            cfg.stop,
            cfg.policy.as_str(),
            bar_stop.clone(),
        )
    } else {
        None
    };
    let tickets = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    let mut first = Some(first);
    for index in 0..cfg.sessions {
        let worker = call::Worker::new(Arc::clone(&cfg), first.take());
        let plan = Plan {
            cfg: Arc::clone(&cfg),
            start,
            index,
            tickets: Arc::clone(&tickets),
            tally: Arc::clone(&tally),
        };
        tasks.spawn(session_task(worker, plan, shutdown.clone()));
    }
    let mut counters = Counters::default();
    let mut histos = histo::Histograms::default();
    let mut traces = Vec::new();
    let mut errors: BTreeMap<&'static str, u64> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let Ok(w) = joined else {
            *errors.entry("task-panicked").or_insert(0) += 1;
            continue;
        };
        counters.merge(&w.counters);
        histos.merge(&w.histos);
        for t in w.traces {
            if traces.len() < cfg.max_traces {
                traces.push(t);
            }
        }
        for (k, v) in w.errors {
            *errors.entry(k).or_insert(0) += v;
        }
    }
    bar_stop.cancel();
    if let Some(bar) = bar {
        let _ = bar.await;
    }
    Ok(LoadOutcome {
        policy: cfg.policy,
        counters,
        histograms: histos.into_map(),
        traces,
        errors,
        elapsed: start.elapsed(),
    })
}

/// What a session task needs to know to pace and stop.
struct Plan {
    cfg: Arc<LoadConfig>,
    start: Instant,
    index: usize,
    tickets: Arc<AtomicU64>,
    tally: Arc<progress::Tally>,
}

impl Plan {
    /// True if the run may issue a call intended at `intended` (takes a ticket for `--calls`).
    fn admit(&self, intended: Instant) -> bool {
        match self.cfg.stop {
            Stop::Calls(n) => self.tickets.fetch_add(1, Ordering::Relaxed) < n,
            Stop::Duration(d) => intended < self.start + d,
        }
    }
}

async fn session_task(
    mut worker: call::Worker,
    plan: Plan,
    shutdown: CancellationToken,
) -> call::Worker {
    let mut pacer = plan
        .cfg
        .rate
        .map(|r| histo::Pacer::new(plan.start, r, plan.cfg.sessions, plan.index));
    loop {
        let intended = match pacer.as_mut() {
            Some(p) => p.next_intended(),
            None => Instant::now(),
        };
        if shutdown.is_cancelled() || !plan.admit(intended) {
            break;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(intended) => {}
        }
        let end = tokio::select! {
            _ = shutdown.cancelled() => break,
            end = worker.call(intended) => end,
        };
        plan.tally.note(end);
    }
    worker
}
