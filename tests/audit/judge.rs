//! The logical-stream judge from scripted observations: order and gaps across all legs (counter
//! ids and MCP progress values), priming events never owed, plain EventSource resumes linked by
//! URL, re-issues after renegotiation linked to the call they replace, the hung call reported
//! without waiting for shutdown, cross-session replays never called fresh streams, and the
//! stale-cursor client. Each scenario has its twin where the finding must not appear.

use crate::common::audit::{Eol, Wire, call_with_token, event, progress, progress_of, result};
use std::time::Duration;
use tearline::audit::{AuditConfig, FindingClass, FindingKind as K};
use tearline::vocab::CutAction;
use tearline::wire::Observation;

const S: Option<&str> = Some("s-1");
const OPAQUE: [&str; 6] = [
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000000_a",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000001_b",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000002_c",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000003_d",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000004_e",
    "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000005_f",
];

fn msg(eol: Eol, id: &str, data: &str) -> String {
    event(eol, Some(id), Some("message"), &[data])
}

/// POST tools/call 7 on conn 1; delivers `before`, then cuts `torn` inside `event: mess`,
/// before its `id:` line (nothing is owed). Returns the wire.
fn cut_before_id(eol: Eol, before: &[(&str, String)], torn: (&str, String)) -> Wire {
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let pre: String = before.iter().map(|(id, d)| msg(eol, id, d)).collect();
    let t = msg(eol, torn.0, &torn.1);
    let cut = pre.len() + 11;
    w.deliver(1, 0, &(pre + &t), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, before.last().map_or("", |b| b.0));
    w.sse_ok(2, 0);
    w
}

fn replay(w: &mut Wire, eol: Eol, events: &[(&str, String)]) {
    let body: String = events.iter().map(|(id, d)| msg(eol, id, d)).collect();
    w.stream_clean(2, 0, &body);
    w.auditor.finish();
}

#[tokio::test(start_paused = true)]
async fn counter_ids_replayed_out_of_order_after_a_cut_before_the_id_line_are_a_reorder() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let before = [("1", progress_of("t", 1)), ("2", progress_of("t", 2))];
        let mut w = cut_before_id(eol, &before, ("3", progress_of("t", 3)));
        let swapped = [
            ("4", progress_of("t", 4)),
            ("3", progress_of("t", 3)),
            ("5", result("7", "ok")),
        ];
        replay(&mut w, eol, &swapped);
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::ReplayReorder],
            "{:#?}",
            w.auditor.findings()
        );
        let f = &w.auditor.findings()[1];
        assert_eq!(f.class, FindingClass::Order);
        assert_eq!(f.ids, vec!["3".to_string(), "4".to_string()]);

        let mut w = cut_before_id(eol, &before, ("3", progress_of("t", 3)));
        let in_order = [
            ("3", progress_of("t", 3)),
            ("4", progress_of("t", 4)),
            ("5", result("7", "ok")),
        ];
        replay(&mut w, eol, &in_order);
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::ReplayExact],
            "{:#?}",
            w.auditor.findings()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn opaque_ids_out_of_order_are_a_reorder_by_progress_values() {
    let eol = Eol::CrLf;
    let before = [
        (OPAQUE[0], progress_of("t", 1)),
        (OPAQUE[1], progress_of("t", 2)),
    ];
    let mut w = cut_before_id(eol, &before, (OPAQUE[2], progress_of("t", 3)));
    let swapped = [
        (OPAQUE[3], progress_of("t", 4)),
        (OPAQUE[2], progress_of("t", 3)),
        (OPAQUE[4], result("7", "ok")),
    ];
    replay(&mut w, eol, &swapped);
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayReorder],
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn counter_ids_skipped_between_replay_and_live_are_a_certain_replay_gap() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let before = [("1", progress_of("t", 1)), ("2", progress_of("t", 2))];
        let mut w = cut_before_id(eol, &before, ("3", progress_of("t", 3)));
        let dropped = [
            ("3", progress_of("t", 3)),
            ("6", progress_of("t", 6)),
            ("7", result("7", "ok")),
        ];
        replay(&mut w, eol, &dropped);
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::ReplayGap],
            "{:#?}",
            w.auditor.findings()
        );
        let f = &w.auditor.findings()[1];
        assert_eq!(f.ids, vec!["4".to_string(), "5".to_string()]);
        assert_eq!(f.class, FindingClass::Loss);
        assert!(!f.detail.contains("suspected"), "{}", f.detail);
    }
}

