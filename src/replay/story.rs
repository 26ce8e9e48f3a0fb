//! The story of one affected call, told the way seed 004 tells it: which event the client held
//! and how much of it, where the proxy cut, the cursor the client resumed with, what the server
//! did, and the outcome — for the naive client, then what the strict client did with a cut.
//!
//! Why: a summary of counts says that something is wrong; one concrete sequence says what, in
//! the vocabulary the team already uses for the failure. Every line is built from recorded facts
//! (load traces and the proxy's cut records); a fact that was not recorded is said to be unknown.

use crate::load::{CallEnd, CallTrace, Policy, ResumeAnswer};
use crate::wire::CutPoint;

use super::phase::PhaseOutcome;
use super::tap::Moment;

/// The story lines for the phases of a run (empty when no call hit a disconnect).
pub fn tell(phases: &[PhaseOutcome]) -> Vec<String> {
    let mut out = Vec::new();
    for phase in phases {
        if phase.tool == "append" {
            out.extend(side_effect_chapter(phase));
            continue;
        }
        if phase.tool == "fetch" {
            out.extend(audience_chapter(phase));
            continue;
        }
        if phase.tool == "progress" {
            out.extend(goaway_chapter(phase));
            continue;
        }
        let Some(trace) = pick(&phase.load.traces, phase.policy) else {
            continue;
        };
        let moments = phase.tap.moments();
        let cut = matching_cut(&moments, trace);
        let lines_of_held = trace
            .pending_id
            .as_deref()
            .and_then(|id| phase.tap.data_lines_of(id));
        out.push(format!(
            "{} client, request id {}:",
            phase.label, trace.request_id
        ));
        out.extend(
            chapter(trace, cut, lines_of_held)
                .into_iter()
                .map(|l| format!("  {l}")),
        );
    }
    out
}

/// The most telling trace: for the naive client a torn event that ended silently lost, for the
/// strict one a torn event it still completed; else any torn one, else any.
fn pick(traces: &[CallTrace], policy: Policy) -> Option<&CallTrace> {
    let telling = match policy {
        Policy::Naive => CallEnd::SilentlyLost,
        Policy::Strict | Policy::Retry => CallEnd::Ok,
    };
    let mine = || traces.iter().filter(move |t| t.policy == policy);
    mine()
        .find(|t| t.partial && t.outcome == Some(telling))
        .or_else(|| mine().find(|t| t.partial))
        .or_else(|| mine().next())
}

/// The proxy's record of the cut that broke this call: the cut whose event in progress had the
/// id the client held (ids are unique per session in MCP), else none.
fn matching_cut<'a>(
    moments: &'a [Moment],
    trace: &CallTrace,
) -> Option<(&'a CutPoint, &'static str)> {
    let held = trace.pending_id.as_deref()?;
    moments.iter().find_map(|m| match m {
        Moment::Cut { point, action, .. } if point.pending_id.as_deref() == Some(held) => {
            Some((point, *action))
        }
        _ => None,
    })
}

/// What a cut ended, from its record: one HTTP/2 stream (the record names it) or the
/// connection.
fn what_was_cut(p: &CutPoint, action: &str) -> String {
    match (p.h2_stream, action) {
        (Some(s), "reset") => format!(
            "reset HTTP/2 stream {s} (RST_STREAM) instead of the TCP connection — the \
             connection and its other streams flowed on —"
        ),
        (Some(s), _) => format!("ended HTTP/2 stream {s} ({action}); the connection flowed on,"),
        (None, _) => "cut the connection".to_owned(),
    }
}

