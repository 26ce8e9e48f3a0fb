//! Every finding kind from a scripted observation sequence: each scenario yields exactly its
//! finding(s) and no false one; LF and CRLF servers, numeric and opaque ids.

use crate::common::audit::{Eol, Wire, call, event, progress, result};
use std::time::Duration;
use tearline::audit::{AuditConfig, FindingKind as K};
use tearline::vocab::CutAction;

const S: Option<&str> = Some("s-1");
const NUMERIC: [&str; 5] = ["1", "2", "3", "4", "5"];
const OPAQUE: [&str; 5] = [
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000000_a1",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000001_b2",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000002_c3",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000003_d4",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000004_e5",
];

/// An auditor for a client that reads every byte at once: no event is in a reset's unread
/// window (`rst_unread` 0), so a client that got events holds a cursor.
fn reads_everything() -> Wire {
    Wire::with(AuditConfig {
        rst_unread: Duration::ZERO,
        ..AuditConfig::default()
    })
}

/// POST tools/call id 7 on conn 1, answered with SSE.
fn open_call(w: &mut Wire) {
    w.post(1, 0, S, &call("7", "search"));
    w.sse_ok(1, 0);
}

fn ev(eol: Eol, id: &str, data: &str) -> String {
    event(eol, Some(id), None, &[data])
}

async fn clean_resume(eol: Eol, ids: [&str; 5]) {
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, ids[0], &progress(1)) + &ev(eol, ids[1], &progress(2));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, ids[1]);
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(ev(eol, ids[2], &progress(3)) + &ev(eol, ids[3], &result("7", "ok"))),
    );
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn clean_resume_at_boundary_yields_only_replay_exact() {
    clean_resume(Eol::Lf, NUMERIC).await;
    clean_resume(Eol::CrLf, NUMERIC).await;
    clean_resume(Eol::Lf, OPAQUE).await;
    clean_resume(Eol::CrLf, OPAQUE).await;
}

async fn torn_then_exact(eol: Eol, ids: [&str; 5]) {
    let mut w = Wire::new();
    open_call(&mut w);
    let pre = ev(eol, ids[0], &progress(1)) + &ev(eol, ids[1], &progress(2));
    let torn = ev(eol, ids[2], &progress(3));
    let cut = pre.len() + torn.find("data: ").unwrap_or(0) + 9;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, ids[1]);
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &(torn + &ev(eol, ids[3], &result("7", "ok"))));
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
    let f = &w.auditor.findings()[0];
    assert_eq!(f.cut.class_name(), Some("mid-value"));
    assert_eq!(f.cut.data_line, Some(1));
    assert_eq!(f.ids.first().map(String::as_str), Some(ids[2]));
}

#[tokio::test(start_paused = true)]
async fn torn_event_replayed_by_conformant_pair_yields_torn_cut_and_replay_exact() {
    torn_then_exact(Eol::Lf, NUMERIC).await;
    torn_then_exact(Eol::CrLf, NUMERIC).await;
    torn_then_exact(Eol::Lf, OPAQUE).await;
    torn_then_exact(Eol::CrLf, OPAQUE).await;
}

/// Seed 004: cut in data line 1 of 3 of event 42, resume with Last-Event-ID 42, the server
/// (ring buffer evicted) restarts its id counter on a fresh stream.
async fn seed_004(eol: Eol) {
    let mut w = Wire::new();
    open_call(&mut w);
    let mut pre = String::new();
    for i in 1..=41u64 {
        pre += &ev(eol, &i.to_string(), &progress(i));
    }
    let e42 = event(
        eol,
        Some("42"),
        None,
        &[
            r#"{"jsonrpc":"2.0","id":7,"#,
            r#""result":{"content":"#,
            r#"[]}}"#,
        ],
    );
    let cut = pre.len() + e42.find("data: ").unwrap_or(0) + 12;
    w.deliver(1, 0, &(pre + &e42), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, "42");
    w.sse_ok(2, 0);
    let fresh = event(eol, Some("1"), None, &[""]) + &ev(eol, "2", &result("7", "fresh"));
    w.stream_clean(2, 0, &fresh);
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::CursorAhead, K::FreshStream],
        "{:#?}",
        w.auditor.findings()
    );
    let f = w.auditor.findings();
    assert_eq!(f[0].cut.data_line, Some(1));
    assert_eq!(f[1].ids, vec!["42".to_string()]);
    assert_eq!(f[1].cut.torn_bytes, f[0].cut.torn_bytes);
}

