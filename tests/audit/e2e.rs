//! End to end: a scripted raw-byte server and client over real loopback sockets, through the
//! proxy with the HTTP/1.1 wire observer and the auditor as its sink. Each scenario cuts the
//! first response at an exact byte offset and checks the findings are exactly the expected ones.

use crate::common::audit::e2e::*;
use tearline::audit::FindingKind as K;
use tearline::vocab::CutAction;

#[tokio::test]
async fn e2e_clean_resume_across_chunk_boundaries_yields_only_replay_exact() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .end();
        // Cut right after event 2's blank line: a boundary.
        let cut = first.offset_of("id: 3", 0, 0) - 2 - "\r\n".len() as u64;
        let e3 = ev(lf, Some("3"), None, &[&progress(3)]);
        let (a, b) = e3.split_at(9);
        let replay = Script::sse("")
            .chunk(a)
            .chunk(b)
            .chunk(&ev(lf, Some("4"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "2"),
            ],
        )
        .await;
        assert_eq!(kinds, vec![K::ReplayExact], "{:#?}", tap.auditor.findings());
        assert_eq!(tap.auditor.histograms()["server-replay"].len(), 1);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_seed_004_yields_torn_cut_cursor_ahead_fresh_stream() {
    within(async {
        let crlf = "\r\n";
        let e42 = ev(
            crlf,
            Some("42"),
            None,
            &[
                r#"{"jsonrpc":"2.0","id":7,"#,
                r#""result":{"content":"#,
                r#"[]}}"#,
            ],
        );
        let first = Script::sse("")
            .chunk(&ev(crlf, Some("40"), None, &[&progress(40)]))
            .chunk(&ev(crlf, Some("41"), None, &[&progress(41)]))
            .chunk(&e42)
            .end();
        let cut = first.offset_of("data: {\"jsonrpc\":\"2.0\",\"id\":7", 0, 14);
        let fresh = Script::sse("")
            .chunk(&ev(crlf, Some("1"), None, &[""]))
            .chunk(&ev(crlf, Some("2"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, fresh],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "fetch")),
                resume("s-1", "42"),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(
            kinds,
            vec![K::TornCut, K::CursorAhead, K::FreshStream],
            "{f:#?}"
        );
        assert_eq!(f[0].cut.class_name(), Some("mid-value"));
        assert_eq!(f[0].cut.data_line, Some(1));
        assert_eq!(f[0].raw_offsets, vec![cut]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_seed_000_yields_pending_call() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("40"), None, &[&progress(40)]))
            .chunk(&ev(lf, Some("41"), None, &[&progress(41)]))
            .chunk(&ev(lf, Some("42"), None, &[&progress(42)]))
            .end();
        let cut = first.offset_of("id: 42", 0, 0) - 2 - 2;
        let mut replay = Script::sse("");
        for i in 42..=46u64 {
            replay = replay.chunk(&ev(lf, Some(&i.to_string()), None, &[&progress(i)]));
        }
        let replay = replay
            .chunk(&ev(lf, Some("47"), None, &[&result("1")]))
            .chunk(&ev(lf, None, Some("end"), &["{}"]))
            .end();
        let batch = format!("[{},{}]", call("1", "search"), call("2", "fetch"));
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Reset,
            vec![post(Some("s-1"), None, &batch), resume("s-1", "41")],
        )
        .await;
        assert_eq!(kinds, vec![K::PendingCall], "{:#?}", tap.auditor.findings());
        assert_eq!(tap.auditor.findings()[0].ids, vec!["2".to_string()]);
    })
    .await
    .expect("timeout");
}

const U: [&str; 4] = [
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_1_x",
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_2_y",
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_3_z",
    "7f3c2a10-5b7e-4c1a-9d2e-0a1b2c3d4e5f_4_w",
];

