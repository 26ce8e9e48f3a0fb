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
            phase.policy.as_str(),
            trace.request_id
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
        Policy::Strict => CallEnd::Ok,
    };
    let mine = || traces.iter().filter(move |t| t.policy == policy);
    mine()
        .find(|t| t.partial && t.outcome == Some(telling))
        .or_else(|| mine().find(|t| t.partial))
        .or_else(|| mine().next())
}

/// The proxy's record of the cut that broke this call: the cut whose event in progress had the
/// id the client held (ids are unique per session in MCP), else none.
fn matching_cut<'a>(moments: &'a [Moment], trace: &CallTrace) -> Option<&'a CutPoint> {
    let held = trace.pending_id.as_deref()?;
    moments.iter().find_map(|m| match m {
        Moment::Cut { point, .. } if point.pending_id.as_deref() == Some(held) => Some(point),
        _ => None,
    })
}

/// `lines_of_held`: the data lines the held event had on the wire when it came through whole
/// later (a resume), `None` if it never did.
fn chapter(trace: &CallTrace, cut: Option<&CutPoint>, lines_of_held: Option<u32>) -> Vec<String> {
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
        Some(p) => format!(
            "2. The proxy cut the connection at raw offset {} ({}, event #{}, {} bytes of it delivered); last committed id `{}`.",
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
        None => "3. It did not resume that stream (it re-issued the call instead).".to_owned(),
    });
    lines.push(format!("4. The server {}.", answer(trace.answer.as_ref())));
    lines.push(format!("5. Outcome: {}.", outcome(trace.outcome)));
    lines
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
