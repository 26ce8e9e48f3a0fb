//! Turns the phases of a replay into one [`Report`]: run facts, cuts, the proxy's findings, each
//! policy's counters and histograms, the proxy's histograms, the timeline and the story.
//!
//! Invariants: every number in the report comes from a phase's recorded outcome (nothing is
//! estimated); findings of both phases are summed by kind and each example names its policy;
//! each policy's client counters are reconciled with its own phase's findings
//! ([`super::reconcile`]);
//! histogram names are `<policy>.<name>` for the proxy's own histograms so the two phases stay
//! apart; client histograms go to `report.hlog` as one interval per second of each phase.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::phase::PhaseOutcome;
use super::tap::Moment;
use crate::load::stats::{CallEnd, CallFacts};
use crate::report::{FindingExample, Report, RunFacts, Target, TimelineKind};
use crate::units::millis;

/// Examples kept per finding kind and policy.
const EXAMPLES_PER_POLICY: usize = 3;

/// What the report says about the run as a whole.
pub struct RunDescription {
    /// When the run started (the report's `started_at`).
    pub started_at: std::time::SystemTime,
    /// The seed in force.
    pub seed: u64,
    /// Profile name (file name or built-in label) and its text.
    pub profile_name: String,
    /// The profile's TOML text.
    pub profile_text: String,
    /// Lab or user server.
    pub target: Target,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

/// The report of a finished replay.
pub fn assemble(run: RunDescription, phases: &[PhaseOutcome], story: Vec<String>) -> Report {
    let mut facts = RunFacts::new(run.seed, run.profile_name, run.target);
    facts.profile_text = run.profile_text;
    facts.started_at = crate::report::clock::rfc3339(run.started_at);
    facts.duration_ms = millis(run.elapsed);
    let mut report = Report::new(facts);

    let mut by_class = BTreeMap::new();
    let mut by_action = BTreeMap::new();
    let mut finding_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut examples: BTreeMap<String, Vec<FindingExample>> = BTreeMap::new();
    // Phases run one after the other; the timeline places each after the previous one.
    let mut phase_start_ms = 0u64;
    for phase in phases {
        let policy = phase.label;
        add_all(&mut by_class, phase.tap.cuts_by_class());
        add_all(&mut by_action, phase.tap.cuts_by_action());
        add_all(&mut finding_counts, phase.auditor.counts());
        for f in phase.auditor.findings() {
            let list = examples.entry(f.kind.as_str().to_owned()).or_default();
            let mine = list
                .iter()
                .filter(|e| e.detail.starts_with(&format!("[{policy}]")))
                .count();
            if mine < EXAMPLES_PER_POLICY {
                list.push(FindingExample {
                    session: f
                        .session
                        .clone()
                        .unwrap_or_else(|| format!("conn {}", f.stream.conn)),
                    stream: f.stream.label(),
                    ids: f.ids.clone(),
                    detail: format!("[{policy}] {}", f.detail),
                });
            }
        }

        let histograms: BTreeMap<String, Histogram<u64>> = phase
            .load
            .histograms
            .iter()
            .map(|(k, h)| ((*k).to_owned(), h.clone()))
            .collect();
        let elapsed = phase.load.elapsed;
        add_seconds(&mut report, policy, phase_start_ms, &phase.load);
        report.reconciliation.insert(
            policy.to_owned(),
            super::reconcile::reconcile(
                phase.policy,
                &phase.load.calls,
                &phase.load.counters,
                &phase.auditor.findings(),
            ),
        );
        report.add_policy(policy, phase.load.counters, histograms);
        for (name, h) in phase.auditor.histograms() {
            let label = format!("{policy}.{name}");
            report.add_interval(
                Report::proxy_tag(&label),
                Duration::from_millis(phase_start_ms),
                elapsed,
                h.clone(),
            );
            report.add_proxy_histogram(&label, h);
        }
        let outcomes = call_outcomes(&phase.load.calls);
        add_timeline(
            &mut report,
            policy,
            phase_start_ms,
            &phase.tap.moments(),
            &outcomes,
        );
        phase_start_ms += millis(elapsed);
    }
    report.set_cuts(by_class, by_action);
    for (kind, count) in finding_counts {
        let ex = examples.remove(&kind).unwrap_or_default();
        report.set_findings(&kind, count, ex);
    }
    report.story = story;
    report
}

/// One interval per second of the phase for each client histogram (empty seconds included),
/// so `report.hlog` shows latency over time; the seconds add up to the phase's histograms.
pub fn add_seconds(
    report: &mut Report,
    policy: &str,
    offset_ms: u64,
    load: &crate::load::LoadOutcome,
) {
    let seconds = load.elapsed.as_secs() + u64::from(load.elapsed.subsec_nanos() > 0);
    let last = load.per_second.keys().next_back().map_or(0, |s| s + 1);
    for second in 0..seconds.max(last) {
        let at = load.per_second.get(&second);
        for name in load.histograms.keys() {
            let h = at
                .and_then(|m| m.get(name))
                .cloned()
                .unwrap_or_else(crate::report::latency::new_histogram);
            report.add_interval(
                Report::policy_tag(policy, name),
                Duration::from_millis(offset_ms) + Duration::from_secs(second),
                Duration::from_secs(1),
                h,
            );
        }
    }
}

fn add_all<K: Ord>(into: &mut BTreeMap<K, u64>, from: BTreeMap<K, u64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// How each kept call ended, by the `(Mcp-Session-Id, JSON-RPC id)` of every POST it made.
fn call_outcomes(calls: &[CallFacts]) -> BTreeMap<(Option<String>, String), CallEnd> {
    calls
        .iter()
        .flat_map(|c| {
            c.requests
                .iter()
                .map(move |(session, id)| ((session.clone(), id.to_string()), c.end))
        })
        .collect()
}

/// The call-outcome word of a cut's timeline entry (`ok`, `failed`, `silently-lost`), when the
/// cut leg carried a kept call (`call`: its JSON-RPC id as JSON text) of `session`.
fn outcome_of(
    session: Option<&String>,
    call: &str,
    outcomes: &BTreeMap<(Option<String>, String), CallEnd>,
) -> Option<&'static str> {
    let end = outcomes.get(&(session.cloned(), call.trim_matches('"').to_owned()))?;
    Some(match end {
        CallEnd::Ok => "ok",
        CallEnd::Failed => "failed",
        CallEnd::SilentlyLost => "silently-lost",
    })
}

fn add_timeline(
    report: &mut Report,
    policy: &str,
    offset_ms: u64,
    moments: &[Moment],
    outcomes: &BTreeMap<(Option<String>, String), CallEnd>,
) {
    for m in moments {
        match m {
            Moment::Cut {
                t_ms,
                action,
                point,
                outage,
                call,
            } => {
                let class = point.class.map_or("outside-sse", |c| c.as_str());
                let mut detail = format!(
                    "[{policy}] {action} at {class}, raw offset {}, pending id {}",
                    point.raw_offset,
                    point.pending_id.as_deref().unwrap_or("-")
                );
                // A resume leg's cut is filed under the call whose stream it resumed (the
                // tap followed its `Last-Event-ID`), coloured by that call's outcome too.
                if let Some(call) = call {
                    let leg = if point.rpc_id.is_none() {
                        " (resume leg)"
                    } else {
                        ""
                    };
                    detail.push_str(&format!(", request {call}{leg}"));
                    if let Some(outcome) = outcome_of(point.session.as_ref(), call, outcomes) {
                        detail.push_str(&format!(" -> call {outcome}"));
                    }
                }
                report.add_timeline(offset_ms + t_ms, TimelineKind::Cut, 0, &detail);
                if let Some(d) = outage {
                    report.add_timeline(
                        offset_ms + t_ms,
                        TimelineKind::Outage,
                        millis(*d),
                        &format!("[{policy}] new connections held"),
                    );
                }
            }
            Moment::Resume {
                t_ms,
                last_event_id,
                session,
            } => {
                let detail = format!(
                    "[{policy}] Last-Event-ID {last_event_id} (session {})",
                    session.as_deref().unwrap_or("-")
                );
                report.add_timeline(offset_ms + t_ms, TimelineKind::Resume, 0, &detail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::audit::{AuditConfig, Auditor};
    use crate::replay::tap::Tap;
    use crate::report::time_charts::cut_marks;
    use crate::vocab::{CutAction, Direction};
    use crate::wire::{CutPoint, Observation, ObservationSink};

    fn request(conn: u64, method: &str, cursor: Option<&str>, body: &str) -> Observation {
        Observation::Request {
            conn,
            seq: 0,
            method: method.to_owned(),
            path: "/mcp".to_owned(),
            session: Some("s1".to_owned()),
            last_event_id: cursor.map(str::to_owned),
            protocol_version: None,
            has_authorization: false,
            idempotency_key: None,
            accepts_event_stream: true,
            body: Some(bytes::Bytes::copy_from_slice(body.as_bytes())),
        }
    }

    fn event(conn: u64, id: &str) -> Observation {
        Observation::SseEvent {
            conn,
            seq: 0,
            index: 0,
            id: Some(id.to_owned()),
            last_event_id: Some(id.to_owned()),
            event_type: None,
            data_hash: 0,
            data_len: 0,
            data: None,
            data_lines: 1,
            raw_start: 0,
            raw_end: 0,
        }
    }

    fn cut(conn: u64, rpc_id: Option<&str>) -> Observation {
        Observation::Cut {
            conn,
            direction: Direction::Downstream,
            action: CutAction::Reset,
            point: CutPoint {
                class: Some(crate::wire::SseClass::MidValue),
                session: Some("s1".to_owned()),
                rpc_id: rpc_id.map(str::to_owned),
                exchange: Some(0),
                ..CutPoint::default()
            },
        }
    }

    #[test]
    fn a_resume_leg_cut_is_coloured_by_the_call_it_resumed() {
        let tap = Tap::new(Arc::new(Auditor::new(AuditConfig::default())));
        // Call 7's POST is cut after event s-3, its resume GET (on another connection) is cut
        // too, and a second resume ends the call well.
        for obs in [
            request(
                1,
                "POST",
                None,
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            ),
            event(1, "s-3"),
            cut(1, Some("7")),
            Observation::ConnClosed { conn: 1 },
            request(2, "GET", Some("s-3"), ""),
            event(2, "s-4"),
            cut(2, None),
            // A resume whose cursor was never delivered names no call.
            request(3, "GET", Some("x-9"), ""),
            cut(3, None),
        ] {
            tap.record(obs);
        }
        let calls = [CallFacts {
            requests: vec![(Some("s1".to_owned()), 7)],
            counts: Default::default(),
            end: CallEnd::Ok,
        }];
        let mut report = Report::new(RunFacts::new(
            1,
            "p",
            Target::User {
                address: "a".to_owned(),
                path: "/mcp".to_owned(),
            },
        ));
        add_timeline(
            &mut report,
            "strict",
            0,
            &tap.moments(),
            &call_outcomes(&calls),
        );
        let cuts: Vec<(String, String)> = report
            .timeline
            .iter()
            .filter(|e| e.kind == TimelineKind::Cut)
            .map(|e| e.detail.clone())
            .zip(cut_marks(&report.timeline).into_iter().map(|m| m.outcome))
            .collect();
        assert_eq!(cuts.len(), 3, "{cuts:?}");
        assert!(!cuts[0].0.contains("resume leg"), "{cuts:?}");
        assert_eq!(cuts[0].1, "ok");
        assert!(cuts[1].0.contains("request 7 (resume leg)"), "{cuts:?}");
        assert_eq!(cuts[1].1, "ok", "the resume leg's cut is coloured");
        assert_eq!(cuts[2].1, "-", "an unknown cursor names no call");
    }
}