#[tokio::test(start_paused = true)]
async fn opaque_ids_progress_jump_after_constant_steps_is_a_suspected_replay_gap() {
    let eol = Eol::Lf;
    let before = [
        (OPAQUE[0], progress_of("t", 1)),
        (OPAQUE[1], progress_of("t", 2)),
    ];
    let mut w = cut_before_id(eol, &before, (OPAQUE[2], progress_of("t", 3)));
    let dropped = [
        (OPAQUE[2], progress_of("t", 3)),
        (OPAQUE[5], progress_of("t", 6)),
        (
            "0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01_1732938000009_z",
            result("7", "ok"),
        ),
    ];
    replay(&mut w, eol, &dropped);
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayGap],
        "{:#?}",
        w.auditor.findings()
    );
    assert!(w.auditor.findings()[1].detail.contains("suspected"));

    let mut w = cut_before_id(eol, &before, (OPAQUE[2], progress_of("t", 3)));
    let whole = [
        (OPAQUE[2], progress_of("t", 3)),
        (OPAQUE[3], progress_of("t", 4)),
        (OPAQUE[4], result("7", "ok")),
    ];
    replay(&mut w, eol, &whole);
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::ReplayExact],
        "{:#?}",
        w.auditor.findings()
    );
}

/// A resume leg opens with a priming event (id, empty data) and is cut right after it; the
/// client resumes from its older cursor. The priming event is never owed: no `replay-gap`.
#[tokio::test(start_paused = true)]
async fn priming_event_after_the_cursor_is_never_owed() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let pre = msg(eol, "p-1", &progress_of("t", 1)) + &msg(eol, "p-2", &progress_of("t", 2));
    let torn = msg(eol, "p-3", &result("7", "ok"));
    let cut = pre.len() + torn.len() - 4;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, "p-2");
    w.sse_ok(2, 0);
    let priming = event(eol, Some("q-0"), None, &[""]);
    w.deliver(2, 0, &priming, Some(priming.len()), CutAction::Fin);
    w.resume(3, 0, S, "p-2");
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &torn);
    w.auditor.finish();
    let kinds = w.kinds();
    assert!(
        !kinds.contains(&K::ReplayGap),
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(
        kinds,
        vec![K::TornCut, K::CursorBehind],
        "{:#?}",
        w.auditor.findings()
    );
}

/// Plain EventSource: no session, a resume is a GET of the same URL with `Last-Event-ID`; a
/// 404 `favicon.ico` shares the connection; another URL's stream uses the same ids.
#[tokio::test(start_paused = true)]
async fn plain_eventsource_resume_links_by_url_and_a_404_side_request_is_no_stream() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = Wire::new();
        let e = |id: &str| event(eol, Some(id), None, &[&format!("tick {id}")]);
        w.get_url(1, 0, "/events", None);
        w.sse_ok(1, 0);
        let body = e("1") + &e("2") + &e("3");
        let cut = e("1").len() + e("2").len() + 9;
        w.deliver(1, 0, &body, Some(cut), CutAction::Fin);
        w.get_url(3, 0, "/other", None);
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &(e("1") + &e("2") + &e("3")));
        w.get_url(2, 0, "/favicon.ico", None);
        w.response(2, 0, 404, "text/html", None);
        w.rec(Observation::ResponseBody {
            conn: 2,
            seq: 0,
            body: Some(bytes::Bytes::from_static(b"not found")),
        });
        w.get_url(2, 1, "/events", Some("2"));
        w.sse_ok(2, 1);
        w.stream_clean(2, 1, &(e("3") + &e("4")));
        w.auditor.finish();
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::ReplayExact],
            "{:#?}",
            w.auditor.findings()
        );
    }
}

