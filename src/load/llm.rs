//! The load client on LLM token streams: `tearline load --target http://HOST:PORT/v1/…` (a
//! path that names an LLM API) drives concurrent users, each sending streaming requests under
//! a policy ([`super::llm_call`]: strict re-sends an answer that lacks its completion signal,
//! naive takes it), and measures what users feel.
//!
//! Invariants of [`run`]: every logical request lands in exactly one of `ok` (complete),
//! `failed` (visible failure) and `silent_loss` (a truncated answer taken as complete), so
//! the counters balance as the MCP client's do; `reissued` counts re-sends, and
//! [`LlmExtras::truncations`] the answers strict refused for a missing completion signal
//! (`retry` behaves as `strict` here: LLM requests have no annotations); latencies are
//! measured from each request's intended start (open loop under `rate`, no coordinated
//! omission) and recorded per user, merged at the end; the key sent (`api_key`) is never
//! logged, counted or recorded.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::config::{Policy, Stop, Target};
use super::histo::{Histograms, Pacer};
use super::llm_call::{Ask, AttemptEnd, CallRecord, Outcome, Timings, attempt, request_body};
use super::stats::Counters;
use super::{LoadError, LoadOutcome};
use crate::report::names::{LLM_E2E, LLM_ITL, LLM_NAMES, LLM_TPOT, LLM_TTFT};
use crate::vocab::LlmApi;

/// One LLM load run.
#[derive(Debug, Clone)]
pub struct LlmLoadConfig {
    /// The endpoint (its path names the API).
    pub target: Target,
    /// The API (from the target's path).
    pub api: LlmApi,
    /// The client policy.
    pub policy: Policy,
    /// Concurrent users.
    pub sessions: usize,
    /// When to stop.
    pub stop: Stop,
    /// Requests per second over all users (open loop), or closed loop when `None`.
    pub rate: Option<f64>,
    /// `model` of every request.
    pub model: String,
    /// Output token limit of every request.
    pub max_tokens: u32,
    /// Offer a tool the answer must call.
    pub tools: bool,
    /// The key sent as `Authorization: Bearer` (and `x-api-key` for Messages); never logged.
    pub api_key: Option<String>,
    /// Attempts per logical request (strict), at least 1.
    pub max_attempts: u32,
    /// Longest silence (before the head, or between body bytes) before an attempt is given up.
    pub idle_timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Pause before a re-send.
    pub backoff: Duration,
    /// Names this run's requests: every key is `tl-llm-<run id>-<policy>-<call>` and every
    /// prompt names its key, so no two runs (random by default) and no two phases of one run
    /// (the policy) send the same key or body — a later run's request is never "proof" that an
    /// earlier run's truncated answer was re-sent.
    pub run_id: u64,
    /// Logical requests remembered for the story and the truth (at most).
    pub max_records: usize,
}

impl LlmLoadConfig {
    /// A configuration for `target` (whose path must name an LLM API) with `policy`.
    pub fn new(target: Target, policy: Policy) -> Result<LlmLoadConfig, LoadError> {
        let api = LlmApi::from_path(&target.path).ok_or(LoadError::Config(
            "the target's path names no LLM API (…/v1/chat/completions, …/chat/completions, …/v1/responses, …/v1/messages)",
        ))?;
        Ok(LlmLoadConfig {
            target,
            api,
            policy,
            sessions: 4,
            stop: Stop::Calls(32),
            rate: None,
            model: "tearline-lab".to_owned(),
            max_tokens: 1024,
            tools: false,
            api_key: None,
            max_attempts: 8,
            idle_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            backoff: Duration::from_millis(20),
            run_id: rand::random(),
            max_records: 10_000,
        })
    }
}

/// What an LLM run measured beyond [`LoadOutcome`].
#[derive(Debug, Clone, Default)]
pub struct LlmExtras {
    /// Output tokens of the answers the client kept.
    pub tokens: u64,
    /// Output tokens per second over the run (kept answers' tokens / wall time).
    pub tokens_per_s: f64,
    /// Answers the strict client refused because their completion signal never came (the body
    /// ended cleanly without it): truncations detected.
    pub truncations: u64,
    /// Logical requests (at most `max_records`), in completion order.
    pub records: Vec<CallRecord>,
}

