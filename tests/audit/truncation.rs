//! The audit on TLS truncations (a `fin` cut without `close_notify`): the torn-cut says the
//! TLS session was truncated, and `truncation-accepted` appears if and only if the client went
//! on with another call in the session without resuming, re-sending or cancelling the cut one.

use crate::common::audit::{Eol, Wire, call, event, progress};
use tearline::audit::{FindingClass, FindingKind as K};
use tearline::tls::TlsEnd;
use tearline::vocab::CutAction;

const S: Option<&str> = Some("s-1");

fn ev(id: &str, data: &str) -> String {
    event(Eol::Lf, Some(id), None, &[data])
}

/// POST tools/call 7 on conn 1; event 1 delivered, event 2 cut at `before-dispatch` (its
/// blank line withheld) with `action`, the TLS session ending as `tls_end`.
fn cut_call(tls_end: Option<TlsEnd>, action: CutAction) -> Wire {
    let mut w = Wire::new();
    w.tls_end = tls_end;
    w.post(1, 0, S, &call("7", "search"));
    w.sse_ok(1, 0);
    let body = ev("1", &progress(1)) + &ev("2", &progress(2));
    w.deliver(1, 0, &body, Some(body.len() - 1), action);
    w
}

/// The client's next, unrelated call in the same session (on connection 9).
fn moves_on(w: &mut Wire) {
    w.post(9, 0, S, &call("8", "fetch"));
    w.sse_ok(9, 0);
}

fn count(w: &Wire, kind: K) -> usize {
    w.auditor
        .findings()
        .iter()
        .filter(|f| f.kind == kind)
        .count()
}

#[tokio::test(start_paused = true)]
async fn truncated_cut_then_a_new_call_is_truncation_accepted() {
    let mut w = cut_call(Some(TlsEnd::Truncated), CutAction::Fin);
    moves_on(&mut w);
    w.auditor.finish();
    let findings = w.auditor.findings();
    let torn = findings
        .iter()
        .find(|f| f.kind == K::TornCut)
        .expect("the cut tore event 2");
    assert_eq!(torn.cut.class_name(), Some("before-dispatch"));
    assert_eq!(torn.cut.tls_end.map(|e| e.as_str()), Some("truncated"));
    let f: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == K::TruncationAccepted)
        .collect();
    assert_eq!(f.len(), 1, "{findings:#?}");
    let f = f[0];
    assert_eq!(f.class, FindingClass::ClientBug);
    assert_eq!(f.session.as_deref(), Some("s-1"));
    assert_eq!(f.ids, vec!["7".to_string()]);
    assert_eq!(f.raw_offsets, torn.raw_offsets);
    assert_eq!(f.cut.class_name(), Some("before-dispatch"));
    assert_eq!(f.cut.tls_end.map(|e| e.as_str()), Some("truncated"));
    assert!(f.detail.contains("tools/call 8"), "{}", f.detail);
}

#[tokio::test(start_paused = true)]
async fn truncated_cut_then_a_resume_is_no_truncation_accepted() {
    let mut w = cut_call(Some(TlsEnd::Truncated), CutAction::Fin);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    moves_on(&mut w);
    w.auditor.finish();
    assert_eq!(
        count(&w, K::TruncationAccepted),
        0,
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn giving_up_after_a_truncated_resume_is_no_truncation_accepted() {
    let mut w = cut_call(Some(TlsEnd::Truncated), CutAction::Fin);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    let body = ev("3", &progress(3));
    w.deliver(2, 0, &body, Some(body.len() - 1), CutAction::Fin);
    moves_on(&mut w);
    w.auditor.finish();
    assert_eq!(
        count(&w, K::TruncationAccepted),
        0,
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(count(&w, K::TornCut), 2, "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn truncated_cut_then_the_call_resent_is_no_truncation_accepted() {
    let mut w = cut_call(Some(TlsEnd::Truncated), CutAction::Fin);
    w.post(2, 0, S, &call("9", "search"));
    w.sse_ok(2, 0);
    moves_on(&mut w);
    w.auditor.finish();
    assert_eq!(
        count(&w, K::TruncationAccepted),
        0,
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn truncated_cut_then_the_call_cancelled_is_no_truncation_accepted() {
    let mut w = cut_call(Some(TlsEnd::Truncated), CutAction::Fin);
    w.post(
        2,
        0,
        S,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
    );
    moves_on(&mut w);
    w.auditor.finish();
    assert_eq!(
        count(&w, K::TruncationAccepted),
        0,
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn close_notify_reset_or_plain_cuts_are_never_truncation_accepted() {
    for (end, action) in [
        (Some(TlsEnd::CloseNotify), CutAction::Fin),
        (Some(TlsEnd::Truncated), CutAction::Reset),
        (None, CutAction::Fin),
    ] {
        let mut w = cut_call(end, action);
        moves_on(&mut w);
        w.auditor.finish();
        assert_eq!(
            count(&w, K::TruncationAccepted),
            0,
            "{end:?} {action:?}: {:#?}",
            w.auditor.findings()
        );
        let torn = w.auditor.findings();
        let torn = torn.iter().find(|f| f.kind == K::TornCut).expect("torn");
        assert_eq!(torn.cut.tls_end, end);
    }
}

#[tokio::test(start_paused = true)]
async fn truncated_cut_and_silence_is_not_judged() {
    let w = cut_call(Some(TlsEnd::Truncated), CutAction::Fin);
    w.auditor.finish();
    assert_eq!(
        count(&w, K::TruncationAccepted),
        0,
        "{:#?}",
        w.auditor.findings()
    );
}