#[tokio::test]
async fn e2e_torn_event_missing_from_replay_yields_replay_gap() {
    within(async {
        let crlf = "\r\n";
        let first = Script::sse("")
            .chunk(&ev(crlf, Some(U[0]), None, &[&progress(1)]))
            .chunk(&ev(crlf, Some(U[1]), None, &[&progress(2)]))
            .chunk(&ev(crlf, Some(U[2]), None, &[&progress(3)]))
            .end();
        let cut = first.offset_of("data: ", 2, 10);
        let replay = Script::sse("")
            .chunk(&ev(crlf, Some(U[3]), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Fin,
            vec![
                post(Some("s-9"), None, &call("7", "search")),
                resume("s-9", U[1]),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::TornCut, K::ReplayGap], "{f:#?}");
        assert_eq!(f[1].ids, vec![U[2].to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_refused_resume_yields_explicit_loss() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("id: 2", 0, 0) - 2 - 2;
        let refused =
            Script::raw("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let (kinds, tap) = run(
            vec![first, refused],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "1"),
            ],
        )
        .await;
        // The call was never re-sent after the refusal: it is lost.
        assert_eq!(
            kinds,
            vec![K::ExplicitLoss, K::Abandoned],
            "{:#?}",
            tap.auditor.findings()
        );
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_empty_replay_yields_silent_empty() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("id: 2", 0, 0) - 2 - 2;
        let empty = Script::sse("").end();
        let (kinds, tap) = run(
            vec![first, empty],
            cut,
            CutAction::CleanEnd,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "1"),
            ],
        )
        .await;
        assert_eq!(kinds, vec![K::SilentEmpty], "{:#?}", tap.auditor.findings());
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_stateless_call_sent_again_yields_reissued() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, None, None, &[&progress(1)]))
            .chunk(&ev(lf, None, None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("data: ", 1, 8);
        let again = Script::sse("")
            .chunk(&ev(lf, None, None, &[&result("8")]))
            .end();
        let v = Some("2026-07-28");
        let (kinds, tap) = run(
            vec![first, again],
            cut,
            CutAction::Reset,
            vec![
                post_keyed(None, v, "call-a", &call("7", "search")),
                post_keyed(None, v, "call-a", &call("8", "search")),
            ],
        )
        .await;
        // No tools/list crossed the proxy: whether `search` may be repeated is unknown.
        assert_eq!(
            kinds,
            vec![K::TornCut, K::Reissued, K::Unknown],
            "{:#?}",
            tap.auditor.findings()
        );
        assert_eq!(
            tap.auditor.findings()[1].proof.as_deref(),
            Some("idempotency-key")
        );
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_stateless_identical_call_without_a_key_yields_unproven_resend() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, None, None, &[&progress(1)]))
            .chunk(&ev(lf, None, None, &[&progress(2)]))
            .end();
        let cut = first.offset_of("data: ", 1, 8);
        let again = Script::sse("")
            .chunk(&ev(lf, None, None, &[&result("8")]))
            .end();
        let v = Some("2026-07-28");
        let (kinds, tap) = run(
            vec![first, again],
            cut,
            CutAction::Reset,
            vec![
                post(None, v, &call("7", "search")),
                post(None, v, &call("8", "search")),
            ],
        )
        .await;
        assert_eq!(
            kinds,
            vec![K::TornCut, K::UnprovenResend],
            "{:#?}",
            tap.auditor.findings()
        );
        let lost = &tap.auditor.findings()[1];
        assert_eq!(lost.candidates.len(), 1, "{lost:#?}");
        assert_eq!(lost.candidates[0].id, "8");
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_delivered_event_sent_again_yields_replay_duplicate() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some(U[0]), None, &[&progress(1)]))
            .chunk(&ev(lf, Some(U[1]), None, &[&progress(2)]))
            .chunk(&ev(lf, Some(U[2]), None, &[&progress(3)]))
            .end();
        let cut = first.offset_of("id: ", 2, 0) - 2 - 2;
        let replay = Script::sse("")
            .chunk(&ev(lf, Some(U[1]), None, &[&progress(2)]))
            .chunk(&ev(lf, Some(U[2]), None, &[&progress(3)]))
            .chunk(&ev(lf, Some(U[3]), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Fin,
            vec![
                post(Some("s-3"), None, &call("7", "search")),
                resume("s-3", U[1]),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::ReplayDuplicate], "{f:#?}");
        assert_eq!(f[0].ids, vec![U[1].to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_older_cursor_yields_only_cursor_behind() {
    within(async {
        let crlf = "\r\n";
        let first = Script::sse("")
            .chunk(&ev(crlf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(crlf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(crlf, Some("3"), None, &[&progress(3)]))
            .end();
        // Right after event 2's blank line, before its HTTP chunk's trailing CRLF.
        let cut = first.offset_of("id: 3", 0, 0) - 4 - 2;
        let replay = Script::sse("")
            .chunk(&ev(crlf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(crlf, Some("3"), None, &[&result("7")]))
            .end();
        // A FIN: the client could read event 2, so resuming from 1 is its bug (after a reset
        // its kernel may have discarded event 2: see `findings.rs`).
        let (kinds, tap) = run(
            vec![first, replay],
            cut,
            CutAction::Fin,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                resume("s-1", "1"),
            ],
        )
        .await;
        assert_eq!(
            kinds,
            vec![K::CursorBehind],
            "{:#?}",
            tap.auditor.findings()
        );
    })
    .await
    .expect("timeout");
}