/// Plain EventSource on URLs with query values (`/events?stream=a`, `?stream=b`, as recorded:
/// `?stream=…`): a resume of `?stream=a` continues that stream (its query values, not only
/// its parameter names, are compared), and a resume of a URL no stream was opened with is
/// not taken for one of them.
#[tokio::test(start_paused = true)]
async fn plain_eventsource_resume_links_by_the_whole_url_with_its_query_values() {
    for (resume_url, want) in [
        ("/events?stream=a&n=6", vec![K::TornCut, K::ReplayExact]),
        ("/events?stream=c&n=6", vec![K::TornCut, K::Unknown]),
    ] {
        let mut w = Wire::new();
        let e = |id: &str| event(Eol::Lf, Some(id), None, &[&format!("tick {id}")]);
        w.get_url(1, 0, "/events?stream=a&n=6", None);
        w.sse_ok(1, 0);
        let body = e("1") + &e("2") + &e("3");
        let cut = e("1").len() + e("2").len() + 9;
        w.deliver(1, 0, &body, Some(cut), CutAction::Fin);
        w.get_url(3, 0, "/events?stream=b&n=6", None);
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &(e("1") + &e("2") + &e("3")));
        w.get_url(2, 0, resume_url, Some("2"));
        w.sse_ok(2, 0);
        w.stream_clean(2, 0, &(e("3") + &e("4")));
        w.auditor.finish();
        assert_eq!(
            w.kinds(),
            want,
            "resume of {resume_url}: {:#?}",
            w.auditor.findings()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn plain_eventsource_reopened_without_cursor_is_cursor_missing() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    let e = |id: &str| event(eol, Some(id), None, &[&format!("tick {id}")]);
    w.get_url(1, 0, "/events", None);
    w.sse_ok(1, 0);
    let body = e("1") + &e("2");
    w.deliver(1, 0, &body, Some(body.len()), CutAction::Fin);
    w.get_url(2, 0, "/favicon.ico", None);
    w.response(2, 0, 404, "text/html", None);
    w.get_url(2, 1, "/events", None);
    w.sse_ok(2, 1);
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::CursorMissing],
        "{:#?}",
        w.auditor.findings()
    );
}

/// The strict client's recovery: the resume is answered with a fresh stream that ends without
/// the result; the client renegotiates a session and re-issues the call (same tool and
/// arguments, a new progress token).
fn lost_after_fresh_resume(eol: Eol) -> Wire {
    lost_after_fresh_resume_keyed(eol, None)
}

/// [`lost_after_fresh_resume`], the call's POST carrying `Idempotency-Key: key` if given.
fn lost_after_fresh_resume_keyed(eol: Eol, key: Option<&str>) -> Wire {
    let mut w = Wire::new();
    let first = call_with_token("2", "blob", "tA");
    match key {
        Some(k) => w.post_keyed(1, 0, Some("A"), None, k, &first),
        None => w.post(1, 0, Some("A"), &first),
    }
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
async fn reissue_in_a_new_session_replaces_the_lost_call_and_states_the_link() {
    for eol in [Eol::Lf, Eol::CrLf] {
        let mut w = lost_after_fresh_resume_keyed(eol, Some("call-2"));
        w.post_keyed(
            3,
            0,
            Some("B"),
            None,
            "call-2",
            &call_with_token("1", "blob", "tB"),
        );
        w.sse_ok(3, 0);
        w.stream_clean(3, 0, &msg(eol, "1-1", &result("1", "big")));
        w.auditor.finish();
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::FreshStream, K::Reissued],
            "{:#?}",
            w.auditor.findings()
        );
        let f = &w.auditor.findings()[2];
        assert_eq!(f.ids, vec!["2".to_string(), "1".to_string()]);
        assert!(f.detail.contains("new session B"), "{}", f.detail);
        assert_eq!(f.proof.as_deref(), Some("idempotency-key"));
        assert!(
            w.auditor
                .silent_loss()
                .starts_with("silent loss observed: no")
        );
    }
}

