//! What tearline's verdicts (the audit's `llm-*` findings of a cell) state, in the vocabulary of
//! [`Fact`]s — scored against the test's own [`super::truth`], this measures the verdict rule
//! (`src/audit/llm.rs`) on real SDK traffic, as `observed` measures the observer.
//!
//! Reading of each kind:
//! - `llm-truncated`: the stream was truncated; with a tool call, its arguments were complete
//!   if and only if the finding says `complete JSON`; a named candidate (a later identical
//!   request without a re-send marker) says the request was sent again.
//! - `llm-retried`: the request was sent again (proven); if a stream had begun, it was also
//!   truncated (the finding says `ended before its completion signal`).
//! - `llm-unanswered`: no answer began (nothing to judge but the re-send); a named candidate
//!   says the request was sent again.
//! - `llm-stalled`: a stall. `llm-hung`: a stall, and a truncation (still open, unfinished).
//! - `llm-no-terminal`: the terminal event is missing.
//!
//! Invariant: [`Fact::Retried`] is stated at most once per cell, as the truth states it.

use tearline::audit::{Finding, FindingKind};

use super::truth::Fact;

/// How `llm-truncated` / `llm-unanswered` name candidates (see the audit's rule `llm`, src/audit/rules/llm.rs).
const NAMES_CANDIDATE: &str = "no re-send marker";

fn truncated(f: &Finding, tool_mode: bool) -> Fact {
    Fact::Truncated {
        tool_complete: tool_mode.then(|| f.detail.contains("arguments, complete JSON")),
    }
}

/// The facts the `llm-*` findings of one cell state.
pub fn facts(findings: &[Finding], tool_mode: bool) -> Vec<Fact> {
    let mut out = Vec::new();
    let mut retried = false;
    for f in findings {
        let names_candidate = f.detail.contains(NAMES_CANDIDATE);
        match f.kind {
            FindingKind::LlmTruncated => {
                out.push(truncated(f, tool_mode));
                retried |= names_candidate;
            }
            FindingKind::LlmRetried => {
                if f.detail.contains("ended before its completion signal") {
                    out.push(truncated(f, tool_mode));
                }
                retried = true;
            }
            FindingKind::LlmUnanswered => {
                retried |= names_candidate;
            }
            FindingKind::LlmStalled => out.push(Fact::Stalled),
            FindingKind::LlmHung => {
                out.push(Fact::Stalled);
                out.push(truncated(f, tool_mode));
            }
            FindingKind::LlmNoTerminal => out.push(Fact::TerminalMissing),
            _ => {}
        }
    }
    if retried {
        out.push(Fact::Retried);
    }
    out.sort();
    out
}

/// Whether the cell's `llm-*` findings prove a re-send (`Some(true)`: an `llm-retried`), only
/// name candidates (`Some(false)`), or say nothing of one (`None`).
pub fn re_send(findings: &[Finding]) -> Option<bool> {
    if findings.iter().any(|f| f.kind == FindingKind::LlmRetried) {
        Some(true)
    } else if findings.iter().any(|f| {
        matches!(
            f.kind,
            FindingKind::LlmTruncated | FindingKind::LlmUnanswered
        ) && f.detail.contains(NAMES_CANDIDATE)
    }) {
        Some(false)
    } else {
        None
    }
}
