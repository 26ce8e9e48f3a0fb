//! The client's and the audit's counts of the same facts, set side by side per policy and
//! reconciled call by call.
//!
//! Why: the load client and the proxy's audit both see torn events, gaps, fresh streams,
//! re-sends and lost calls, from the two ends of one wire. They use one vocabulary (the
//! audit's finding kinds, [`Counters::SHARED`]); where their counts of one fact differ, the
//! report says for which call and why, so a difference is a finding about the run, never a
//! puzzle about the tool.
//!
//! Rules (precise):
//! - Totals per phase: the client's counter over all its calls, the audit's findings of that
//!   kind in the phase.
//! - A finding belongs to the client call that sent the request its stream names: the finding's
//!   `Mcp-Session-Id` (none in 2026-07-28) and one of its stream's JSON-RPC ids equal one of the
//!   call's POSTs (a call re-sent in another session owns both requests).
//! - For each call the client kept ([`crate::load::CallFacts`]) and each fact: the call's share
//!   of the client's counter against its findings of that kind. A call where any of them
//!   differs gets one note: the call, both counts of each differing fact, and why
//!   ([`why`]: the known reasons first, else both sides' evidence).
//! - Findings of those kinds that belong to no kept call get a note each (a call the client
//!   did not keep, or a request the client never sent); a phase whose client keeps no per-call
//!   facts (the LLM client) gets one note saying its facts are compared in totals only.
//! - An LLM stream's proven re-send (`llm-retried`) is the client's `reissued`, as an MCP
//!   call's is ([`fact`]).
//! - `unproven-resend` is no shared fact (the client knows whether it re-sent; the wire does
//!   not): it is never counted, but a call the client counted `abandoned` that the audit judged
//!   `unproven-resend` gets a note saying so.
//!
//! Invariant: at most [`MAX_RECONCILE_NOTES`] notes per policy; totals and `calls_differ`
//! count everything.

use std::collections::{BTreeMap, HashMap};

use crate::audit::{Finding, FindingKind};
use crate::load::{CallEnd, CallFacts, Counters, Policy};
use crate::report::{FactCounts, MAX_RECONCILE_NOTES, Reconciliation};

/// The reconciliation of one phase: `calls` the client kept, its `counters` over all calls,
/// the audit's `findings` of the phase.
pub fn reconcile(
    policy: Policy,
    calls: &[CallFacts],
    counters: &Counters,
    findings: &[Finding],
) -> Reconciliation {
    let shared: Vec<&Finding> = findings
        .iter()
        .filter(|f| Counters::SHARED.contains(&fact(f.kind)))
        .collect();
    // `unproven-resend` is no shared fact, but it explains a client's `abandoned` call.
    let unproven = findings
        .iter()
        .filter(|f| f.kind == FindingKind::UnprovenResend);
    let mut owner: HashMap<(Option<&str>, String), usize> = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        for (session, id) in &call.requests {
            owner.insert((session.as_deref(), id.to_string()), i);
        }
    }
    let mut per_call: Vec<Vec<&Finding>> = vec![Vec::new(); calls.len()];
    let mut orphans: Vec<&Finding> = Vec::new();
    for f in shared.iter().copied().chain(unproven) {
        let found = f
            .stream
            .rpc_ids
            .iter()
            .find_map(|id| owner.get(&(f.session.as_deref(), id.clone())));
        match found {
            Some(&i) => per_call[i].push(f),
            None if f.kind != FindingKind::UnprovenResend => orphans.push(f),
            None => {}
        }
    }
    let mut out = Reconciliation {
        calls_compared: calls.len() as u64,
        ..Reconciliation::default()
    };
    for kind in Counters::SHARED {
        out.facts.insert(
            kind.to_owned(),
            FactCounts {
                client: counters.get(kind).unwrap_or(0),
                audit: shared.iter().filter(|f| fact(f.kind) == kind).count() as u64,
                calls_differ: 0,
            },
        );
    }
    for (n, (call, found)) in calls.iter().zip(&per_call).enumerate() {
        let mut audit: BTreeMap<&str, Vec<&Finding>> = BTreeMap::new();
        for f in found {
            audit.entry(fact(f.kind)).or_default().push(f);
        }
        let mut parts = Vec::new();
        for kind in Counters::SHARED {
            let c = call.counts.get(kind).unwrap_or(0);
            let a = audit.get(kind).map_or(0, Vec::len) as u64;
            if c == a {
                continue;
            }
            if let Some(fact) = out.facts.get_mut(kind) {
                fact.calls_differ += 1;
            }
            let evidence = audit.get(kind).and_then(|v| v.first()).map(|f| &f.detail);
            parts.push(format!(
                "{kind} client {c}, audit {a}: {}",
                why(policy, kind, c, a, call, &audit, evidence)
            ));
        }
        if !parts.is_empty() && out.notes.len() < MAX_RECONCILE_NOTES {
            out.notes
                .push(format!("{}: {}", name(n, call), parts.join("; ")));
        }
    }
    if calls.is_empty() && counters.calls > 0 {
        if !orphans.is_empty() && out.notes.len() < MAX_RECONCILE_NOTES {
            out.notes.push(format!(
                "the client keeps no per-call facts in this phase ({} calls): its {} finding(s) \
                 of these kinds are compared in the totals only",
                counters.calls,
                orphans.len()
            ));
        }
        return out;
    }
    for f in orphans {
        if out.notes.len() >= MAX_RECONCILE_NOTES {
            break;
        }
        out.notes.push(format!(
            "{} finding on {} (ids {}) belongs to no call the client kept: {}",
            f.kind.as_str(),
            f.stream.request,
            f.stream.rpc_ids.join(","),
            if calls.len() as u64 >= counters.calls {
                "the client never sent that request (another client, or a request before the run)"
            } else {
                "the client keeps the facts of a bounded number of calls; this one is beyond it"
            }
        ));
    }
    out
}