#[tokio::test(start_paused = true)]
async fn identical_first_call_of_a_new_session_without_a_key_is_no_reissue() {
    let eol = Eol::Lf;
    let mut w = lost_after_fresh_resume(eol);
    w.post(3, 0, Some("B"), &call_with_token("1", "blob", "tB"));
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &msg(eol, "1-1", &result("1", "big")));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::FreshStream, K::PendingCall],
        "{:#?}",
        w.auditor.findings()
    );
    let pending = &w.auditor.findings()[2];
    assert_eq!(pending.candidates.len(), 1, "{pending:#?}");
    assert_eq!(pending.candidates[0].session.as_deref(), Some("B"));
    assert!(
        pending.detail.contains("the wire cannot tell"),
        "{}",
        pending.detail
    );
}

#[tokio::test(start_paused = true)]
async fn next_call_in_the_same_session_is_no_reissue_and_the_lost_call_is_pending() {
    let eol = Eol::Lf;
    let mut w = lost_after_fresh_resume(eol);
    w.post(3, 0, Some("A"), &call_with_token("3", "blob", "tA3"));
    w.sse_ok(3, 0);
    w.stream_clean(3, 0, &msg(eol, "2-1", &result("3", "big")));
    w.auditor.finish();
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::FreshStream, K::PendingCall],
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(w.auditor.findings()[2].ids, vec!["2".to_string()]);
    assert_eq!(
        w.auditor.silent_loss(),
        "silent loss observed: yes (1 call affected)"
    );
}

/// The hung call: the resume replays what is owed, then the stream ends cleanly without the
/// result and nothing follows. `pending-call` appears in `findings()` (the API's `/findings`)
/// once `abandon_after` passed, without waiting for shutdown; before that the summary lists it
/// as awaiting judgement.
#[tokio::test(start_paused = true)]
async fn hung_call_is_pending_call_in_findings_and_summary_before_shutdown() {
    let eol = Eol::CrLf;
    let mut w = Wire::with(AuditConfig {
        abandon_after: Duration::from_secs(2),
        ..AuditConfig::default()
    });
    w.post(1, 0, S, &call_with_token("7", "search", "t"));
    w.sse_ok(1, 0);
    let pre = msg(eol, "1", &progress_of("t", 1));
    let torn = msg(eol, "2", &progress_of("t", 2));
    let cut = pre.len() + torn.len() - 3;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, S, "1");
    w.sse_ok(2, 0);
    w.stream_clean(2, 0, &torn);
    assert_eq!(w.kinds(), vec![K::TornCut], "{:#?}", w.auditor.findings());
    let early = w.auditor.summary();
    assert!(
        early.starts_with("silent loss observed: no (0 calls affected)\n"),
        "{early}"
    );
    assert!(
        early.contains("awaiting judgement") && early.contains("pending-call 7"),
        "{early}"
    );
    tokio::time::advance(Duration::from_secs(3)).await;
    assert_eq!(
        w.kinds(),
        vec![K::TornCut, K::PendingCall],
        "{:#?}",
        w.auditor.findings()
    );
    let late = w.auditor.summary();
    assert!(
        late.starts_with("silent loss observed: yes (1 call affected)\n"),
        "{late}"
    );
    assert!(
        late.contains("pending-call") && !late.contains("awaiting judgement"),
        "{late}"
    );
    w.auditor.finish();
    assert_eq!(w.kinds(), vec![K::TornCut, K::PendingCall]);
}