#[tokio::test(start_paused = true)]
async fn seed_004_yields_torn_cut_cursor_ahead_fresh_stream() {
    seed_004(Eol::Lf).await;
    seed_004(Eol::CrLf).await;
}

/// Seed 000: the resume replays the `search` results, then ends cleanly with `event: end`
/// before the `fetch` result.
#[tokio::test(start_paused = true)]
async fn seed_000_yields_pending_call() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    let batch = format!("[{},{}]", call("1", "search"), call("2", "fetch"));
    w.post(1, 0, S, &batch);
    w.sse_ok(1, 0);
    let body = ev(eol, "40", &progress(40)) + &ev(eol, "41", &progress(41));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "41");
    w.sse_ok(2, 0);
    let mut replay = String::new();
    for i in 42..=46u64 {
        replay += &ev(eol, &i.to_string(), &progress(i));
    }
    replay += &ev(eol, "47", &result("1", "search hits"));
    replay += &event(eol, None, Some("end"), &["{}"]);
    w.stream_clean(2, 0, &replay);
    assert_eq!(w.kinds(), Vec::<K>::new(), "deferred until finish or grace");
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::PendingCall],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(w.auditor.findings()[0].ids, vec!["2".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn cursor_behind_yields_only_cursor_behind() {
    let eol = Eol::CrLf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body =
        ev(eol, "1", &progress(1)) + &ev(eol, "2", &progress(2)) + &ev(eol, "3", &progress(3));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Fin);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    let replay = ev(eol, "2", &progress(2))
        + &ev(eol, "3", &progress(3))
        + &ev(eol, "4", &result("7", "ok"));
    w.stream_clean(2, 0, &replay);
    assert_eq!(
        w.kinds(),
        vec![K::CursorBehind],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn reopened_get_without_cursor_yields_cursor_missing() {
    let eol = Eol::Lf;
    let mut w = reads_everything();
    w.request(1, 0, "GET", S, None, None, None);
    w.sse_ok(1, 0);
    let body = ev(eol, "g1", &progress(1)) + &ev(eol, "g2", &progress(2));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.request(2, 0, "GET", S, None, None, None);
    w.sse_ok(2, 0);
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::CursorMissing],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(
        w.auditor.findings()[0].ids.first().map(String::as_str),
        Some("g2")
    );
}

#[tokio::test(start_paused = true)]
async fn reissued_post_without_resume_yields_cursor_missing() {
    let eol = Eol::Lf;
    let mut w = reads_everything();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.post(2, 0, S, &call("8", "search"));
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, "9", &result("8", "ok")));
    w.auditor.finish();
    // Call 8 repeats call 7 without proof: the wire cannot tell, 8 is named as a candidate.
    assert_eq!(
        w.kinds(),
        vec![K::CursorMissing, K::UnprovenResend],
        "{:#?}",
        w.auditor.findings()
    );
    let lost = &w.auditor.findings()[1];
    assert_eq!(lost.ids, vec!["7".to_string()]);
    assert_eq!(lost.candidates.len(), 1);
    assert_eq!(lost.candidates[0].id, "8");
    assert!(
        lost.detail.contains("the wire cannot tell"),
        "{}",
        lost.detail
    );
}

#[tokio::test(start_paused = true)]
async fn reissue_followed_by_resume_is_no_cursor_missing() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    // Another call with the same params, then the real resume of the cut stream.
    w.post(2, 0, S, &call("8", "search"));
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, "2", &result("8", "ok")));
    w.resume(3, 0, S, "1");
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &ev(eol, "3", &result("7", "ok")));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn torn_event_missing_from_replay_yields_replay_gap() {
    let eol = Eol::CrLf;
    let mut w = Wire::new();
    open_call(&mut w);
    let pre = ev(eol, "1", &progress(1)) + &ev(eol, "2", &progress(2));
    let torn = ev(eol, "3", &progress(3));
    let cut = pre.len() + torn.len() - 2;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, "4", &result("7", "ok")));
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayGap],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(
        w.auditor.findings()[0].cut.class_name(),
        Some("before-dispatch")
    );
    assert_eq!(w.auditor.findings()[1].ids, vec!["3".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn delivered_event_sent_again_yields_replay_duplicate() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1)) + &ev(eol, "2", &progress(2));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(ev(eol, "2", &progress(2)) + &ev(eol, "3", &result("7", "ok"))),
    );
    assert_eq!(
        w.kinds(),
        vec![K::ReplayDuplicate],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn newer_event_before_torn_one_yields_replay_reorder() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let pre = ev(eol, "1", &progress(1));
    let torn = ev(eol, "2", &progress(2));
    let cut = pre.len() + torn.find("data").unwrap_or(0) + 2;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    let replay = ev(eol, "3", &progress(3)) + &torn + &ev(eol, "4", &result("7", "ok"));
    w.stream_clean(2, 0, &replay);
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayReorder],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(w.auditor.findings()[0].cut.class_name(), Some("field-name"));
}