/// Runs `cfg` until its stop condition (or `shutdown`).
pub async fn run(
    cfg: LlmLoadConfig,
    shutdown: CancellationToken,
) -> Result<(LoadOutcome, LlmExtras), LoadError> {
    if cfg.sessions == 0 {
        return Err(LoadError::Config("sessions must be at least 1"));
    }
    if cfg.max_attempts == 0 {
        return Err(LoadError::Config("max attempts must be at least 1"));
    }
    if cfg.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        return Err(LoadError::Config("rate must be a positive number"));
    }
    let cfg = Arc::new(cfg);
    let start = Instant::now();
    let started_at = std::time::SystemTime::now();
    let series = super::series::Series::new(start);
    let tickets = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..cfg.sessions {
        let mut histos = Histograms::with_names(&LLM_NAMES);
        histos.attach(series.recorder());
        tasks.spawn(user(
            Arc::clone(&cfg),
            index,
            start,
            Arc::clone(&tickets),
            histos,
            shutdown.clone(),
        ));
    }
    let mut counters = Counters::default();
    let mut histos = Histograms::with_names(&LLM_NAMES);
    let mut extras = LlmExtras::default();
    let mut errors: BTreeMap<&'static str, u64> = BTreeMap::new();
    while let Some(joined) = tasks.join_next().await {
        let Ok(u) = joined else {
            *errors.entry("task-panicked").or_insert(0) += 1;
            continue;
        };
        counters.merge(&u.counters);
        histos.merge(&u.histos);
        extras.tokens += u.tokens;
        extras.truncations += u.truncations;
        for r in u.records {
            if extras.records.len() < cfg.max_records {
                extras.records.push(r);
            }
        }
        for (k, v) in u.errors {
            *errors.entry(k).or_insert(0) += v;
        }
    }
    let elapsed = start.elapsed();
    extras.tokens_per_s = extras.tokens as f64 / elapsed.as_secs_f64().max(1e-9);
    extras.records.sort_by_key(|r| r.call);
    let outcome = LoadOutcome {
        policy: cfg.policy,
        counters,
        histograms: histos.into_map(),
        traces: Vec::new(),
        calls: Vec::new(),
        errors,
        // The LLM client counts statuses and broken streams; it keeps no server message.
        error_messages: BTreeMap::new(),
        elapsed,
        started_at,
        per_second: series.snapshot(),
        segment: super::segment::Segment::default(),
        sessions: 0..cfg.sessions,
    };
    Ok((outcome, extras))
}

/// What one user recorded.
struct User {
    counters: Counters,
    histos: Histograms,
    tokens: u64,
    truncations: u64,
    records: Vec<CallRecord>,
    errors: BTreeMap<&'static str, u64>,
}

async fn user(
    cfg: Arc<LlmLoadConfig>,
    index: usize,
    start: Instant,
    tickets: Arc<AtomicU64>,
    histos: Histograms,
    shutdown: CancellationToken,
) -> User {
    let mut u = User {
        counters: Counters::default(),
        histos,
        tokens: 0,
        truncations: 0,
        records: Vec::new(),
        errors: BTreeMap::new(),
    };
    let mut pacer = cfg.rate.map(|r| Pacer::new(start, r, cfg.sessions, index));
    for k in 0u64.. {
        let intended = match pacer.as_mut() {
            Some(p) => p.next_intended(),
            None => Instant::now(),
        };
        let admitted = match cfg.stop {
            Stop::Calls(n) => tickets.fetch_add(1, Ordering::Relaxed) < n,
            Stop::Duration(d) => intended < start + d,
        };
        if shutdown.is_cancelled() || !admitted {
            break;
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(intended) => {}
        }
        let call = ((index as u64) << 32) | k;
        let record = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = one_call(&cfg, call, intended, &mut u) => r,
        };
        if u.records.len() < cfg.max_records {
            u.records.push(record);
        }
    }
    u
}