/// An event store shared by all sessions: the resume of session B replays session A's events
/// (A's ids) and A's content under new ids. That is `cross-stream`, never `fresh-stream`.
#[tokio::test(start_paused = true)]
async fn another_sessions_events_are_cross_stream_not_fresh_stream() {
    let eol = Eol::Lf;
    let mut w = Wire::new();
    w.post(1, 0, Some("A"), &call_with_token("1", "search", "t"));
    w.sse_ok(1, 0);
    let a = msg(eol, OPAQUE[0], &progress(1))
        + &msg(eol, OPAQUE[1], &progress(2))
        + &msg(eol, OPAQUE[2], &result("1", "a"));
    w.stream_clean(1, 0, &a);
    w.post(2, 0, Some("B"), &call_with_token("1", "search", "t"));
    w.sse_ok(2, 0);
    let b0 = "9e1d7c3b-0000-4c55-8f0e-1a2b3c4d5e01_1732938000100_q";
    let body = msg(eol, b0, &progress(1));
    w.deliver(2, 0, &body, Some(body.len()), CutAction::Reset);
    w.resume(3, 0, Some("B"), b0);
    w.sse_ok(3, 0);
    let replay = msg(eol, OPAQUE[1], &progress(2))
        + &msg(
            eol,
            "9e1d7c3b-0000-4c55-8f0e-1a2b3c4d5e01_1732938000101_r",
            &progress(1),
        )
        + &msg(eol, OPAQUE[2], &result("1", "a"));
    w.stream_clean(3, 0, &replay);
    w.auditor.finish();
    let kinds = w.kinds();
    assert!(
        kinds.contains(&K::CrossStream),
        "{:#?}",
        w.auditor.findings()
    );
    assert!(
        !kinds.contains(&K::FreshStream),
        "{:#?}",
        w.auditor.findings()
    );
    // Session A's response event reached session B's client too.
    let dup: Vec<_> = w
        .auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == K::DuplicateResponse)
        .collect();
    assert_eq!(dup.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(dup[0].ids, vec!["1".to_string(), OPAQUE[2].to_string()]);
    assert!(
        !kinds.contains(&K::ReplayGap),
        "{:#?}",
        w.auditor.findings()
    );
}

/// A client whose resume is cut resumes again with its original cursor: the server replays
/// correctly what the client already had. After a FIN (every byte readable) only the client is
/// wrong: `cursor-behind`. After a reset the client's kernel may have discarded what the cut
/// resume delivered, so the same cursor is the one a conformant client holds: the replay is
/// judged from it (`replay-exact`).
#[tokio::test(start_paused = true)]
async fn stale_cursor_after_a_cut_resume_is_cursor_behind_only() {
    for (eol, action) in [
        (Eol::Lf, CutAction::Fin),
        (Eol::CrLf, CutAction::Fin),
        (Eol::Lf, CutAction::Reset),
        (Eol::CrLf, CutAction::Reset),
    ] {
        let mut w = Wire::new();
        w.post(1, 0, S, &call_with_token("7", "search", "t"));
        w.sse_ok(1, 0);
        let e = |id: &str, n: u64| msg(eol, id, &progress_of("t", n));
        let pre = e("1", 1) + &e("2", 2);
        let cut = pre.len() + 20;
        w.deliver(1, 0, &(pre + &e("3", 3)), Some(cut), CutAction::Reset);
        w.resume(2, 0, S, "2");
        w.sse_ok(2, 0);
        let leg = e("3", 3) + &e("4", 4);
        let cut = leg.len() + 20;
        w.deliver(2, 0, &(leg + &e("5", 5)), Some(cut), action);
        w.resume(3, 0, S, "2");
        w.sse_ok(3, 0);
        let again = e("3", 3) + &e("4", 4) + &e("5", 5) + &msg(eol, "6", &result("7", "ok"));
        w.stream_clean(3, 0, &again);
        w.auditor.finish();
        let verdict = if action == CutAction::Fin {
            K::CursorBehind
        } else {
            K::ReplayExact
        };
        assert_eq!(
            w.kinds(),
            vec![K::TornCut, K::TornCut, verdict],
            "{:#?}",
            w.auditor.findings()
        );
    }
}
