//! Unanswered means lost (issue 24 item 2): a cut call with no answer, no resume and no proven
//! re-send is `abandoned` (class loss) when the run ends — even before `abandon_after` — in
//! both eras, with the time it waited; and never when it was answered, resumed to its answer,
//! cancelled or provably re-sent.

use std::time::Duration;

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of, result};
use tearline::audit::{AuditConfig, Finding, FindingKind as K};
use tearline::vocab::CutAction;

const S: Option<&str> = Some("s-1");
const MODERN: Option<&str> = Some("2026-07-28");

fn msg(id: &str, data: &str) -> String {
    event(Eol::Lf, Some(id), None, &[data])
}

fn abandoned(w: &Wire) -> Vec<Finding> {
    w.auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == K::Abandoned)
        .collect()
}

/// Legacy call 7: its stream is reset after event 2, its resume from 2 is reset after event 3,
/// its resume from 3 is reset before any byte; the client then stops (reconnection attempts
/// exhausted).
fn resumes_cut_until_the_client_stops(w: &mut Wire) {
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let first = msg("1", &progress_of("t", 1)) + &msg("2", &progress_of("t", 2));
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Reset);
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    let second = msg("3", &progress_of("t", 3));
    w.deliver(2, 0, &second, Some(second.len()), CutAction::Reset);
    w.resume(3, 0, S, "3");
    w.sse_ok(3, 0);
    w.deliver(
        3,
        0,
        &msg("4", &progress_of("t", 4)),
        Some(0),
        CutAction::Reset,
    );
}