#[tokio::test(start_paused = true)]
async fn earlier_content_under_new_ids_yields_fresh_stream() {
    let eol = Eol::CrLf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, OPAQUE[0], &progress(1)) + &ev(eol, OPAQUE[1], &progress(2));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, OPAQUE[1]);
    w.sse_ok(2, 0);
    let replay = ev(eol, "n-1", &progress(1))
        + &ev(eol, "n-2", &progress(2))
        + &ev(eol, "n-3", &result("7", "ok"));
    w.stream_clean(2, 0, &replay);
    assert_eq!(
        w.kinds(),
        vec![K::FreshStream],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn new_priming_event_without_owed_events_yields_fresh_stream() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "a-1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "a-1");
    w.sse_ok(2, 0);
    let replay = event(eol, Some("b-0"), None, &[""]) + &ev(eol, "b-1", &result("7", "ok"));
    w.stream_clean(2, 0, &replay);
    assert_eq!(
        w.kinds(),
        vec![K::FreshStream],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn non_200_resume_yields_explicit_loss() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.response(2, 0, 404, "application/json", None);
    w.auditor.finish();
    // The server said the stream is gone; the call was never re-sent: it is lost.
    assert_eq!(
        w.kinds(),
        vec![K::ExplicitLoss, K::Abandoned],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn error_event_on_replay_yields_explicit_loss() {
    let eol = Eol::CrLf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &event(
            eol,
            None,
            Some("error"),
            &[r#"{"code":"resumption-failed"}"#],
        ),
    );
    assert_eq!(
        w.kinds(),
        vec![K::ExplicitLoss],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn empty_200_replay_with_call_unanswered_yields_silent_empty() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.end(2, 0, true);
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::SilentEmpty],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn events_of_another_stream_yield_cross_stream() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    w.post(3, 0, S, &call("9", "fetch"));
    w.sse_ok(3, 0);
    w.deliver(
        3,
        0,
        &(ev(eol, "b-1", &progress(10)) + &ev(eol, "b-2", &progress(11))),
        None,
        CutAction::Reset,
    );
    let body = ev(eol, "a-1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "a-1");
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(ev(eol, "b-2", &progress(11)) + &ev(eol, "a-2", &result("7", "ok"))),
    );
    assert_eq!(
        w.kinds(),
        vec![K::CrossStream],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn opaque_ids_of_another_session_yield_cross_stream() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    w.post(3, 0, Some("s-2"), &call("9", "fetch"));
    w.sse_ok(3, 0);
    w.deliver(
        3,
        0,
        &ev(eol, OPAQUE[4], &progress(10)),
        None,
        CutAction::Reset,
    );
    open_call(&mut w);
    let body = ev(eol, OPAQUE[0], &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, OPAQUE[0]);
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(ev(eol, OPAQUE[4], &progress(10)) + &ev(eol, OPAQUE[1], &result("7", "ok"))),
    );
    assert_eq!(
        w.kinds(),
        vec![K::CrossStream],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn clean_end_without_result_yields_pending_call() {
    let mut w = Wire::new();
    open_call(&mut w);
    w.stream_clean(1, 0, &ev(Eol::Lf, "1", &progress(1)));
    w.rec(tearline::wire::Observation::ConnClosed { conn: 1 });
    // Reported once the stream is forgotten (grace), without waiting for finish.
    tokio::time::advance(AuditConfig::default().grace + Duration::from_secs(1)).await;
    assert_eq!(w.auditor.tracked_streams(), 0);
    assert_eq!(
        w.kinds(),
        vec![K::PendingCall],
        "{:#?}",
        w.auditor.findings()
    );
    w.auditor.finish();
    assert_eq!(w.kinds(), vec![K::PendingCall]);
}

/// 2025-11-25 polling: the server ends the response without ending the stream; the client
/// resumes and gets the result. No `pending-call`.
#[tokio::test(start_paused = true)]
async fn clean_end_followed_by_resume_is_no_pending_call() {
    let mut w = Wire::new();
    open_call(&mut w);
    w.stream_clean(1, 0, &ev(Eol::Lf, "1", &progress(1)));
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(Eol::Lf, "2", &result("7", "ok")));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn response_resent_for_a_cursor_behind_is_no_duplicate_response() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1)) + &ev(eol, "2", &result("7", "ok"));
    // A FIN proves the client could read both events: a cursor behind them is its bug.
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Fin);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, "2", &result("7", "ok")));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::CursorBehind],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn cursor_inside_the_unread_window_of_a_reset_is_judged_from_that_cursor() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1)) + &ev(eol, "2", &result("7", "ok"));
    // A reset: the client's kernel may have discarded event 2 before the client read it.
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, "2", &result("7", "ok")));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn cursor_behind_the_reset_legs_own_cursor_is_still_cursor_behind() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let first = ev(eol, "1", &progress(1)) + &ev(eol, "2", &progress(2));
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Fin);
    // The client resumes from 2 (it read 1 and 2), gets 3, and the resume is reset.
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    let third = ev(eol, "3", &progress(3));
    w.deliver(2, 0, &third, Some(third.len()), CutAction::Reset);
    // Resuming from 1 goes behind what the client proved it read (its own cursor 2).
    w.resume(3, 0, S, "1");
    w.sse_ok(3, 0);
    w.stream_clean(
        3,
        0,
        &(ev(eol, "2", &progress(2))
            + &ev(eol, "3", &progress(3))
            + &ev(eol, "4", &result("7", "ok"))),
    );
    w.auditor.finish();
    assert!(
        w.kinds().contains(&K::CursorBehind),
        "{:#?}",
        w.auditor.findings()
    );
    // From its own cursor it is not behind.
    let mut w = Wire::new();
    open_call(&mut w);
    w.deliver(1, 0, &first, Some(first.len()), CutAction::Fin);
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    w.deliver(2, 0, &third, Some(third.len()), CutAction::Reset);
    w.resume(3, 0, S, "2");
    w.sse_ok(3, 0);
    w.stream_clean(
        3,
        0,
        &(ev(eol, "3", &progress(3)) + &ev(eol, "4", &result("7", "ok"))),
    );
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn proxy_clean_end_cut_is_no_pending_call() {
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(Eol::Lf, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::CleanEnd);
    w.end(1, 0, true);
    w.auditor.finish();
    // The proxy's clean end is a cut, not the server's: the unresumed call is `abandoned`.
    assert_eq!(w.kinds(), vec![K::Abandoned], "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn second_response_for_one_id_yields_duplicate_response() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    w.stream_clean(
        1,
        0,
        &(ev(eol, "1", &result("7", "one")) + &ev(eol, "2", &result("7", "two"))),
    );
    assert_eq!(
        w.kinds(),
        vec![K::DuplicateResponse],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn json_body_response_matches_its_call() {
    let mut w = Wire::new();
    w.post(1, 0, S, &call("7", "search"));
    w.response(1, 0, 200, "application/json", None);
    w.rec(tearline::wire::Observation::ResponseBody {
        conn: 1,
        seq: 0,
        body: Some(bytes::Bytes::from(result("7", "ok"))),
    });
    w.auditor.finish();
    assert_eq!(w.kinds(), Vec::<K>::new());
    assert_eq!(w.auditor.histograms()["final-response"].len(), 1);
}

/// A 2026-07-28 stream (no ids, no sessions) cut mid-event.
fn stateless_cut(w: &mut Wire) {
    w.request(
        1,
        0,
        "POST",
        None,
        None,
        Some("2026-07-28"),
        Some(&call("7", "search")),
    );
    w.sse_ok(1, 0);
    let body =
        event(Eol::Lf, None, None, &[&progress(1)]) + &event(Eol::Lf, None, None, &[&progress(2)]);
    w.deliver(1, 0, &body, Some(body.len() - 3), CutAction::Reset);
}

/// Sends call `id` (`search`, as the cut one) again on `conn`, answered; with `key`, carrying
/// `Idempotency-Key`.
fn stateless_again(w: &mut Wire, conn: u64, id: &str, key: Option<&str>) {
    let body = call(id, "search");
    match key {
        Some(k) => w.post_keyed(conn, 0, None, Some("2026-07-28"), k, &body),
        None => w.request(conn, 0, "POST", None, None, Some("2026-07-28"), Some(&body)),
    }
    w.sse_ok(conn, 0);
    w.stream_clean(conn, 0, &event(Eol::Lf, None, None, &[&result(id, "ok")]));
}

#[tokio::test(start_paused = true)]
async fn stateless_identical_call_without_proof_yields_unproven_resend_counted_apart_from_loss() {
    let mut w = Wire::new();
    stateless_cut(&mut w);
    stateless_again(&mut w, 2, "8", None);
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::UnprovenResend],
        "{:#?}",
        w.auditor.findings()
    );
    let f = &w.auditor.findings()[1];
    assert_eq!(f.ids, vec!["7".to_string()]);
    assert_eq!(f.class.as_str(), "ambiguous");
    assert_eq!(f.candidates.len(), 1, "{f:#?}");
    assert_eq!(f.candidates[0].id, "8");
    assert_eq!(f.candidates[0].conn, 2);
    assert!(f.detail.contains("the wire cannot tell"), "{}", f.detail);
    assert!(f.detail.contains("Idempotency-Key header"), "{}", f.detail);
    // Progress reached the client before the cut: the tool may have run twice.
    assert!(f.detail.contains("may have run twice"), "{}", f.detail);
    assert!(f.visible_start.is_some(), "{f:#?}");
    assert!(
        w.auditor
            .silent_loss()
            .starts_with("silent loss observed: no (0 calls affected)"),
        "{}",
        w.auditor.silent_loss()
    );
    let summary = w.auditor.summary();
    assert!(summary.contains("unproven re-sends"), "{summary}");
}

