//! The story of `tearline replay --scenario hold-headers`: what a hop that holds an SSE
//! response's HEADERS until its first DATA did to each client, from the proxy's `response-head`
//! histogram (request → head delivered) and the client's own counts.
//!
//! Why: a held head is invisible in a summary of outcomes (the naive client completes, only
//! later); the time between the request and its head is where the hop shows, and a client with
//! a head budget is the one that notices it. Every claim is made from what was measured: a
//! hold is told only when a head came late or a head budget ran out; otherwise the story says
//! that the heads came at once (a 2025-11-25 server's priming event is a stream's first DATA).

use std::time::Duration;

use crate::load::Policy;

use super::phase::PhaseOutcome;
use super::scenario::HOLD_FIRST_EVENT_MS;

/// A head later than this is told as held (half the tool's delay before its first event).
const LATE: Duration = Duration::from_millis(HOLD_FIRST_EVENT_MS / 2);

/// The story lines of every phase, then what the SDKs do and what a priming event changes.
pub fn tell(phases: &[PhaseOutcome], call_timeout: Duration) -> Vec<String> {
    let mut out = Vec::new();
    let mut held_any = false;
    for phase in phases {
        let (lines, held) = chapter(phase, call_timeout);
        held_any |= held;
        out.extend(lines);
    }
    out.push(if held_any {
        "The SDKs: Node's `http2`, httpx and Go's default Transport wait for a response head \
         until their own timeout, like the naive client (Go says \"awaiting headers\"); Go's \
         `Transport.ResponseHeaderTimeout` is the strict client's head budget. A 2025-11-25 \
         server's priming event is a stream's first DATA: it releases a held head at once."
            .to_owned()
    } else {
        "No response head was held: every stream's first DATA (a 2025-11-25 server's priming \
         event) came with its head, so the hop let each head through at once and no head \
         budget ran out."
            .to_owned()
    });
    out
}

/// One phase's lines, and whether they tell a hold.
fn chapter(phase: &PhaseOutcome, call_timeout: Duration) -> (Vec<String>, bool) {
    let c = &phase.load.counters;
    let gave_up = phase.load.errors.get("head-timeout").copied().unwrap_or(0);
    let budget = match phase.policy {
        Policy::Naive => format!("waits for a head as long as its call timeout, {call_timeout:?}"),
        Policy::Strict | Policy::Retry => "gives up on a head it has not seen in time".to_owned(),
    };
    let mut lines = vec![format!(
        "{} client, tool `{}` (first event {HOLD_FIRST_EVENT_MS} ms after the call; the client \
         {budget}):",
        phase.label, phase.tool
    )];
    let histos = phase.auditor.histograms();
    let head = histos.get("response-head").filter(|h| !h.is_empty());
    let ms = |us: u64| us as f64 / 1000.0;
    let late = head.is_some_and(|h| h.max() >= LATE.as_micros() as u64);
    lines.push(match head {
        Some(h) => format!(
            "  1. The proxy's `response-head` histogram (request → head delivered, the session's \
             own requests included): n={} p50={:.1} ms max={:.1} ms{}.",
            h.len(),
            ms(h.value_at_quantile(0.5)),
            ms(h.max()),
            if late {
                " — the held time: a head left the hop with its stream's first event"
            } else {
                " — every head came at once"
            }
        ),
        None => "  1. No response head reached the client through the proxy.".to_owned(),
    });
    lines.push(match phase.policy {
        Policy::Naive => format!(
            "  2. It saw nothing until a head came, unable to tell a held head from a dead \
             server: {} of {} calls completed (a call whose first event comes after its \
             timeout is lost at that timeout without a response ever shown), {} failed \
             visibly, {} silently lost.",
            c.ok, c.calls, c.failed, c.silent_loss
        ),
        Policy::Strict | Policy::Retry if gave_up > 0 => format!(
            "  2. It gave up on a head {gave_up} time(s) (`head-timeout`) and re-sent the call \
             under the same Idempotency-Key; the re-send's head was held as well, so it reported the call failed, with the cause named, \
             instead of hanging: {} of {} calls completed, {} failed visibly, {} silently lost.",
            c.ok, c.calls, c.failed, c.silent_loss
        ),
        Policy::Strict | Policy::Retry => format!(
            "  2. No head budget ran out: {} of {} calls completed, {} failed visibly, {} \
             silently lost.",
            c.ok, c.calls, c.failed, c.silent_loss
        ),
    });
    (lines, late || gave_up > 0)
}
