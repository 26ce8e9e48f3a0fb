//! An HTTP/2 client's own `RST_STREAM` on an LLM token stream (a user's cancel) reaches the
//! LLM rule as the client giving up, as the close of its connection does on HTTP/1.1: the
//! stream is `llm-truncated` (a visible loss, never a silent one) and its detail says the
//! client reset it — whichever of the reset and the stream's unclean end the observer reports
//! first. A reset from the server is not told as the client's.

use bytes::Bytes;
use tearline::audit::{AuditConfig, Auditor, Finding, FindingKind as K};
use tearline::vocab::{Direction, LlmApi, WireProtocol};
use tearline::wire::llm::LlmEventFacts;
use tearline::wire::{LlmEventSeen, LlmRequestSeen, Observation, ObservationSink};

const CANCEL: u32 = 0x8;

/// One chat-completions stream on h2c connection 1, stream 1: two text deltas, no completion;
/// then `ending` (in order).
fn run(ending: &[Observation]) -> Vec<Finding> {
    let a = Auditor::new(AuditConfig::default());
    a.record(Observation::Protocol {
        conn: 1,
        protocol: WireProtocol::H2c,
    });
    a.record(Observation::Request {
        conn: 1,
        seq: 1,
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        session: None,
        last_event_id: None,
        protocol_version: None,
        has_authorization: true,
        idempotency_key: None,
        accepts_event_stream: true,
        body: Some(Bytes::from_static(b"{\"stream\":true}")),
    });
    a.record(Observation::LlmRequest(LlmRequestSeen {
        conn: 1,
        seq: 1,
        api: LlmApi::ChatCompletions,
        body_hash: 7,
        body_len: 15,
        idempotency_key: None,
        retry_count: None,
    }));
    a.record(Observation::Response {
        conn: 1,
        seq: 1,
        status: 200,
        content_type: Some("text/event-stream".into()),
        session: None,
    });
    for index in 0..2 {
        a.record(Observation::LlmEvent(LlmEventSeen {
            conn: 1,
            seq: 1,
            index,
            api: LlmApi::ChatCompletions,
            facts: LlmEventFacts {
                text: true,
                ..LlmEventFacts::default()
            },
            raw_end: 200 + 50 * index,
        }));
    }
    for o in ending {
        a.record(o.clone());
    }
    a.finish();
    a.findings()
}

fn reset(direction: Direction) -> Observation {
    Observation::StreamReset {
        conn: 1,
        seq: 1,
        direction,
        code: CANCEL,
        by_proxy: false,
    }
}

const UNCLEAN_END: Observation = Observation::StreamEnd {
    conn: 1,
    seq: 1,
    clean: false,
};

fn truncated(findings: &[Finding]) -> &Finding {
    let t: Vec<&Finding> = findings
        .iter()
        .filter(|f| f.kind == K::LlmTruncated)
        .collect();
    assert_eq!(t.len(), 1, "one llm-truncated: {findings:#?}");
    t[0]
}

#[tokio::test]
async fn a_clients_rst_stream_on_an_llm_stream_is_the_client_giving_up() {
    for ending in [
        vec![reset(Direction::Upstream), UNCLEAN_END],
        vec![UNCLEAN_END, reset(Direction::Upstream)],
    ] {
        let findings = run(&ending);
        let t = truncated(&findings);
        assert!(
            t.detail
                .contains("the client reset the stream (RST_STREAM(CANCEL))")
                && t.detail.contains("the client gave up on the stream itself"),
            "{ending:?}: {t:#?}"
        );
        assert_eq!(t.stream.h2_stream, Some(1), "{t:#?}");
    }
}

#[tokio::test]
async fn a_servers_rst_stream_on_an_llm_stream_is_not_told_as_the_clients() {
    let findings = run(&[reset(Direction::Downstream), UNCLEAN_END]);
    let t = truncated(&findings);
    assert!(
        !t.detail.contains("the client reset") && !t.detail.contains("gave up"),
        "{t:#?}"
    );
    assert!(
        t.detail.contains("the client saw an error"),
        "a broken stream, seen as an error: {t:#?}"
    );
}