#[tokio::test(start_paused = true)]
async fn legacy_call_whose_resumes_are_cut_until_the_client_stops_is_abandoned_at_finish() {
    let mut w = Wire::new();
    resumes_cut_until_the_client_stops(&mut w);
    tokio::time::advance(Duration::from_secs(2)).await;
    w.auditor.finish();
    let lost = abandoned(&w);
    assert_eq!(lost.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(lost[0].ids, vec!["7".to_string()]);
    assert_eq!(lost[0].class.as_str(), "loss");
    assert_eq!(lost[0].waited_ms, Some(2000));
    assert!(
        lost[0].detail.contains("cut 3 time(s)"),
        "{}",
        lost[0].detail
    );
    assert!(
        lost[0].detail.contains("the run ended"),
        "{}",
        lost[0].detail
    );
    assert!(
        w.auditor
            .summary()
            .starts_with("silent loss observed: yes (1 call affected)"),
        "{}",
        w.auditor.summary()
    );
}

#[tokio::test(start_paused = true)]
async fn lost_call_is_abandoned_once_abandon_after_passed_without_finish() {
    let mut w = Wire::with(AuditConfig {
        abandon_after: Duration::from_secs(2),
        ..AuditConfig::default()
    });
    resumes_cut_until_the_client_stops(&mut w);
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(abandoned(&w).is_empty(), "not before abandon_after");
    tokio::time::advance(Duration::from_secs(2)).await;
    let lost = abandoned(&w);
    assert_eq!(lost.len(), 1, "{:#?}", w.auditor.findings());
    assert!(lost[0].waited_ms.is_some_and(|ms| ms >= 2000));
    assert!(
        lost[0].detail.contains("abandon_after passed"),
        "{}",
        lost[0].detail
    );
    w.auditor.finish();
    assert_eq!(abandoned(&w).len(), 1, "reported once");
}

#[tokio::test(start_paused = true)]
async fn call_cut_in_the_priming_event_before_any_id_is_abandoned_at_finish() {
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let priming = event(Eol::Lf, Some("p-0"), None, &[""]);
    // Cut inside the priming event's id line: no cursor exists, nothing can be resumed.
    w.deliver(1, 0, &priming, Some(5), CutAction::Reset);
    tokio::time::advance(Duration::from_millis(500)).await;
    w.auditor.finish();
    let lost = abandoned(&w);
    assert_eq!(lost.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(lost[0].ids, vec!["7".to_string()]);
    assert_eq!(lost[0].waited_ms, Some(500));
}

/// A 2026-07-28 call (no session) cut after a progress event.
fn modern_cut(w: &mut Wire, id: &str, method_body: &str) {
    let _ = id;
    w.request(1, 0, "POST", None, None, MODERN, Some(method_body));
    w.sse_ok(1, 0);
    let body = event(Eol::Lf, None, None, &[&progress_of("t", 1)])
        + &event(Eol::Lf, None, None, &[&progress_of("t", 2)]);
    w.deliver(1, 0, &body, Some(body.len() - 3), CutAction::Reset);
}

#[tokio::test(start_paused = true)]
async fn modern_call_never_re_sent_is_abandoned_at_finish_before_abandon_after() {
    let mut w = Wire::new();
    modern_cut(&mut w, "7", &call_with_token("7", "search", "t"));
    tokio::time::advance(Duration::from_secs(3)).await;
    w.auditor.finish();
    assert_eq!(w.kinds(), vec![K::TornCut, K::Abandoned]);
    let lost = abandoned(&w);
    assert_eq!(lost[0].waited_ms, Some(3000));
    assert!(!w.kinds().contains(&K::Unknown));
}

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;

#[tokio::test(start_paused = true)]
async fn cut_discover_re_sent_with_its_fixed_id_and_answered_is_not_abandoned() {
    let mut w = Wire::new();
    modern_cut(&mut w, "\"server-discover-probe-1\"", DISCOVER);
    w.request(2, 0, "POST", None, None, MODERN, Some(DISCOVER));
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &event(
            Eol::Lf,
            None,
            None,
            &[r#"{"jsonrpc":"2.0","id":"server-discover-probe-1","result":{"supportedVersions":["2026-07-28"]}}"#],
        ),
    );
    tokio::time::advance(Duration::from_secs(40)).await;
    w.auditor.finish();
    assert!(abandoned(&w).is_empty(), "{:#?}", w.auditor.findings());
    let re = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::Reissued)
        .expect("the same id, method and params re-send it");
    assert_eq!(re.proof.as_deref(), Some("same-id"));
}

#[tokio::test(start_paused = true)]
async fn answered_resumed_or_cancelled_calls_are_never_abandoned() {
    // Resumed to its answer.
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let first = msg("1", &progress_of("t", 1));
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &msg("2", &result("7", "ok")));
    w.auditor.finish();
    assert!(abandoned(&w).is_empty(), "{:#?}", w.auditor.findings());
    // Cut after its answer.
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let body = msg("1", &result("7", "ok")) + &msg("2", &progress_of("t", 9));
    w.deliver(1, 0, &body, Some(body.len() - 4), CutAction::Reset);
    w.auditor.finish();
    assert!(abandoned(&w).is_empty(), "{:#?}", w.auditor.findings());
    // A resume still open when the run ends is not a lost call.
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.auditor.finish();
    assert!(abandoned(&w).is_empty(), "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn legacy_call_whose_resumes_are_cut_then_called_alike_is_an_unproven_resend() {
    let mut w = Wire::new();
    resumes_cut_until_the_client_stops(&mut w);
    // The app calls the same tool with the same arguments again, a new id, no key.
    w.post(4, 0, S, &call_with_token("8", "search", "t8"));
    w.sse_ok(4, 0);
    w.stream_clean(4, 0, &msg("5", &result("8", "ok")));
    w.auditor.finish();
    assert!(abandoned(&w).is_empty(), "{:#?}", w.auditor.findings());
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::UnprovenResend)
        .expect("unproven-resend");
    assert_eq!(f.ids, vec!["7".to_owned()]);
    assert_eq!(f.candidates.len(), 1, "{f:#?}");
    assert_eq!(f.candidates[0].id, "8");
    // Progress reached the client before the cuts.
    assert!(f.detail.contains("may have run twice"), "{}", f.detail);
    assert!(f.waited_ms.is_some());
}

