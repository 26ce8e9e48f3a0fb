//! `during-replay` on real sockets: between the lab server and the strict load client, one
//! `sse_cut` tears fresh streams mid-value (`leg = "first"`, so the client resumes with
//! `Last-Event-ID`) and a second one aims at `during-replay`. The second cuts only responses to resume requests,
//! inside a replayed event; the cut record says `during-replay`; the audit reports the torn
//! cut with that class, and its delivered events still equal the client's, LF and CRLF.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use crate::common::delivery::*;
use tearline::audit::FindingKind;
use tearline::fault::FaultFactory;
use tearline::lab::LineEnding;
use tearline::wire::record::CutRecord;
use tearline::wire::{Observation, SseClass};

fn cut_at(class: &str, leg: &str, range: (i64, i64), p: f64) -> Arc<dyn FaultFactory> {
    fault(&[
        ("kind", s("sse_cut")),
        ("direction", s("downstream")),
        ("at", s(class)),
        ("leg", s(leg)),
        ("range", toml::Value::Array(vec![i(range.0), i(range.1)])),
        ("action", s("reset")),
        ("probability", f(p)),
    ])
}

/// Each cut with whether the request it answered carried `Last-Event-ID`.
fn cuts_with_resume(all: &[Observation]) -> Vec<(Observation, bool)> {
    let mut last_request: BTreeMap<u64, bool> = BTreeMap::new();
    let mut out = Vec::new();
    for o in all {
        match o {
            Observation::Request {
                conn,
                last_event_id,
                ..
            } => {
                last_request.insert(*conn, last_event_id.is_some());
            }
            Observation::Cut { conn, .. } => {
                out.push((o.clone(), last_request.get(conn).copied().unwrap_or(false)));
            }
            _ => {}
        }
    }
    out
}

async fn during_replay_cuts_only_resumes(eol: LineEnding, seed: u64) {
    let label = format!("{eol:?}");
    let faults = vec![
        cut_at("mid-value", "first", (0, 300), 1.0),
        cut_at("during-replay", "any", (0, 400), 0.5),
    ];
    let run = run(seed, faults, Traffic::small(eol)).await;
    assert_delivery_truth(&run, &label);
    let cuts = cuts_with_resume(&run.recorder.all());
    let class_of = |o: &Observation| match o {
        Observation::Cut { point, .. } => point.class,
        _ => None,
    };
    let replay: Vec<&(Observation, bool)> = cuts
        .iter()
        .filter(|(o, _)| class_of(o) == Some(SseClass::DuringReplay))
        .collect();
    assert!(
        !replay.is_empty(),
        "{label}: no during-replay cut among {} cuts",
        cuts.len()
    );
    assert!(
        replay.iter().all(|(_, resume)| *resume),
        "{label}: a during-replay cut answered a request without Last-Event-ID"
    );
    assert!(
        cuts.iter()
            .any(|(o, resume)| !resume && class_of(o) == Some(SseClass::MidValue)),
        "{label}: the fresh streams were not cut mid-value"
    );
    assert!(
        !cuts
            .iter()
            .any(|(o, resume)| *resume && class_of(o) == Some(SseClass::MidValue)),
        "{label}: a resume response still has mid-value cut points"
    );
    let record = CutRecord::from_observation(&replay[0].0, "delivery", SystemTime::now())
        .expect("a cut record");
    assert_eq!(
        record.point.class.map(|c| c.as_str()),
        Some("during-replay"),
        "{label}"
    );
    assert_eq!(
        record.point.by,
        Some("sse_cut"),
        "{label}: the fault that cut"
    );
    assert_eq!(record.stream.method.as_deref(), Some("GET"), "{label}");
    let torn: Vec<_> = run
        .auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == FindingKind::TornCut)
        .filter(|f| f.cut.class_name() == Some("during-replay"))
        .collect();
    assert!(
        !torn.is_empty(),
        "{label}: the audit reports no torn cut during replay"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_replay_cuts_only_replayed_events_lf() {
    during_replay_cuts_only_resumes(LineEnding::Lf, 12).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_replay_cuts_only_replayed_events_crlf() {
    during_replay_cuts_only_resumes(LineEnding::Crlf, 13).await;
}
