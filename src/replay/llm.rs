//! The `llm-truncation` scenario's own parts: its load (the LLM client against the lab's
//! `/v1/chat/completions` through the phase's proxy) and its story — one truncated answer the
//! naive client took as complete, one the strict client re-sent, each with the audit's verdict
//! from the wire.
//!
//! Invariant: the story states only what the client recorded (attempts, deltas, how each
//! ended) and what the audit found; it joins them by the request's `Idempotency-Key`, which the
//! client sends and the audit's findings name.

use tokio_util::sync::CancellationToken;

use super::ReplayConfig;
use super::phase::PhaseOutcome;
use super::scenario::LLM_PATH;
use crate::audit::{Finding, FindingKind};
use crate::load::llm::{LlmExtras, LlmLoadConfig};
use crate::load::llm_call::{Attempt, AttemptEnd, CallRecord, Outcome};
use crate::load::{LoadOutcome, Policy, Target};

/// Runs the phase's LLM load through the proxy at `target` (its path is replaced).
pub async fn run_load(
    cfg: &ReplayConfig,
    policy: Policy,
    mut target: Target,
    token: &CancellationToken,
) -> Result<(LoadOutcome, LlmExtras), crate::load::LoadError> {
    target.path = LLM_PATH.to_owned();
    let mut lc = LlmLoadConfig::new(target, policy)?;
    lc.sessions = cfg.sessions;
    lc.stop = cfg.stop;
    lc.idle_timeout = cfg.call_timeout;
    lc.max_tokens = 1024;
    // Half the answers are cut: sixteen attempts make a visible failure of the strict client
    // (every attempt cut) a one-in-65,536 event per request.
    lc.max_attempts = 16;
    crate::load::llm::run(lc, token.clone()).await
}

fn ended(a: &Attempt) -> String {
    match &a.end {
        AttemptEnd::Complete => format!(
            "complete ({} text deltas, completion signal `{}`{})",
            a.deltas,
            a.completion.as_deref().unwrap_or(""),
            if a.terminal {
                ", then `data: [DONE]`"
            } else {
                ""
            }
        ),
        AttemptEnd::CleanEnd => format!(
            "the body ended normally after {} text deltas, without a finish_reason",
            a.deltas
        ),
        AttemptEnd::Broken { error } => {
            format!(
                "the connection broke ({error}) after {} text deltas",
                a.deltas
            )
        }
        AttemptEnd::Timeout => {
            format!("nothing more came (timeout) after {} text deltas", a.deltas)
        }
        AttemptEnd::Status { status } => format!("the server answered HTTP {status}"),
    }
}

fn quote(text: &str) -> String {
    let t: String = text.chars().take(80).collect();
    format!("{t:?}")
}

/// The audit's finding about request `key` of kind `kind`.
fn verdict<'a>(findings: &'a [Finding], kind: FindingKind, key: &str) -> Option<&'a Finding> {
    findings
        .iter()
        .find(|f| f.kind == kind && f.ids.first().is_some_and(|k| k == key))
}

fn naive_lines(phase: &PhaseOutcome, r: &CallRecord, out: &mut Vec<String>) {
    let Some(a) = r.attempts.first() else { return };
    out.push(format!(
        "{} client, request {} (Idempotency-Key {}):",
        phase.label, r.call, r.key
    ));
    out.push("  1. It asked for a streamed chat completion.".into());
    out.push(format!("  2. {}: {}.", capital(&ended(a)), quote(&a.text)));
    out.push(format!(
        "  3. The client took these {} tokens as the complete answer (no error; finish_reason \
         never came): a silent truncation.",
        a.deltas
    ));
    let findings = phase.auditor.findings();
    match verdict(&findings, FindingKind::LlmTruncated, &r.key) {
        Some(f) => out.push(format!(
            "  4. The audit, from the wire alone: {} ({}) — {}",
            f.kind, f.class, f.detail
        )),
        None => out.push("  4. The audit reported no finding for this request.".into()),
    }
}

fn strict_lines(phase: &PhaseOutcome, r: &CallRecord, out: &mut Vec<String>) {
    out.push(format!(
        "{} client, request {} (Idempotency-Key {}):",
        phase.label, r.call, r.key
    ));
    let mut step = 1;
    for (i, a) in r.attempts.iter().enumerate() {
        let lead = if i == 0 {
            "First attempt".to_owned()
        } else {
            format!(
                "It sent the request again with the same Idempotency-Key \
                 (X-Stainless-Retry-Count {i}); attempt {}",
                i + 1
            )
        };
        out.push(format!("  {step}. {lead}: {}.", ended(a)));
        step += 1;
        if a.end != AttemptEnd::Complete && i == 0 {
            out.push(format!(
                "  {step}. The client noticed the missing completion signal and did not take \
                 the {} tokens as an answer.",
                a.deltas
            ));
            step += 1;
        }
    }
    let findings = phase.auditor.findings();
    match verdict(&findings, FindingKind::LlmRetried, &r.key) {
        Some(f) => out.push(format!(
            "  {step}. The audit, from the wire alone: {} ({}) — {}",
            f.kind, f.class, f.detail
        )),
        None => out.push(format!(
            "  {step}. The audit reported no re-send for this request."
        )),
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// One truncated answer of each phase, told step by step, then the tally per phase.
pub fn story(phases: &[PhaseOutcome]) -> Vec<String> {
    let mut out = Vec::new();
    for phase in phases {
        let Some(x) = &phase.llm else { continue };
        // The telling example: of the matching requests, the one whose cut first attempt had
        // the most text (a cut inside the first token leaves none to show).
        let first_deltas = |r: &&CallRecord| r.attempts.first().map_or(0, |a| a.deltas);
        let pick = match phase.policy {
            Policy::Naive => x
                .records
                .iter()
                .filter(|r| r.outcome == Outcome::AcceptedPartial)
                .max_by_key(first_deltas),
            Policy::Strict | Policy::Retry => x
                .records
                .iter()
                .filter(|r| {
                    r.outcome == Outcome::Complete
                        && r.attempts.len() > 1
                        && r.attempts[0].end == AttemptEnd::CleanEnd
                })
                .max_by_key(first_deltas),
        };
        if let Some(r) = pick {
            match phase.policy {
                Policy::Naive => naive_lines(phase, r, &mut out),
                Policy::Strict | Policy::Retry => strict_lines(phase, r, &mut out),
            }
        }
    }
    for phase in phases {
        let c = &phase.load.counters;
        let counts = phase.auditor.counts();
        let n = |k: FindingKind| counts.get(k.as_str()).copied().unwrap_or(0);
        out.push(format!(
            "{}: {} requests, {} complete, {} truncated answers taken as complete, {} re-sends; \
             the audit: {} llm-truncated (loss), {} llm-retried.",
            phase.label,
            c.calls,
            c.ok,
            c.silent_loss,
            c.reissued,
            n(FindingKind::LlmTruncated),
            n(FindingKind::LlmRetried)
        ));
    }
    out
}