#[tokio::test(start_paused = true)]
async fn a_call_resumed_to_its_answer_then_called_alike_is_neither_abandoned_nor_unproven() {
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let first = msg("1", &progress_of("t", 1));
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &msg("2", &result("7", "ok")));
    w.post(3, 0, S, &call_with_token("8", "search", "t8"));
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &msg("3", &result("8", "ok")));
    w.auditor.finish();
    let kinds = w.kinds();
    assert!(!kinds.contains(&K::Abandoned), "{kinds:?}");
    assert!(!kinds.contains(&K::UnprovenResend), "{kinds:?}");
}

/// Session `s-1`'s call 7 under `Idempotency-Key` `k-1`, cut until the client stops, then
/// session `s-2`'s identical call 7 under `other_key`.
fn keyed_call_given_up_then_another_sessions_identical_call(w: &mut Wire, other_key: &str) {
    let body = call_with_token("7", "search", "t");
    w.post_keyed(1, 0, S, None, "k-1", &body);
    w.sse_ok(1, 0);
    let first = msg("1", &progress_of("t", 1));
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.deliver(
        2,
        0,
        &msg("2", &progress_of("t", 2)),
        Some(0),
        CutAction::Reset,
    );
    w.post_keyed(3, 0, Some("s-2"), None, other_key, &body);
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &msg("1", &result("7", "ok")));
    w.auditor.finish();
}

#[tokio::test(start_paused = true)]
async fn another_sessions_identical_call_under_its_own_idempotency_key_leaves_the_given_up_call_abandoned()
 {
    let mut w = Wire::new();
    keyed_call_given_up_then_another_sessions_identical_call(&mut w, "k-2");
    let kinds = w.kinds();
    assert_eq!(abandoned(&w).len(), 1, "{:#?}", w.auditor.findings());
    assert!(!kinds.contains(&K::UnprovenResend), "{kinds:?}");

    // Under the same key it is the call's proven re-send (a renegotiated session): recovered.
    let mut w = Wire::new();
    keyed_call_given_up_then_another_sessions_identical_call(&mut w, "k-1");
    let kinds = w.kinds();
    assert!(abandoned(&w).is_empty(), "{:#?}", w.auditor.findings());
    assert!(kinds.contains(&K::Reissued), "{kinds:?}");
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"app","version":"1"}}}"#;

#[tokio::test(start_paused = true)]
async fn a_cut_handshake_followed_by_the_same_handshake_is_neither_a_resend_nor_a_loss() {
    // Every client opens its session with these bytes: one client's retry of a cut handshake
    // and another client's first one look the same, so neither links nor counts as lost.
    let mut w = Wire::new();
    w.post(1, 0, None, INITIALIZE);
    w.sse_ok(1, 0);
    w.deliver(1, 0, &msg("0-1", "{}"), Some(3), CutAction::Reset);
    w.post(2, 0, None, INITIALIZE);
    w.response(2, 0, 200, "text/event-stream", S);
    w.stream_clean(
        2,
        0,
        &msg(
            "0-1",
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}"#,
        ),
    );
    tokio::time::advance(Duration::from_secs(40)).await;
    w.auditor.finish();
    let kinds = w.kinds();
    for k in [K::Reissued, K::Abandoned, K::UnprovenResend] {
        assert!(!kinds.contains(&k), "{k:?} in {:#?}", w.auditor.findings());
    }
    assert!(
        kinds.contains(&K::TornCut),
        "the cut itself is still judged: {kinds:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_cut_tool_call_followed_by_the_same_id_and_params_in_its_session_is_still_reissued() {
    let mut w = Wire::new();
    let call = call_with_token("7", "search", "t");
    w.post(1, 0, S, &call);
    w.sse_ok(1, 0);
    w.deliver(
        1,
        0,
        &msg("1", &progress_of("t", 1)),
        Some(5),
        CutAction::Reset,
    );
    w.post(2, 0, S, &call);
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &msg("2", &result("7", "ok")));
    w.auditor.finish();
    assert!(
        w.kinds().contains(&K::Reissued),
        "{:#?}",
        w.auditor.findings()
    );
}
