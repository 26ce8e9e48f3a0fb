//! MCP 2026-07-28 audit rules from scripted observation sequences: `reexecuted` appears exactly
//! when a visibly started call of a tool not declared repeat-safe is re-issued, and
//! `sent-after-cancel` exactly when the server sends for a request after its stream closed.
//! (The lab's side-effect counter is checked against these rules in `replay_stateless.rs` and
//! `audit_stateless_lab.rs`.)

use crate::common::audit::{Eol, Wire, event, progress_of, result};
use tearline::audit::FindingKind as K;
use tearline::vocab::{CutAction, Direction};
use tearline::wire::{CutPoint, Observation};

const V: Option<&str> = Some("2026-07-28");

fn modern_post(w: &Wire, conn: u64, body: &str) {
    w.request(conn, 0, "POST", None, None, V, Some(body));
}

fn call(id: &str, tool: &str, token: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"progressToken":"{token}"}}}}}}"#
    )
}

/// `tools/list` answered on conn 10: `append` not repeat-safe, `search` read-only, `blob`
/// idempotent.
fn list_tools(w: &mut Wire) {
    modern_post(
        w,
        10,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
    );
    w.sse_ok(10, 0);
    let list = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"append","annotations":{"readOnlyHint":false,"idempotentHint":false,"destructiveHint":false}},{"name":"search","annotations":{"readOnlyHint":true}},{"name":"blob","annotations":{"idempotentHint":true}}],"ttlMs":60000}}"#;
    w.stream_clean(10, 0, &event(Eol::Lf, None, None, &[list]));
}

/// Call `tool` as id 7 on conn 1; the stream delivers a progress event and is cut `into` bytes
/// into the result event (0: at the boundary after the progress), or, with `before_any`, before
/// its first byte.
fn cut_call(w: &mut Wire, tool: &str, before_any: bool, into: usize) {
    // The client names the logical call: its re-send repeats the key (a proven re-send).
    w.post_keyed(1, 0, None, V, "call-7", &call("7", tool, "p-7"));
    w.sse_ok(1, 0);
    let first = event(Eol::Lf, None, None, &[&progress_of("p-7", 1)]);
    let body = first.clone() + &event(Eol::Lf, None, None, &[&result("7", "appended: 1")]);
    let at = if before_any { 0 } else { first.len() + into };
    w.deliver(1, 0, &body, Some(at), CutAction::Reset);
}

/// Re-issue `tool` as id 8 on conn 2 with the cut call's `Idempotency-Key`, answered in full.
fn reissue(w: &mut Wire, tool: &str) {
    w.post_keyed(2, 0, None, V, "call-7", &call("8", tool, "p-8"));
    answer_8(w);
}

/// The same call as id 8 on conn 2 without any proof of being a re-send, answered in full.
fn call_again_unproven(w: &mut Wire, tool: &str) {
    modern_post(w, 2, &call("8", tool, "p-8"));
    answer_8(w);
}

fn answer_8(w: &mut Wire) {
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(event(Eol::Lf, None, None, &[&progress_of("p-8", 1)])
            + &event(Eol::Lf, None, None, &[&result("8", "appended: 2")])),
    );
}

fn count(w: &Wire, k: K) -> usize {
    w.kinds().iter().filter(|x| **x == k).count()
}

#[tokio::test(start_paused = true)]
async fn started_non_idempotent_call_reissued_yields_reexecuted_with_evidence() {
    for into in [0, 12] {
        let mut w = Wire::new();
        list_tools(&mut w);
        cut_call(&mut w, "append", false, into);
        reissue(&mut w, "append");
        w.auditor.finish();
        assert_eq!(count(&w, K::Reissued), 1, "{:#?}", w.auditor.findings());
        assert_eq!(count(&w, K::Reexecuted), 1, "{:#?}", w.auditor.findings());
        let f = w
            .auditor
            .findings()
            .into_iter()
            .find(|f| f.kind == K::Reexecuted)
            .expect("reexecuted");
        assert_eq!(f.ids, vec!["7".to_owned(), "8".to_owned()]);
        assert_eq!(f.class.as_str(), "duplicate");
        assert_eq!(f.proof.as_deref(), Some("idempotency-key"));
        assert!(f.detail.contains("\"append\""), "{}", f.detail);
        assert!(f.detail.contains("neither readOnlyHint"), "{}", f.detail);
    }
}

