//! Issue 13's remaining evidence checks from scripted observations: a call sent again as is in
//! the same session is linked to the lost one (and the link is in the evidence), and the hung
//! call's `pending-call` reaches the findings log as well as `findings()` and the summary.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of, result};
use tearline::audit::rules::RESEND_HOLD;
use tearline::audit::{AuditConfig, FindingKind as K};
use tearline::vocab::CutAction;

fn msg(eol: Eol, id: &str, data: &str) -> String {
    event(eol, Some(id), None, &[data])
}

/// Session A's call 2 is cut before its result, and its resume is answered with a fresh stream
/// that ends cleanly without it.
fn lost_call(eol: Eol) -> Wire {
    let mut w = Wire::new();
    w.post(1, 0, Some("A"), &call_with_token("2", "blob", "tA"));
    w.sse_ok(1, 0);
    let pre = msg(eol, "1-1", &progress_of("tA", 1)) + &msg(eol, "1-2", &progress_of("tA", 2));
    let torn = msg(eol, "1-3", &result("2", "big"));
    let cut = pre.len() + torn.len() - 6;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, Some("A"), "1-2");
    w.sse_ok(2, 0);
    let fresh = event(eol, Some("1-5"), None, &[""])
        + &msg(
            eol,
            "1-6",
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
        );
    w.stream_clean(2, 0, &fresh);
    w
}