/// `lines_of_held`: the data lines the held event had on the wire when it came through whole
/// later (a resume), `None` if it never did.
fn chapter(
    trace: &CallTrace,
    cut: Option<(&CutPoint, &str)>,
    lines_of_held: Option<u32>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let held = trace.pending_id.as_deref().unwrap_or("(no id line yet)");
    if trace.partial {
        let line_no = trace.partial_data_lines + u32::from(trace.mid_data_line);
        let of = lines_of_held.map_or_else(
            || " (the whole event never came through the proxy: its line count is unknown)".into(),
            |n| format!(" of {n}"),
        );
        let where_ = if trace.mid_data_line {
            format!("inside data line {line_no}{of} (partial JSON, no line end)")
        } else {
            format!("after {} complete data line(s)", trace.partial_data_lines)
        };
        lines.push(format!(
            "1. The client held event `id: {held}` incomplete: {} bytes, {where_}.",
            trace.partial_bytes
        ));
    } else {
        lines.push(format!(
            "1. The client held no partial event; its last complete event was `{}`.",
            or_none(&trace.committed_id)
        ));
    }
    lines.push(match cut {
        Some((p, action)) => format!(
            "2. The proxy {} at raw offset {} ({}, event #{}, {} bytes of it delivered); last committed id `{}`.",
            what_was_cut(p, action),
            p.raw_offset,
            p.class.map_or("outside SSE", |c| c.as_str()),
            p.event_index.map_or_else(|| "?".to_owned(), |i| i.to_string()),
            p.torn_bytes,
            p.last_committed_id.as_deref().unwrap_or("(none)")
        ),
        None => format!("2. The connection stopped ({}).", trace.stop),
    });
    lines.push(match &trace.last_event_id_sent {
        Some(id) => {
            let verdict = if Some(id.as_str()) == trace.pending_id.as_deref() && trace.partial {
                " — the id of an event it never fully received (cursor ahead)"
            } else {
                " — its last complete event"
            };
            format!("3. It reconnected with `Last-Event-ID: {id}`{verdict}.")
        }
        None => "3. It did not resume that stream (no `Last-Event-ID` was sent).".to_owned(),
    });
    lines.push(format!("4. The server {}.", answer(trace.answer.as_ref())));
    lines.push(format!("5. Outcome: {}.", outcome(trace.outcome)));
    lines
}

/// A phase of `--scenario audience-narrowing`, told as seed 000 tells it: the drop, the
/// narrowed refresh, the clean end with the call pending, and what each client concluded.
fn audience_chapter(phase: &PhaseOutcome) -> Vec<String> {
    let c = &phase.load.counters;
    let mut lines = vec![format!(
        "{} client, tool `{}` (token audiences: search, fetch):",
        phase.label, phase.tool
    )];
    let resumed = phase
        .load
        .traces
        .iter()
        .find(|t| t.policy == phase.policy && t.last_event_id_sent.is_some());
    match resumed {
        Some(t) => {
            lines.push(format!(
                "  1. The connection dropped ({}) after event `{}`.",
                t.stop,
                or_none(&t.committed_id)
            ));
            lines.push(format!(
                "  2. The client refreshed its token — minted for `search` only — and reconnected \
                 with `Last-Event-ID: {}` under it.",
                t.last_event_id_sent.as_deref().unwrap_or("-")
            ));
            lines.push(format!(
                "  3. The server {} and closed it at the first `fetch` event: no 401, no 403, no \
                 JSON-RPC error; the tools/call stayed pending.",
                answer(t.answer.as_ref())
            ));
        }
        None => lines.push("  1. No call was cut and resumed in this phase.".to_owned()),
    }
    let detected = phase
        .load
        .errors
        .get("clean-end-call-pending")
        .copied()
        .unwrap_or(0);
    lines.push(match phase.policy {
        Policy::Strict | Policy::Retry => format!(
            "  4. A clean end is not completion: {detected} clean end(s) with the call pending \
             were detected; the client re-authorized with its per-tool token and resumed from \
             its cursor: {} of {} calls completed, {} failed visibly, {} silently lost.",
            c.ok, c.calls, c.failed, c.silent_loss
        ),
        Policy::Naive => format!(
            "  4. The client took the clean end as the call's completion: {} of {} calls \
             silently lost, {} completed, {} failed visibly.",
            c.silent_loss, c.calls, c.ok, c.failed
        ),
    });
    lines
}