#[tokio::test(start_paused = true)]
async fn started_non_idempotent_call_repeated_without_proof_is_an_unproven_resend_that_may_have_run_twice()
 {
    let mut w = Wire::new();
    list_tools(&mut w);
    cut_call(&mut w, "append", false, 12);
    call_again_unproven(&mut w, "append");
    w.auditor.finish();
    assert_eq!(count(&w, K::Reissued), 0, "{:#?}", w.auditor.findings());
    assert_eq!(count(&w, K::Reexecuted), 0, "{:#?}", w.auditor.findings());
    assert_eq!(count(&w, K::Abandoned), 0, "{:#?}", w.auditor.findings());
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::UnprovenResend)
        .expect("unproven-resend");
    assert_eq!(f.candidates.len(), 1, "{f:#?}");
    assert!(f.detail.contains("may have run twice"), "{}", f.detail);
}

#[tokio::test(start_paused = true)]
async fn call_cut_before_any_byte_repeated_without_proof_does_not_say_it_ran_twice() {
    let mut w = Wire::new();
    list_tools(&mut w);
    cut_call(&mut w, "append", true, 0);
    call_again_unproven(&mut w, "append");
    w.auditor.finish();
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::UnprovenResend)
        .expect("unproven-resend");
    assert!(!f.detail.contains("may have run twice"), "{}", f.detail);
    assert_eq!(f.visible_start, None, "{f:#?}");
    assert!(f.detail.contains("the wire cannot tell"), "{}", f.detail);
}