#[tokio::test(start_paused = true)]
async fn stateless_call_with_other_params_after_a_cut_leaves_the_cut_call_abandoned() {
    let mut w = Wire::new();
    stateless_cut(&mut w);
    // Another tool: other params, no identical call.
    let other = call("8", "fetch");
    w.request(2, 0, "POST", None, None, Some("2026-07-28"), Some(&other));
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &event(Eol::Lf, None, None, &[&result("8", "ok")]));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::Abandoned],
        "{:#?}",
        w.auditor.findings()
    );
    let f = &w.auditor.findings()[1];
    assert_eq!(f.class.as_str(), "loss");
    assert!(f.candidates.is_empty(), "{f:#?}");
    assert!(!f.detail.contains("the wire cannot tell"), "{}", f.detail);
    assert!(
        w.auditor
            .silent_loss()
            .starts_with("silent loss observed: yes (1 call affected)"),
        "{}",
        w.auditor.silent_loss()
    );
    assert!(!w.auditor.summary().contains("unproven re-sends"));
}

#[tokio::test(start_paused = true)]
async fn stateless_call_sent_again_with_the_same_idempotency_key_yields_reissued() {
    let mut w = Wire::new();
    w.post_keyed(1, 0, None, Some("2026-07-28"), "k-1", &call("7", "search"));
    w.sse_ok(1, 0);
    let body =
        event(Eol::Lf, None, None, &[&progress(1)]) + &event(Eol::Lf, None, None, &[&progress(2)]);
    w.deliver(1, 0, &body, Some(body.len() - 3), CutAction::Reset);
    stateless_again(&mut w, 2, "8", Some("k-1"));
    w.auditor.finish();
    // No tools/list was seen: whether `search` may be repeated is unknown.
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::Reissued, K::Unknown],
        "{:#?}",
        w.auditor.findings()
    );
    let f = &w.auditor.findings()[1];
    assert_eq!(f.ids, vec!["7".to_string(), "8".to_string()]);
    assert_eq!(f.proof.as_deref(), Some("idempotency-key"));
    // Another key proves nothing.
    let mut w = Wire::new();
    w.post_keyed(1, 0, None, Some("2026-07-28"), "k-1", &call("7", "search"));
    w.sse_ok(1, 0);
    w.deliver(1, 0, &body, Some(body.len() - 3), CutAction::Reset);
    stateless_again(&mut w, 2, "8", Some("k-2"));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::UnprovenResend],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn stateless_call_sent_again_with_its_own_id_yields_reissued_by_same_id() {
    let mut w = Wire::new();
    stateless_cut(&mut w);
    stateless_again(&mut w, 2, "7", None);
    w.auditor.finish();
    let kinds = w.kinds();
    assert!(kinds.contains(&K::Reissued), "{:#?}", w.auditor.findings());
    assert!(
        !kinds.contains(&K::Abandoned),
        "{:#?}",
        w.auditor.findings()
    );
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::Reissued)
        .expect("reissued");
    assert_eq!(f.proof.as_deref(), Some("same-id"));
}