/// The shared fact a finding of `kind` counts for: its own name, but an LLM stream's proven
/// re-send (`llm-retried`) is the client's `reissued`.
fn fact(kind: FindingKind) -> &'static str {
    match kind {
        FindingKind::LlmRetried => FindingKind::Reissued.as_str(),
        k => k.as_str(),
    }
}

fn name(n: usize, call: &CallFacts) -> String {
    let requests: Vec<String> = call
        .requests
        .iter()
        .map(|(s, id)| match s {
            Some(s) => format!("{id} in session {s}"),
            None => id.to_string(),
        })
        .collect();
    format!("call {} (request {})", n + 1, requests.join(", then "))
}

fn end(e: CallEnd) -> &'static str {
    match e {
        CallEnd::Ok => "completed",
        CallEnd::Failed => "failed visibly",
        CallEnd::SilentlyLost => "was taken as complete without its result",
    }
}

/// Why the client counted `c` and the audit `a` of `kind` for `call` (`audit`: the call's
/// findings by kind; `evidence`: the detail of the first finding of `kind`).
fn why(
    policy: Policy,
    kind: &str,
    c: u64,
    a: u64,
    call: &CallFacts,
    audit: &BTreeMap<&str, Vec<&Finding>>,
    evidence: Option<&String>,
) -> String {
    let judged_ids = matches!(
        kind,
        "replay-gap" | "replay-duplicate" | "replay-reorder" | "fresh-stream"
    );
    let seen = |k: &str| audit.get(k).is_some_and(|v| !v.is_empty());
    let audit_says = || {
        evidence.map_or_else(
            || "the audit reported none".to_owned(),
            |d| format!("the audit: {d}"),
        )
    };
    match (kind, c > a) {
        (_, false) if judged_ids && policy == Policy::Naive => {
            format!("the naive client judges no event ids; {}", audit_says())
        }
        ("fresh-stream", false) if call.counts.replay_gap > 0 => format!(
            "the client counted the resume's jump as a replay-gap; {}",
            audit_says()
        ),
        ("replay-gap", false) if call.counts.fresh_stream > 0 => format!(
            "the client counted the resume as a fresh-stream; {}",
            audit_says()
        ),
        ("fresh-stream", true) if seen("replay-gap") => {
            "the audit judged the same resume a replay-gap (owed events missing, no new priming \
             event first)"
                .to_owned()
        }
        ("replay-gap", true) if seen("fresh-stream") => {
            "the audit judged the same resume a fresh-stream (a new priming event, no owed event)"
                .to_owned()
        }
        (_, false) if judged_ids => format!(
            "the client judges ids only when they are `<stream>-<seq>` counters; {}",
            audit_says()
        ),
        ("torn-cut", false) => format!(
            "the client held no partial event when the connection ended: bytes the proxy wrote \
             before a reset can be discarded unread by the client's kernel; {}",
            audit_says()
        ),
        ("torn-cut", true) => "the client held part of an event when its connection ended, but \
                               the proxy cut inside no event of that stream (the connection \
                               ended otherwise)"
            .to_owned(),
        ("reissued", true) => format!(
            "the client sent the call again ({} requests), but the audit saw no proof of a \
             re-send of a lost call: the earlier request was answered (the client rejected the \
             answer) or refused rather than cut",
            call.requests.len()
        ),
        ("reissued", false) => format!(
            "the audit linked a request the client did not send again; {}",
            audit_says()
        ),
        ("abandoned", true) if audit.contains_key("unproven-resend") => format!(
            "the call {} after its last request was cut, and a later identical call followed it \
             without proof of being its re-send: the audit judged it unproven-resend (the wire \
             cannot tell a re-send from a repeat)",
            end(call.end)
        ),
        ("abandoned", true) => format!(
            "the call {} after its last request was cut, but the audit judged it otherwise ({})",
            end(call.end),
            if audit.is_empty() {
                "no finding".to_owned()
            } else {
                audit.keys().copied().collect::<Vec<_>>().join(", ")
            }
        ),
        ("abandoned", false) => format!(
            "the call {} and its last request was not cut as the client saw it; {}",
            end(call.end),
            audit_says()
        ),
        ("explicit-loss", true) => {
            "the client saw a resume refused or `event: error`, the audit did not judge that \
             resume (its stream was not one the proxy saw cut)"
                .to_owned()
        }
        (_, _) => format!(
            "the call {} after {} request(s); {}",
            end(call.end),
            call.requests.len(),
            audit_says()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{FindingClass, StreamRef};

    fn finding(kind: FindingKind, session: &str, id: &str) -> Finding {
        Finding {
            kind,
            class: FindingClass::Info,
            at_ms: 0,
            session: Some(session.to_owned()),
            stream: StreamRef {
                request: "POST /mcp".into(),
                rpc_ids: vec![id.to_owned()],
                conn: 0,
                seq: 0,
                ..StreamRef::default()
            },
            ids: vec![],
            raw_offsets: vec![],
            cut: Default::default(),
            detail: format!("{} detail", kind.as_str()),
            waited_ms: None,
            candidates: vec![],
            visible_start: None,
            proof: None,
        }
    }

    fn call(requests: &[(&str, u64)], counts: Counters) -> CallFacts {
        CallFacts {
            requests: requests
                .iter()
                .map(|(s, id)| (Some((*s).to_owned()), *id))
                .collect(),
            counts,
            end: CallEnd::Ok,
        }
    }

    #[test]
    fn agreeing_calls_get_no_note_and_a_difference_names_its_call_and_reason() {
        let agree = call(
            &[("a", 1), ("b", 1)],
            Counters {
                calls: 1,
                torn_cut: 1,
                reissued: 1,
                ..Counters::default()
            },
        );
        let differ = call(
            &[("a", 2)],
            Counters {
                calls: 1,
                replay_gap: 1,
                ..Counters::default()
            },
        );
        let mut total = agree.counts;
        total.merge(&differ.counts);
        let findings = vec![
            finding(FindingKind::TornCut, "a", "1"),
            finding(FindingKind::Reissued, "a", "1"),
            finding(FindingKind::FreshStream, "a", "2"),
            finding(FindingKind::PendingCall, "a", "2"),
            finding(FindingKind::TornCut, "z", "9"),
        ];
        let r = reconcile(Policy::Strict, &[agree, differ], &total, &findings);
        assert_eq!(r.calls_compared, 2);
        assert_eq!(
            r.facts["torn-cut"],
            FactCounts {
                client: 1,
                audit: 2,
                calls_differ: 0
            }
        );
        assert_eq!(r.facts["fresh-stream"].calls_differ, 1);
        assert_eq!(r.facts["replay-gap"].calls_differ, 1);
        assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
        assert!(
            r.notes[0].starts_with("call 2 (request 2 in session a)"),
            "{}",
            r.notes[0]
        );
        assert!(
            r.notes[0].contains("fresh-stream client 0, audit 1"),
            "{}",
            r.notes[0]
        );
        assert!(r.notes[0].contains("counted the resume's jump as a replay-gap"));
        assert!(
            r.notes[1].contains("never sent that request"),
            "{}",
            r.notes[1]
        );
    }

    #[test]
    fn a_clients_abandoned_call_the_audit_judged_an_unproven_resend_is_explained_not_counted() {
        let lost = call(
            &[("a", 3)],
            Counters {
                calls: 1,
                abandoned: 1,
                ..Counters::default()
            },
        );
        let total = lost.counts;
        let findings = vec![
            finding(FindingKind::UnprovenResend, "a", "3"),
            finding(FindingKind::UnprovenResend, "z", "9"),
        ];
        let r = reconcile(
            Policy::Naive,
            std::slice::from_ref(&lost),
            &total,
            &findings,
        );
        assert_eq!(r.facts["abandoned"].audit, 0, "never counted as abandoned");
        assert_eq!(r.notes.len(), 1, "no orphan note: {:?}", r.notes);
        assert!(r.notes[0].contains("unproven-resend"), "{}", r.notes[0]);
        assert!(r.notes[0].contains("cannot tell"), "{}", r.notes[0]);
        // Without the finding, the note gives the general reason.
        let r = reconcile(Policy::Naive, &[lost], &total, &[]);
        assert!(!r.notes[0].contains("unproven-resend"), "{}", r.notes[0]);
    }

    #[test]
    fn llm_re_sends_are_the_clients_reissued_and_a_phase_without_call_facts_gets_one_note() {
        let counters = Counters {
            calls: 24,
            ok: 24,
            reissued: 2,
            ..Counters::default()
        };
        let findings = vec![
            finding(FindingKind::LlmRetried, "-", "k-1"),
            finding(FindingKind::LlmRetried, "-", "k-2"),
            finding(FindingKind::LlmNoTerminal, "-", "k-3"),
        ];
        let r = reconcile(Policy::Strict, &[], &counters, &findings);
        assert_eq!(
            r.facts["reissued"],
            FactCounts {
                client: 2,
                audit: 2,
                calls_differ: 0
            }
        );
        assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
        assert!(r.notes[0].contains("totals only"), "{}", r.notes[0]);
        assert!(r.notes[0].contains("2 finding(s)"), "{}", r.notes[0]);
    }
}