#[tokio::test(start_paused = true)]
async fn repeat_safe_tools_reissued_yield_no_reexecuted() {
    for tool in ["search", "blob"] {
        let mut w = Wire::new();
        list_tools(&mut w);
        cut_call(&mut w, tool, false, 12);
        reissue(&mut w, tool);
        w.auditor.finish();
        assert_eq!(
            count(&w, K::Reissued),
            1,
            "{tool}: {:#?}",
            w.auditor.findings()
        );
        assert_eq!(
            count(&w, K::Reexecuted),
            0,
            "{tool}: {:#?}",
            w.auditor.findings()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn non_idempotent_call_cut_before_any_byte_yields_no_reexecuted() {
    let mut w = Wire::new();
    list_tools(&mut w);
    cut_call(&mut w, "append", true, 0);
    reissue(&mut w, "append");
    w.auditor.finish();
    assert_eq!(count(&w, K::Reissued), 1, "{:#?}", w.auditor.findings());
    assert_eq!(count(&w, K::Reexecuted), 0, "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn tool_without_annotations_on_the_wire_is_unknown_with_the_reason() {
    let mut w = Wire::new();
    cut_call(&mut w, "append", false, 12);
    reissue(&mut w, "append");
    w.auditor.finish();
    assert_eq!(count(&w, K::Reexecuted), 0, "{:#?}", w.auditor.findings());
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::Unknown)
        .expect("an unknown judgement without a tools/list");
    assert!(
        f.detail.starts_with("reexecuted not judged"),
        "{}",
        f.detail
    );
    assert!(f.detail.contains("spec's defaults"), "{}", f.detail);
}

/// A `subscriptions/listen` stream on conn 3, opened before the call.
fn listen(w: &mut Wire) {
    modern_post(
        w,
        3,
        r#"{"jsonrpc":"2.0","id":100,"method":"subscriptions/listen","params":{}}"#,
    );
    w.sse_ok(3, 0);
}

#[tokio::test(start_paused = true)]
async fn progress_for_a_cancelled_call_on_another_stream_yields_sent_after_cancel() {
    let mut w = Wire::new();
    listen(&mut w);
    cut_call(&mut w, "search", false, 12);
    reissue(&mut w, "search");
    w.deliver(
        3,
        0,
        &event(Eol::Lf, None, None, &[&progress_of("p-7", 2)]),
        None,
        CutAction::Reset,
    );
    w.auditor.finish();
    assert_eq!(
        count(&w, K::SentAfterCancel),
        1,
        "{:#?}",
        w.auditor.findings()
    );
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::SentAfterCancel)
        .expect("sent-after-cancel");
    assert_eq!(f.ids, vec!["7".to_owned()]);
    assert_eq!(f.class.as_str(), "server-bug");
    assert_eq!(f.stream.conn, 1, "the finding names the cancelled stream");
}

#[tokio::test(start_paused = true)]
async fn response_for_a_cancelled_id_on_another_stream_yields_sent_after_cancel_once() {
    let mut w = Wire::new();
    listen(&mut w);
    cut_call(&mut w, "search", false, 12);
    let late = event(Eol::Lf, None, None, &[&result("7", "late")]);
    w.deliver(3, 0, &(late.clone() + &late), None, CutAction::Reset);
    w.auditor.finish();
    assert_eq!(
        count(&w, K::SentAfterCancel),
        1,
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn own_messages_of_a_later_call_with_the_same_id_or_token_are_not_sent_after_cancel() {
    let mut w = Wire::new();
    list_tools(&mut w);
    cut_call(&mut w, "search", false, 12);
    // Another session-less client uses id 7 and token p-7 again: its own answers are fine.
    modern_post(&w, 4, &call("7", "search", "p-7"));
    w.sse_ok(4, 0);
    w.stream_clean(
        4,
        0,
        &(event(Eol::Lf, None, None, &[&progress_of("p-7", 1)])
            + &event(Eol::Lf, None, None, &[&result("7", "ok")])),
    );
    // A stream ended cleanly is not a cancellation.
    modern_post(&w, 5, &call("9", "search", "p-9"));
    w.sse_ok(5, 0);
    w.stream_clean(5, 0, &event(Eol::Lf, None, None, &[&progress_of("p-9", 1)]));
    listen(&mut w);
    w.deliver(
        3,
        0,
        &event(Eol::Lf, None, None, &[&progress_of("p-9", 2)]),
        None,
        CutAction::Reset,
    );
    w.auditor.finish();
    assert_eq!(
        count(&w, K::SentAfterCancel),
        0,
        "{:#?}",
        w.auditor.findings()
    );
}

/// Call `append` as id 7 on conn 1 (keyed `call-7`), answered with an `application/json` body
/// that is cut after `body_bytes` bytes of it.
fn cut_json_call(w: &mut Wire, body_bytes: u64) {
    w.post_keyed(1, 0, None, V, "call-7", &call("7", "append", "p-7"));
    w.response(1, 0, 200, "application/json", None);
    w.rec(Observation::Cut {
        conn: 1,
        direction: Direction::Downstream,
        action: CutAction::Reset,
        point: CutPoint {
            raw_offset: 200 + body_bytes,
            body_bytes: Some(body_bytes),
            request: Some("POST /mcp".into()),
            rpc_id: Some("7".into()),
            ..CutPoint::default()
        },
    });
    w.rec(Observation::ConnClosed { conn: 1 });
}

#[tokio::test(start_paused = true)]
async fn json_body_cut_after_some_of_its_bytes_and_reissued_yields_reexecuted() {
    let mut w = Wire::new();
    list_tools(&mut w);
    cut_json_call(&mut w, 30);
    reissue(&mut w, "append");
    w.auditor.finish();
    assert_eq!(count(&w, K::Reissued), 1, "{:#?}", w.auditor.findings());
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::Reexecuted)
        .expect("reexecuted");
    assert!(f.detail.contains("JSON response body"), "{}", f.detail);
}

#[tokio::test(start_paused = true)]
async fn json_body_cut_before_its_first_byte_and_reissued_yields_no_reexecuted() {
    let mut w = Wire::new();
    list_tools(&mut w);
    cut_json_call(&mut w, 0);
    reissue(&mut w, "append");
    w.auditor.finish();
    assert_eq!(count(&w, K::Reissued), 1, "{:#?}", w.auditor.findings());
    assert_eq!(count(&w, K::Reexecuted), 0, "{:#?}", w.auditor.findings());
}
