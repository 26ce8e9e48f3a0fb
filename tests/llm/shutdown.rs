//! The end of a proxy's run, judged before its drain closes what is open (issue 34 items 6
//! and 7): an LLM stream still waiting for its next token when the proxy shuts down is
//! `llm-hung`, not the `llm-stalled` + `llm-truncated` its forced close would look like; a
//! stream the proxy closes there says the proxy closed it; a finished one gets nothing.

use std::time::Duration;

use tearline::audit::FindingKind;
use tearline::vocab::LlmApi;
use tearline::wire::{Observation, ObservationSink};

use crate::verdicts::{Ending, auditor, exchange, kinds, llm};

#[tokio::test(start_paused = true)]
async fn a_stream_still_waiting_when_the_proxy_shuts_down_is_hung_not_truncated() {
    for api in LlmApi::ALL {
        let a = auditor();
        exchange(&a, 1, api, false, &[], Ending::Open(4));
        tokio::time::advance(Duration::from_secs(5)).await;
        // The drain timeout ended: the audit judges, then the proxy resets the connection.
        a.closing();
        a.record(Observation::ConnClosed { conn: 1 });
        tokio::time::advance(Duration::from_secs(31)).await;
        a.finish();
        let found = a.findings();
        assert_eq!(kinds(&found), [FindingKind::LlmHung], "{api}: {found:#?}");
        let f = llm(&found)[0];
        assert!(
            f.detail.contains("when the proxy shut down"),
            "{}",
            f.detail
        );
        assert!(f.detail.contains("silent for 5.0 s"), "{}", f.detail);
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_the_proxy_closes_at_shutdown_says_so() {
    let api = LlmApi::ChatCompletions;
    let a = auditor();
    exchange(&a, 1, api, false, &[], Ending::Open(4));
    // Still streaming a moment ago: not hung; the proxy's close truncates it.
    tokio::time::advance(Duration::from_millis(500)).await;
    a.closing();
    a.record(Observation::ConnClosed { conn: 1 });
    a.finish();
    let found = a.findings();
    assert_eq!(kinds(&found), [FindingKind::LlmTruncated], "{found:#?}");
    let detail = &llm(&found)[0].detail;
    assert!(
        detail.contains("the proxy closed its connection at shutdown"),
        "{detail}"
    );
    assert!(!detail.contains("does not say which peer"), "{detail}");
}

#[tokio::test(start_paused = true)]
async fn a_finished_stream_gets_nothing_at_shutdown_and_a_close_before_it_keeps_its_text() {
    for api in LlmApi::ALL {
        let a = auditor();
        exchange(&a, 1, api, false, &[], Ending::Whole);
        tokio::time::advance(Duration::from_secs(5)).await;
        a.closing();
        a.finish();
        assert_eq!(kinds(&a.findings()), [], "{api}");
    }
    // A connection that closed before the shutdown is not told as the proxy's.
    let a = auditor();
    exchange(&a, 1, LlmApi::Messages, false, &[], Ending::Open(4));
    a.record(Observation::ConnClosed { conn: 1 });
    a.closing();
    a.finish();
    let found = a.findings();
    assert_eq!(kinds(&found), [FindingKind::LlmTruncated], "{found:#?}");
    let detail = &llm(&found)[0].detail;
    assert!(!detail.contains("the proxy closed"), "{detail}");
    assert!(detail.contains("does not say which peer"), "{detail}");
}