#[tokio::test(start_paused = true)]
async fn session_less_ids_seen_shared_prove_no_re_send() {
    let mut w = Wire::new();
    // Two clients have id 7 in flight at once: ids are shared.
    w.request(
        5,
        0,
        "POST",
        None,
        None,
        Some("2026-07-28"),
        Some(&call("7", "list-things")),
    );
    w.sse_ok(5, 0);
    stateless_cut(&mut w);
    w.stream_clean(5, 0, &event(Eol::Lf, None, None, &[&result("7", "ok")]));
    stateless_again(&mut w, 2, "7", None);
    w.auditor.finish();
    let f = w
        .auditor
        .findings()
        .into_iter()
        .find(|f| f.kind == K::UnprovenResend)
        .expect("unproven-resend: the same id proves nothing once ids are shared");
    assert!(f.detail.contains("share JSON-RPC ids"), "{}", f.detail);
    assert!(
        !w.kinds().contains(&K::Reissued),
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn stateless_call_never_reissued_yields_abandoned() {
    let cfg = AuditConfig {
        abandon_after: Duration::from_secs(5),
        ..AuditConfig::default()
    };
    let mut w = Wire::with(cfg);
    stateless_cut(&mut w);
    tokio::time::advance(Duration::from_secs(6)).await;
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::Abandoned],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn stateless_cancelled_call_is_not_abandoned_and_early_finish_is_abandoned() {
    let mut w = Wire::new();
    stateless_cut(&mut w);
    tokio::time::advance(Duration::from_millis(1500)).await;
    w.auditor.finish();
    assert_eq!(w.kinds(), vec![K::TornCut, K::Abandoned]);
    let f = &w.auditor.findings()[1];
    assert_eq!(f.waited_ms, Some(1500), "{f:#?}");
    assert!(f.detail.contains("the run ended"), "{}", f.detail);
    let mut w = Wire::new();
    stateless_cut(&mut w);
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
    w.request(2, 0, "POST", None, None, Some("2026-07-28"), Some(cancel));
    tokio::time::advance(Duration::from_secs(120)).await;
    w.auditor.finish();
    assert_eq!(w.kinds(), vec![K::TornCut]);
}

#[tokio::test(start_paused = true)]
async fn resume_with_never_seen_id_yields_unknown() {
    let mut w = Wire::new();
    w.resume(2, 0, S, "99");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(Eol::Lf, "100", &progress(1)));
    assert_eq!(w.kinds(), vec![K::Unknown], "{:#?}", w.auditor.findings());
    assert!(w.auditor.findings()[0].detail.contains("never delivered"));
}

#[tokio::test(start_paused = true)]
async fn cuts_that_tear_nothing_yield_no_torn_cut() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = Wire::new();
        open_call(&mut w);
        let body = ev(eol, "1", &progress(1)) + &ev(eol, "2", &progress(2));
        // At the boundary after event 1.
        w.deliver(
            1,
            0,
            &body,
            Some(ev(eol, "1", &progress(1)).len()),
            CutAction::Reset,
        );
        assert_eq!(w.kinds(), Vec::<K>::new());
    }
    // Between CR and LF of the blank line: event 2 is dispatched, nothing torn, cursor is 2.
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(Eol::CrLf, "1", &progress(1)) + &ev(Eol::CrLf, "2", &progress(2));
    w.deliver(1, 0, &body, Some(body.len() - 1), CutAction::Reset);
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(Eol::CrLf, "3", &result("7", "ok")));
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn cursor_named_after_id_line_only_is_cursor_ahead() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let pre = ev(eol, "1", &progress(1));
    let torn = ev(eol, "2", &progress(2));
    let cut = pre.len() + "id: 2\n".len();
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Fin);
    w.resume(2, 0, S, "2");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, "3", &result("7", "ok")));
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::CursorAhead],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(w.auditor.findings()[0].cut.class_name(), Some("after-id"));
}

