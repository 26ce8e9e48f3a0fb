//! End to end, continued: the finding kinds judged from what the client and server do after a
//! cut (`cross-stream`, `cursor-missing`, `abandoned`) and from the answers on one stream
//! (`duplicate-response`, `replay-reorder`), over real loopback sockets through the proxy and
//! the auditor.

use std::time::Duration;

use crate::common::audit::e2e::*;
use tearline::audit::{AuditConfig, FindingKind as K};
use tearline::vocab::CutAction;

/// A cut offset no response reaches: the proxy relays everything.
const NEVER: u64 = u64::MAX;

#[tokio::test]
async fn e2e_resume_answered_with_another_streams_id_yields_cross_stream() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .end();
        // Right after event 2's HTTP chunk: a boundary, nothing torn.
        let cut = first.offset_of("id: 3", 0, 0) - 2 - 2;
        let other = Script::sse("")
            .chunk(&ev(lf, Some("10"), None, &[&progress(10)]))
            .chunk(&ev(lf, Some("11"), None, &[&result("8")]))
            .end();
        let replay = Script::sse("")
            .chunk(&ev(lf, Some("10"), None, &[&progress(10)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .chunk(&ev(lf, Some("4"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![first, other, replay],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                post(Some("s-1"), None, &call("8", "fetch")),
                resume("s-1", "2"),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::CrossStream], "{f:#?}");
        assert_eq!(f[0].ids, vec!["10".to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_two_answers_for_one_request_id_yield_duplicate_response() {
    within(async {
        let lf = "\n";
        let answered_twice = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&result("7")]))
            .chunk(&ev(lf, Some("3"), None, &[&result("7")]))
            .end();
        let (kinds, tap) = run(
            vec![answered_twice],
            NEVER,
            CutAction::Reset,
            vec![post(Some("s-1"), None, &call("7", "search"))],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::DuplicateResponse], "{f:#?}");
        assert_eq!(f[0].ids, vec!["7".to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_call_sent_again_without_last_event_id_yields_cursor_missing() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .end();
        let cut = first.offset_of("id: 3", 0, 0) - 2 - 2;
        let again = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&result("8")]))
            .end();
        // The test client reads every event at once: none is in the reset's unread window.
        let config = AuditConfig {
            rst_unread: Duration::ZERO,
            ..AuditConfig::default()
        };
        let (kinds, tap) = run_with(
            config,
            vec![first, again],
            cut,
            CutAction::Reset,
            vec![
                post(Some("s-1"), None, &call("7", "search")),
                post(Some("s-1"), None, &call("8", "search")),
            ],
        )
        .await;
        let f = tap.auditor.findings();
        // Call 8 repeats call 7 without proof: the wire cannot tell (8 is its candidate).
        assert_eq!(kinds, vec![K::CursorMissing, K::UnprovenResend], "{f:#?}");
        assert_eq!(f[0].ids, vec!["2".to_string(), "8".to_string()]);
        assert_eq!(f[1].candidates.len(), 1, "{f:#?}");
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_stateless_call_left_unanswered_after_cut_yields_abandoned() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, None, None, &[&progress(1)]))
            .chunk(&ev(lf, None, None, &[&progress(2)]))
            .chunk(&ev(lf, None, None, &[&result("7")]))
            .end();
        // Right after event 1's HTTP chunk: a boundary, nothing torn.
        let cut = first.offset_of("data: ", 1, 0) - 2 - 2;
        let config = AuditConfig {
            abandon_after: Duration::from_millis(50),
            ..AuditConfig::default()
        };
        let (kinds, tap) = run_with(
            config,
            vec![first],
            cut,
            CutAction::Reset,
            vec![post(None, Some("2026-07-28"), &call("7", "search"))],
        )
        .await;
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::Abandoned], "{f:#?}");
        assert_eq!(f[0].ids, vec!["7".to_string()]);
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn e2e_replay_with_a_newer_event_before_the_torn_one_yields_replay_reorder() {
    within(async {
        let lf = "\n";
        let first = Script::sse("")
            .chunk(&ev(lf, Some("1"), None, &[&progress(1)]))
            .chunk(&ev(lf, Some("2"), None, &[&progress(2)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .end();
        // Inside event 3's data line: event 3 is torn, so the resume from 2 owes it.
        let cut = first.offset_of("id: 3", 0, 0) + 12;
        let replay = Script::sse("")
            .chunk(&ev(lf, Some("4"), None, &[&progress(4)]))
            .chunk(&ev(lf, Some("3"), None, &[&progress(3)]))
            .chunk(&ev(lf, Some("5"), None, &[&result("7")]))
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
        let f = tap.auditor.findings();
        assert_eq!(kinds, vec![K::TornCut, K::ReplayReorder], "{f:#?}");
    })
    .await
    .expect("timeout");
}
