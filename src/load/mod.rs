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
//! - The target is probed first (`server/discover`, then `initialize` unless it answered as a
//!   2026-07-28 server; see [`era`]): a bad target (refused, not HTTP, 404, silent) fails the
//!   run with [`LoadError::Target`] within the connect timeout.
//! - Every finished call is counted once: `calls == ok + failed + silent_loss`.
//! - Latencies are measured from each call's intended start ([`histo::Pacer`]) and recorded in
//!   per-task histograms merged at the end (no contention, no coordinated omission).
//! - Cancelling `shutdown` stops issuing calls and abandons calls in flight (not counted).
//! - A run executes its [`segment::Segment`] of the plan: the plan-wide sessions of its share,
//!   its share of `--calls`, each session paced as in the whole plan; every latency is also
//!   recorded per second of the run ([`series`]).

pub mod call;
pub mod config;
pub mod consume;
pub mod era;
pub mod eventsource;
pub mod h2;
pub mod h2_goaway;
pub mod histo;
pub mod http;
pub mod llm;
pub mod llm_call;
pub mod policy;
pub mod progress;
pub mod segment;
pub mod series;
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
pub use stats::{CallEnd, CallFacts, CallTrace, Counters, ResumeAnswer};

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
    /// Finished calls' facts (bounded by `keep_calls`; none by default).
    pub calls: Vec<CallFacts>,
    /// Failures by kind.
    pub errors: BTreeMap<&'static str, u64>,
    /// The first message of each failure kind that had one (the server's JSON-RPC error, the
    /// connection error).
    pub error_messages: BTreeMap<&'static str, String>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Wall-clock time at which the load started (second 0 of `per_second`).
    pub started_at: std::time::SystemTime,
    /// The histograms of each second of the run.
    pub per_second: series::PerSecond,
    /// The segment of the plan this run executed.
    pub segment: segment::Segment,
    /// The plan-wide indexes of the sessions this run ran.
    pub sessions: std::ops::Range<usize>,
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
    let owned = config.segment.sessions(config.sessions);
    if owned.is_empty() {
        return Err(LoadError::Config(
            "the segment has no session: use at most as many segments as sessions",
        ));
    }
    let mut config = config;
    // Paced `--calls`: call j of plan-wide session g is call g + j·sessions of the plan's
    // schedule, admitted if and only if that index is below the plan's calls.
    let paced_calls = match config.stop {
        Stop::Calls(n) if config.rate.is_some() => Some(n),
        _ => None,
    };
    if let Stop::Calls(n) = config.stop {
        config.stop = Stop::Calls(match paced_calls {
            Some(_) => config.segment.paced_calls(config.sessions, n),
            None => config.segment.calls(n),
        });
    }
    let probe_deadline = Instant::now() + config.connect_timeout;
    let first = session::Session::open(&config, probe_deadline)
        .await
        .map_err(|source| LoadError::Target {
            target: config.target.to_string(),
            source,
        })?;
    if let Some(at) = config.start_at
        && let Ok(wait) = at.duration_since(std::time::SystemTime::now())
    {
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
    let cfg = Arc::new(config);
    let start = Instant::now();
    let started_at = std::time::SystemTime::now();
    let series = series::Series::new(start);
    let tally = Arc::new(progress::Tally::default());
    let bar_stop = CancellationToken::new();
    let bar = if cfg.progress {
        progress::spawn(
            Arc::clone(&tally),
            cfg.stop,
            cfg.policy.as_str(),
            cfg.progress_note.clone(),
            bar_stop.clone(),
        )
    } else {
        None
    };
    let tickets = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    let mut first = Some(first);
    for index in owned.clone() {
        let mut worker = call::Worker::new(Arc::clone(&cfg), first.take());
        worker.id_base = segment::Segment::request_id_base(index);
        worker.histos.attach(series.recorder());
        let plan = Plan {
            cfg: Arc::clone(&cfg),
            start,
            index,
            tickets: Arc::clone(&tickets),
            tally: Arc::clone(&tally),
            paced_calls,
        };
        tasks.spawn(session_task(worker, plan, shutdown.clone()));
    }
    let mut counters = Counters::default();
    let mut histos = histo::Histograms::default();
    let mut traces = Vec::new();
    let mut calls = Vec::new();
    let mut errors: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut error_messages: BTreeMap<&'static str, String> = BTreeMap::new();
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
        let room = cfg.keep_calls.saturating_sub(calls.len());
        calls.extend(w.calls.into_iter().take(room));
        for (k, v) in w.errors {
            *errors.entry(k).or_insert(0) += v;
        }
        for (k, m) in w.error_messages {
            error_messages.entry(k).or_insert(m);
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
        calls,
        errors,
        error_messages,
        elapsed: start.elapsed(),
        started_at,
        per_second: series.snapshot(),
        segment: cfg.segment,
        sessions: owned,
    })
}

/// What a session task needs to know to pace and stop.
struct Plan {
    cfg: Arc<LoadConfig>,
    start: Instant,
    index: usize,
    tickets: Arc<AtomicU64>,
    tally: Arc<progress::Tally>,
    /// The plan's `--calls` under a rate (admission by schedule index, not by ticket).
    paced_calls: Option<u64>,
}

impl Plan {
    /// True if the run may issue call `j` of this session, intended at `intended` (takes a
    /// ticket for closed-loop `--calls`).
    fn admit(&self, intended: Instant, j: u64) -> bool {
        if let Some(calls) = self.paced_calls {
            return segment::Segment::admits(self.index, j, self.cfg.sessions, calls);
        }
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
    for j in 0u64.. {
        let intended = match pacer.as_mut() {
            Some(p) => p.next_intended(),
            None => Instant::now(),
        };
        if shutdown.is_cancelled() || !plan.admit(intended, j) {
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