/// A phase of `--scenario goaway`: one call whose stream the gateway's close cut after its
/// graceful `GOAWAY`, told from the client's trace and the proxy's cut records, then what the
/// client made of every such cut.
fn goaway_chapter(phase: &PhaseOutcome) -> Vec<String> {
    let c = &phase.load.counters;
    let moments = phase.tap.moments();
    let closes = moments
        .iter()
        .filter(|m| matches!(m, Moment::Cut { point, .. } if point.by == Some("goaway")))
        .count();
    let mut lines = vec![format!(
        "{} client, tool `{}` (slow progress stream):",
        phase.label, phase.tool
    )];
    let Some(trace) = pick(&phase.load.traces, phase.policy) else {
        lines.push("  1. No call was traced in this phase.".to_owned());
        return lines;
    };
    let mut told = chapter(trace, None, None);
    if let Some(line) = told.get_mut(1) {
        let taken = match trace.stop {
            "clean-end" => {
                "it took the graceful GOAWAY as the server's normal end (`clean-end`)".to_owned()
            }
            stop => format!("it saw the stream broken (`{stop}`)"),
        };
        *line = format!(
            "2. The gateway sent GOAWAY(NO_ERROR) and closed the connection after its drain, \
             with this stream in flight: {taken}, with request id {} unanswered.",
            trace.request_id
        );
    }
    lines.extend(told.into_iter().map(|l| format!("  {l}")));
    lines.push(match phase.policy {
        Policy::Strict | Policy::Retry => format!(
            "  6. Over the phase the gateway closed {closes} connection(s) after a GOAWAY; the \
             client resumed {} stream(s) on a new connection: {} of {} calls completed, {} \
             failed visibly, {} silently lost.",
            c.resumes, c.ok, c.calls, c.failed, c.silent_loss
        ),
        Policy::Naive => format!(
            "  6. Over the phase the gateway closed {closes} connection(s) after a GOAWAY; the \
             client resumed nothing: {} of {} calls silently lost, {} completed, {} failed \
             visibly.",
            c.silent_loss, c.calls, c.ok, c.failed
        ),
    });
    lines
}

/// The `retry` phase of `--scenario stateless`: what re-issuing a NOT idempotent tool did,
/// with the lab's counter as ground truth beside the audit's `reexecuted` count.
fn side_effect_chapter(phase: &PhaseOutcome) -> Vec<String> {
    let c = &phase.load.counters;
    let reexecuted = phase
        .auditor
        .counts()
        .get("reexecuted")
        .copied()
        .unwrap_or(0);
    let extra = phase.side_effects.saturating_sub(c.calls);
    let agreement = if reexecuted == extra {
        " — one finding per extra run".to_owned()
    } else if reexecuted < extra {
        format!(
            " — {} extra run(s) left no trace on the wire (cut before any byte reached the \
             client)",
            extra - reexecuted
        )
    } else {
        " — more findings than extra runs (see the findings log)".to_owned()
    };
    vec![
        format!(
            "{} client (re-issues a cut call whatever the tool annotations say), tool `{}` (NOT \
             idempotent):",
            phase.label, phase.tool
        ),
        format!(
            "  1. {} calls; the proxy cut {} stream(s); the client re-issued {} cut call(s) with \
             new ids.",
            c.calls,
            phase.tap.cuts(),
            c.reissued
        ),
        format!(
            "  2. The lab's counter moved by {} for {} calls: the side effect ran {extra} extra \
             time(s).",
            phase.side_effects, c.calls
        ),
        format!(
            "  3. The audit reported `reexecuted` {reexecuted} time(s) (a call that had visibly \
             started, re-issued for a tool not declared idempotent){agreement}."
        ),
    ]
}

fn answer(a: Option<&ResumeAnswer>) -> String {
    match a {
        None => "was not asked to resume".to_owned(),
        Some(ResumeAnswer::NoResponse { error }) => format!("did not answer ({error})"),
        Some(ResumeAnswer::Refused { status }) => {
            format!("refused the resume with HTTP {status} (an explicit loss signal)")
        }
        Some(ResumeAnswer::Stream {
            first_id,
            discontinuous,
            error_event,
        }) => {
            let first = first_id.as_deref().unwrap_or("(no id)");
            let mut s = format!("answered 200 with a stream starting at `{first}`");
            if *discontinuous {
                s.push_str(
                    ", which does not continue the broken stream: a fresh stream, not a replay",
                );
            }
            if *error_event {
                s.push_str(", carrying `event: error`");
            }
            s
        }
    }
}

fn outcome(o: Option<CallEnd>) -> &'static str {
    match o {
        Some(CallEnd::Ok) => "the call completed with its verified result",
        Some(CallEnd::Failed) => "the call failed visibly (no silent loss)",
        Some(CallEnd::SilentlyLost) => {
            "the client took the call as complete without its result: silent corruption"
        }
        None => "unknown (the run ended first)",
    }
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "(none)" } else { s }
}