#[tokio::test(start_paused = true)]
async fn a_call_sent_again_as_is_in_the_same_session_is_reissued_with_the_link_in_evidence() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = lost_call(eol);
        // The same JSON-RPC id, tool and arguments (a new progress token), same session.
        w.post(3, 0, Some("A"), &call_with_token("2", "blob", "tA2"));
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &msg(eol, "2-1", &result("2", "big")));
        w.auditor.finish();
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::FreshStream, K::Reissued],
            "{:#?}",
            w.auditor.findings()
        );
        let f = &w.auditor.findings()[2];
        assert_eq!(f.ids, vec!["2".to_string(), "2".to_string()]);
        assert!(f.detail.contains("in the same session"), "{}", f.detail);
        assert!(
            w.auditor
                .silent_loss()
                .starts_with("silent loss observed: no"),
            "{}",
            w.auditor.silent_loss()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_same_call_with_other_arguments_in_the_same_session_is_no_reissue() {
    let eol = Eol::Lf;
    let mut w = lost_call(eol);
    w.post(3, 0, Some("A"), &call_with_token("2", "search", "tA2"));
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &msg(eol, "2-1", &result("2", "small")));
    w.auditor.finish();
    assert!(
        !w.kinds().contains(&K::Reissued),
        "{:#?}",
        w.auditor.findings()
    );
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The hung call (result lost, stream ended cleanly, no resume): `pending-call` in the findings
/// log, in `findings()` (what `/findings` serves) and in the summary's first line.
#[tokio::test(start_paused = true)]
async fn hung_call_pending_call_is_written_to_the_findings_log() {
    let eol = Eol::Lf;
    let mut w = Wire::with(AuditConfig {
        abandon_after: Duration::from_secs(2),
        ..AuditConfig::default()
    });
    let log = Shared::default();
    w.auditor.log_to(Box::new(log.clone()));
    w.post(1, 0, Some("s-1"), &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let pre = msg(eol, "1", &progress_of("t", 1));
    let torn = msg(eol, "2", &progress_of("t", 2));
    let cut = pre.len() + torn.len() - 3;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, Some("s-1"), "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &torn);
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(w.kinds(), vec![K::TornCut, K::PendingCall]);
    w.auditor.flush_log();
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("one JSON finding a line");
            v["kind"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(kinds, ["torn-cut", "pending-call"], "{text}");
    assert!(text.contains(r#""ids":["7"]"#), "{text}");
    assert!(
        w.auditor
            .summary()
            .starts_with("silent loss observed: yes (1 call affected)")
    );
}

/// Session A's call 2 (`blob`) is cut mid-result (connection 1) and resumed from `1-1`
/// (connection 2, nothing answered yet).
fn cut_and_resumed(eol: Eol) -> Wire {
    cut_and_resumed_keyed(eol, None)
}

/// [`cut_and_resumed`], call 2's POST carrying `Idempotency-Key: key` if given.
fn cut_and_resumed_keyed(eol: Eol, key: Option<&str>) -> Wire {
    let mut w = Wire::new();
    let body = call_with_token("2", "blob", "tA");
    match key {
        Some(k) => w.post_keyed(1, 0, Some("A"), None, k, &body),
        None => w.post(1, 0, Some("A"), &body),
    }
    w.sse_ok(1, 0);
    let pre = msg(eol, "1-1", &progress_of("tA", 1));
    let torn = msg(eol, "1-2", &result("2", "big"));
    let cut = pre.len() + torn.len() - 6;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, Some("A"), "1-1");
    w
}

/// [`cut_and_resumed`]; the resume is still open (200, SSE) when session B sends its first
/// call, the same tool and arguments, answered. Returns the wire before A's resume ends.
fn resumed_while_another_session_calls_alike(eol: Eol) -> Wire {
    let mut w = cut_and_resumed(eol);
    w.sse_ok(2, 0);
    w.post(3, 0, Some("B"), &call_with_token("2", "blob", "tB"));
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &msg(eol, "1-1", &result("2", "big")));
    w
}

#[tokio::test(start_paused = true)]
async fn an_identical_call_from_another_session_while_a_resume_is_open_is_no_reissue() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = resumed_while_another_session_calls_alike(eol);
        w.stream_clean(2, 0, &msg(eol, "1-2", &result("2", "big")));
        w.auditor.finish();
        let kinds = w.kinds();
        assert!(
            !kinds.contains(&K::Reissued) && !kinds.contains(&K::PendingCall),
            "{:#?}",
            w.auditor.findings()
        );
        assert!(kinds.contains(&K::TornCut), "{kinds:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_identical_call_seen_while_the_resume_was_open_is_named_when_the_resume_is_cut() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = resumed_while_another_session_calls_alike(eol);
        // A's resume is cut before the result: the call waits again, its candidate kept.
        let torn = msg(eol, "1-2", &result("2", "big"));
        w.deliver(2, 0, &torn, Some(torn.len() - 4), CutAction::Reset);
        w.auditor.finish();
        let kinds = w.kinds();
        assert!(
            !kinds.contains(&K::Abandoned),
            "{:#?}",
            w.auditor.findings()
        );
        let f = w
            .auditor
            .findings()
            .into_iter()
            .find(|f| f.kind == K::UnprovenResend)
            .expect("unproven-resend");
        assert_eq!(f.candidates.len(), 1, "{f:#?}");
        assert_eq!(f.candidates[0].session.as_deref(), Some("B"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_whose_resume_ended_without_its_result_is_reissued_by_a_new_sessions_keyed_call() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = cut_and_resumed_keyed(eol, Some("k-2"));
        w.response(2, 0, 404, "text/plain", None);
        w.end(2, 0, true);
        // The client renegotiated (session B) and sent the call again, with its key.
        w.post_keyed(
            3,
            0,
            Some("B"),
            None,
            "k-2",
            &call_with_token("2", "blob", "tB"),
        );
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &msg(eol, "1-1", &result("2", "big")));
        w.auditor.finish();
        let kinds = w.kinds();
        assert!(kinds.contains(&K::Reissued), "{:#?}", w.auditor.findings());
        assert!(!kinds.contains(&K::PendingCall), "{kinds:?}");
        assert!(!kinds.contains(&K::Abandoned), "{kinds:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_new_sessions_identical_call_without_a_key_makes_the_refused_call_an_unproven_resend() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = cut_and_resumed(eol);
        w.response(2, 0, 404, "text/plain", None);
        w.end(2, 0, true);
        w.post(3, 0, Some("B"), &call_with_token("2", "blob", "tB"));
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &msg(eol, "1-1", &result("2", "big")));
        w.auditor.finish();
        let kinds = w.kinds();
        assert!(!kinds.contains(&K::Reissued), "{:#?}", w.auditor.findings());
        let lost = w
            .auditor
            .findings()
            .into_iter()
            .find(|f| f.kind == K::UnprovenResend)
            .expect("unproven-resend");
        assert!(!kinds.contains(&K::Abandoned), "{kinds:?}");
        assert_eq!(lost.ids, vec!["2".to_string()]);
        assert_eq!(lost.candidates.len(), 1);
        assert_eq!(lost.candidates[0].session.as_deref(), Some("B"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_keyed_reissue_seen_while_the_resume_is_open_is_linked_once_its_hold_ends() {
    for eol in [Eol::Lf, Eol::CrLf] {
        // The client gave up on the resume and renegotiated; the proxy sees its new session's
        // call before the resume's clean end (two connections, either order).
        let mut w = cut_and_resumed_keyed(eol, Some("k-2"));
        w.sse_ok(2, 0);
        w.post_keyed(
            3,
            0,
            Some("B"),
            None,
            "k-2",
            &call_with_token("2", "blob", "tB"),
        );
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &msg(eol, "1-1", &result("2", "big")));
        assert!(
            !w.kinds().contains(&K::Reissued),
            "the link is held: the old call's answer may still be recorded"
        );
        tokio::time::advance(RESEND_HOLD).await;
        assert!(
            w.kinds().contains(&K::Reissued),
            "the key proves the re-send once the hold ended"
        );
        w.stream_clean(
            2,
            0,
            &msg(
                eol,
                "1-3",
                r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
            ),
        );
        w.auditor.finish();
        let kinds = w.kinds();
        assert!(!kinds.contains(&K::PendingCall), "{kinds:?}");
        assert!(!kinds.contains(&K::Abandoned), "{kinds:?}");
        let f = w
            .auditor
            .findings()
            .into_iter()
            .find(|f| f.kind == K::Reissued)
            .unwrap();
        assert!(f.detail.contains("in new session B"), "{}", f.detail);
    }
}