/// The `Idempotency-Key` of logical request `call` of run `run_id` under `policy`: unique per
/// run and phase, repeated only on that request's own re-sends.
pub fn request_key(run_id: u64, policy: Policy, call: u64) -> String {
    format!("tl-llm-{run_id:016x}-{}-{call}", policy.as_str())
}

/// One logical request under the policy.
async fn one_call(cfg: &LlmLoadConfig, call: u64, intended: Instant, u: &mut User) -> CallRecord {
    let key = request_key(cfg.run_id, cfg.policy, call);
    let body = request_body(cfg.api, &cfg.model, cfg.max_tokens, cfg.tools, &key);
    let ask = Ask {
        target: &cfg.target,
        api: cfg.api,
        body: &body,
        key: &key,
        api_key: cfg.api_key.as_deref(),
        connect_timeout: cfg.connect_timeout,
        idle_timeout: cfg.idle_timeout,
    };
    let attempts_allowed = match cfg.policy {
        Policy::Strict | Policy::Retry => cfg.max_attempts,
        Policy::Naive => 1,
    };
    let mut attempts = Vec::new();
    let mut timings = Timings::default();
    let mut outcome = Outcome::Failed;
    for n in 0..attempts_allowed {
        if n > 0 {
            u.counters.reissued += 1;
            tokio::time::sleep(cfg.backoff).await;
        }
        let a = attempt(&ask, n, intended, &mut timings).await;
        let end = a.end.clone();
        attempts.push(a);
        match (&end, cfg.policy) {
            (AttemptEnd::Complete, _) => {
                outcome = Outcome::Complete;
                break;
            }
            (AttemptEnd::CleanEnd, Policy::Naive) => {
                outcome = Outcome::AcceptedPartial;
                break;
            }
            (AttemptEnd::Status { .. }, _) => {
                u.counters.explicit_errors += 1;
                *u.errors.entry("status").or_insert(0) += 1;
            }
            (AttemptEnd::Broken { error }, _) => *u.errors.entry(error).or_insert(0) += 1,
            (AttemptEnd::Timeout, _) => *u.errors.entry("timeout").or_insert(0) += 1,
            (AttemptEnd::CleanEnd, Policy::Strict | Policy::Retry) => {
                // The body ended as if complete, without the completion signal: a truncation
                // the strict client detects.
                u.truncations += 1;
            }
        }
    }
    u.counters.calls += 1;
    u.counters.events += attempts
        .iter()
        .map(|a| a.deltas + a.arg_pieces)
        .sum::<u64>();
    match outcome {
        Outcome::Complete => u.counters.ok += 1,
        Outcome::AcceptedPartial => u.counters.silent_loss += 1,
        Outcome::Failed => u.counters.failed += 1,
    }
    if outcome != Outcome::Failed {
        u.tokens += timings.tokens;
        if let Some(d) = timings.ttft {
            u.histos.record(LLM_TTFT, d);
        }
        for d in &timings.itl {
            u.histos.record(LLM_ITL, *d);
        }
        if let Some(d) = timings.tpot {
            u.histos.record(LLM_TPOT, d);
        }
        if let Some(d) = timings.e2e {
            u.histos.record(LLM_E2E, d);
        }
    }
    CallRecord {
        call,
        key,
        attempts,
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_across_runs_and_policies_and_repeat_only_for_one_request() {
        let a = request_key(0x1f, Policy::Naive, 3);
        assert_eq!(a, "tl-llm-000000000000001f-naive-3");
        assert_eq!(a, request_key(0x1f, Policy::Naive, 3));
        assert_ne!(a, request_key(0x20, Policy::Naive, 3));
        assert_ne!(a, request_key(0x1f, Policy::Strict, 3));
        assert_ne!(a, request_key(0x1f, Policy::Naive, 4));
    }

    #[test]
    fn every_configuration_draws_its_own_run_id() {
        let target = Target::parse("http://127.0.0.1:1/v1/messages").expect("target");
        let ids: std::collections::BTreeSet<u64> = (0..8)
            .map(|_| {
                LlmLoadConfig::new(target.clone(), Policy::Naive)
                    .expect("config")
                    .run_id
            })
            .collect();
        assert_eq!(ids.len(), 8);
    }
}
