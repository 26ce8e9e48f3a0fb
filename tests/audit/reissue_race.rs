//! A re-send and the answer the client read before sending it, on two connections: the audit
//! judges the same whichever of the two reaches it first (within the re-send rule's hold,
//! `RESEND_HOLD`), and still links a re-send whose call stays unanswered or is answered only
//! after the hold.

use std::time::Duration;

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of, result};
use tearline::audit::FindingKind as K;
use tearline::audit::rules::RESEND_HOLD;
use tearline::vocab::CutAction;

fn msg(id: &str, data: &str) -> String {
    event(Eol::Lf, Some(id), Some("message"), &[data])
}

/// Where the resume's answer to the cut call comes, relative to the re-send.
#[derive(Clone, Copy)]
enum Answer {
    /// Before the re-send (the recorded order).
    Before,
    /// After the re-send, `by` later (a late record of what was written first).
    After(Duration),
    /// Never: the resume replays without the answer.
    Never,
}

/// Call 2 (key `k`) is cut in its result; a resume replays the result (or not, `Never`); the
/// client then re-sends the call with the same key in session B, which is answered.
async fn race(answer: Answer) -> Vec<K> {
    let mut w = Wire::new();
    w.post_keyed(
        1,
        0,
        Some("A"),
        None,
        "k",
        &call_with_token("2", "blob", "tA"),
    );
    w.sse_ok(1, 0);
    let pre = msg("1-1", &progress_of("tA", 1));
    let torn = msg("1-2", &result("2", "big"));
    let cut = pre.len() + torn.len() - 6;
    w.deliver(1, 0, &(pre + &torn), Some(cut), CutAction::Reset);
    w.resume(2, 0, Some("A"), "1-1");
    let replay = match answer {
        Answer::Never => msg(
            "1-3",
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
        ),
        _ => msg("1-2", &result("2", "big")),
    };
    let resend = |w: &mut Wire| {
        w.post_keyed(
            3,
            0,
            Some("B"),
            None,
            "k",
            &call_with_token("1", "blob", "tB"),
        );
        w.sse_ok(3, 0);
    };
    match answer {
        Answer::Before => {
            tokio::time::advance(Duration::from_millis(1)).await;
            w.sse_ok(2, 0);
            w.stream_clean(2, 0, &replay);
            resend(&mut w);
        }
        Answer::After(by) => {
            resend(&mut w);
            tokio::time::advance(by).await;
            w.sse_ok(2, 0);
            w.stream_clean(2, 0, &replay);
        }
        Answer::Never => {
            resend(&mut w);
            tokio::time::advance(Duration::from_millis(1)).await;
            w.sse_ok(2, 0);
            w.stream_clean(2, 0, &replay);
        }
    }
    w.stream_clean(3, 0, &msg("1-1", &result("1", "big")));
    w.auditor.finish();
    let mut kinds = w.kinds();
    kinds.sort_by_key(|k| k.as_str());
    kinds
}

#[tokio::test(start_paused = true)]
async fn an_answer_recorded_after_the_resend_it_preceded_is_no_reissue() {
    let recorded = race(Answer::Before).await;
    assert!(!recorded.contains(&K::Reissued), "{recorded:?}");
    for ms in [0, 1, 2] {
        let late = race(Answer::After(Duration::from_millis(ms))).await;
        assert_eq!(late, recorded, "answer {ms} ms after the re-send");
    }
    let within = race(Answer::After(RESEND_HOLD - Duration::from_millis(1))).await;
    assert_eq!(within, recorded, "answer within the hold");
}

#[tokio::test(start_paused = true)]
async fn a_resend_whose_call_stays_unanswered_or_is_answered_after_the_hold_is_linked() {
    let never = race(Answer::Never).await;
    assert!(never.contains(&K::Reissued), "{never:?}");
    let after = race(Answer::After(RESEND_HOLD + Duration::from_millis(1))).await;
    assert!(after.contains(&K::Reissued), "{after:?}");
}