#[tokio::test(start_paused = true)]
async fn cut_during_replay_is_judged_by_the_next_resume() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    open_call(&mut w);
    let body = ev(eol, "1", &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    let replay = ev(eol, "2", &progress(2)) + &ev(eol, "3", &progress(3));
    let cut = ev(eol, "2", &progress(2)).len() + 4;
    w.deliver(2, 0, &replay, Some(cut), CutAction::Reset);
    w.resume(3, 0, S, "2");
    w.sse_ok(3, 0);
    w.stream_clean(
        3,
        0,
        &(ev(eol, "3", &progress(3)) + &ev(eol, "4", &result("7", "ok"))),
    );
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn sessionless_streams_resume_through_the_anonymous_session() {
    let eol = Eol::CrLf;
    let mut w = Wire::new();
    w.post(1, 0, None, &call("7", "search"));
    w.sse_ok(1, 0);
    let body = ev(eol, OPAQUE[0], &progress(1));
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(2, 0, None, OPAQUE[0]);
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &ev(eol, OPAQUE[1], &result("7", "ok")));
    assert_eq!(
        w.kinds(),
        vec![K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

/// The wire releases a request head late (or never, when the connection is cut first):
/// observations are held until their request, and a cut opens a POST from its own facts.
#[tokio::test(start_paused = true)]
async fn observations_before_their_request_are_put_in_order() {
    use tearline::vocab::Direction;
    use tearline::wire::{CutPoint, Observation, SseClass};
    let eol = Eol::Lf;
    let mut w = Wire::new();
    // The POST's request never reaches the auditor; only the cut record names it.
    w.sse_ok(1, 0);
    let body = ev(eol, "41", &progress(41));
    w.deliver(1, 0, &body, None, CutAction::Reset);
    w.end(1, 0, false);
    w.rec(Observation::Cut {
        conn: 1,
        direction: Direction::Downstream,
        action: CutAction::Reset,
        point: CutPoint {
            class: Some(SseClass::MidValue),
            raw_offset: 300,
            pending_id: Some("42".into()),
            last_committed_id: Some("41".into()),
            torn_bytes: 20,
            data_line: Some(1),
            request: Some("POST /mcp".into()),
            session: Some("s-1".into()),
            rpc_id: Some("7".into()),
            exchange: Some(0),
            ..CutPoint::default()
        },
    });
    w.rec(Observation::ConnClosed { conn: 1 });
    // The resume's request arrives after its response and events.
    w.sse_ok(2, 0);
    w.stream_clean(
        2,
        0,
        &(ev(eol, "42", &progress(42)) + &ev(eol, "43", &result("7", "ok"))),
    );
    w.resume(2, 0, S, "41");
    w.rec(Observation::ConnClosed { conn: 2 });
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::Unknown, K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(
        w.auditor.findings()[0].stream.rpc_ids,
        vec!["7".to_string()]
    );
    assert_eq!(w.auditor.histograms()["server-replay"].len(), 0);
}

#[tokio::test(start_paused = true)]
async fn observations_whose_request_never_comes_are_unknown() {
    let mut w = Wire::new();
    w.sse_ok(5, 0);
    w.stream_clean(5, 0, &ev(Eol::Lf, "1", &progress(1)));
    w.rec(tearline::wire::Observation::ConnClosed { conn: 5 });
    assert_eq!(w.kinds(), vec![K::Unknown], "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn a_finding_names_query_parameters_but_never_their_values() {
    let secret = "tok-PLANTED-0123456789abcdef";
    let mut w = Wire::new();
    w.get_url(1, 0, &format!("/events?token={secret}&v=2"), None);
    w.sse_ok(1, 0);
    let body = ev(Eol::Lf, "1", &progress(1)) + &ev(Eol::Lf, "2", &progress(2));
    w.deliver(1, 0, &body, Some(body.len() - 4), CutAction::Reset);
    let all = w.auditor.findings();
    let torn = all
        .iter()
        .find(|f| f.kind == K::TornCut)
        .expect("a torn cut");
    assert_eq!(torn.stream.request, "GET /events?token=…&v=…");
    let json = serde_json::to_string(&all).expect("serializes");
    assert!(!json.contains(secret), "{json}");
}
