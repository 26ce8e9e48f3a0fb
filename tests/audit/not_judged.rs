//! A stream that lost observations in the audit's full queue is reported not judged — one
//! `unknown` that says so, with the count — and never judged from what was left: the events a
//! full queue dropped from a replay are not reported as a gap. Without drops, the same traffic
//! is judged as usual, and streams that lost nothing are judged beside a holed one.

use crate::common::audit::{Eol, Wire, call, event, progress, result};
use tearline::audit::{AuditConfig, Auditor, Finding, FindingKind as K};
use tearline::vocab::CutAction;
use tearline::wire::Observation;

const FILLER: u64 = 64;
const A: Option<&str> = Some("s-a");
const B: Option<&str> = Some("s-b");

fn ev(id: &str, data: &str) -> String {
    event(Eol::Lf, Some(id), None, &[data])
}

/// Session A: a call cut at an event boundary and resumed exactly (conns 1, 2). Then session
/// B: a call cut inside event `b-2` (conn 3) and resumed from `b-1` on conn 4, whose replay
/// (`b-2`, the result) and end follow the resume's request and response. Before the resume,
/// the queue is drained (a query drains it even while the worker is paused) and then holds
/// `FILLER` connection openings of other connections, so a queue of `FILLER + 2` has room for
/// the resume's request and response only.
fn script(w: &mut Wire) {
    let flush = |w: &Wire| drop(w.auditor.counts());
    w.post(1, 0, A, &call("7", "search"));
    w.sse_ok(1, 0);
    let body = ev("a-1", &progress(1)) + &ev("a-2", &progress(2));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, A, "a-2");
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(ev("a-3", &progress(3)) + &ev("a-4", &result("7", "ok"))),
    );
    flush(w);
    w.post(3, 0, B, &call("9", "search"));
    w.sse_ok(3, 0);
    let body = ev("b-1", &progress(1)) + &ev("b-2", &progress(2));
    w.deliver(3, 0, &body, Some(body.len() - 5), CutAction::Reset);
    flush(w);
    for conn in 100..100 + FILLER {
        w.rec(Observation::ConnOpened {
            conn,
            proxy: "p".into(),
        });
    }
    w.resume(4, 0, B, "b-1");
    w.sse_ok(4, 0);
    w.stream_clean(
        4,
        0,
        &(ev("b-2", &progress(2)) + &ev("b-3", &result("9", "ok"))),
    );
}

fn of_session<'a>(all: &'a [Finding], session: Option<&str>) -> Vec<&'a Finding> {
    all.iter()
        .filter(|f| f.session.as_deref() == session)
        .collect()
}

fn kinds(fs: &[&Finding]) -> Vec<K> {
    fs.iter().map(|f| f.kind).collect()
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_replay_was_dropped_is_not_judged_and_gets_no_gap() {
    // Room for the resume's request and response only: its events and end are dropped.
    let auditor = Auditor::with_queue_limit(AuditConfig::default(), FILLER as usize + 2);
    auditor.set_paused(true);
    let mut w = Wire::of(auditor);
    script(&mut w);
    w.auditor.finish();
    let all = w.auditor.findings();
    assert_eq!(w.auditor.dropped(), 3, "two events, the end, nothing else");
    assert_eq!(kinds(&of_session(&all, A)), [K::ReplayExact], "{all:#?}");
    let b = of_session(&all, B);
    // The torn cut was judged from whole observations, before anything of B was lost.
    assert_eq!(kinds(&b), [K::TornCut, K::Unknown], "{all:#?}");
    let unknown = b[1];
    assert!(
        unknown.detail.starts_with("not judged:") && unknown.detail.contains("3 observation(s)"),
        "{}",
        unknown.detail
    );
    assert_eq!(
        (unknown.stream.conn, unknown.stream.seq),
        (3, 0),
        "named by its opening"
    );
    let summary = w.auditor.summary();
    assert!(
        summary.contains("1 stream(s) or connection(s) reported not judged"),
        "{summary}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_same_traffic_without_drops_is_judged_whole() {
    let auditor = Auditor::with_queue_limit(AuditConfig::default(), 1024);
    auditor.set_paused(true);
    let mut w = Wire::of(auditor);
    script(&mut w);
    w.auditor.finish();
    let all = w.auditor.findings();
    assert_eq!(w.auditor.dropped(), 0);
    assert_eq!(kinds(&of_session(&all, A)), [K::ReplayExact], "{all:#?}");
    assert_eq!(
        kinds(&of_session(&all, B)),
        [K::TornCut, K::ReplayExact],
        "{all:#?}"
    );
    assert!(!all.iter().any(|f| f.detail.starts_with("not judged:")));
}

#[tokio::test(start_paused = true)]
async fn a_connection_whose_requests_were_dropped_is_reported_once_when_it_closes() {
    let auditor = Auditor::with_queue_limit(AuditConfig::default(), 1);
    auditor.set_paused(true);
    let mut w = Wire::of(auditor);
    // The queue holds one observation: the request of conn 1; its response and events drop.
    w.post(1, 0, A, &call("7", "search"));
    w.sse_ok(1, 0);
    w.stream_clean(1, 0, &ev("a-1", &result("7", "ok")));
    drop(w.auditor.counts());
    // Conn 5: its opening takes the one place, its request is dropped, its close arrives.
    w.rec(Observation::ConnOpened {
        conn: 5,
        proxy: "p".into(),
    });
    w.post(5, 0, B, &call("9", "search"));
    drop(w.auditor.counts());
    w.rec(Observation::ConnClosed { conn: 5 });
    w.auditor.finish();
    let all = w.auditor.findings();
    let conn5: Vec<_> = all.iter().filter(|f| f.stream.conn == 5).collect();
    assert_eq!(conn5.len(), 1, "{all:#?}");
    assert!(
        conn5[0]
            .detail
            .contains("connection 5 lost 1 observation(s)"),
        "{}",
        conn5[0].detail
    );
    let conn1: Vec<_> = all.iter().filter(|f| f.stream.conn == 1).collect();
    assert_eq!(
        conn1.len(),
        1,
        "one not-judged unknown for conn 1: {all:#?}"
    );
    assert!(conn1[0].detail.starts_with("not judged:"));
}
