//! The LLM verdicts of the audit, on the lab's own bytes through the real HTTP observer, with
//! paused time: each kind appears where it must (with what was missing and how the stream
//! ended) and not where it must not.

use std::sync::Arc;
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, Finding, FindingClass, FindingKind};
use tearline::lab::llm::frame::Part;
use tearline::vocab::{CutAction, Direction, LlmApi};
use tearline::wire::http1::{observer_pair, observer_pair_routed};
use tearline::wire::llm_routes::LlmRoutes;
use tearline::wire::{Observation, ObservationSink, WireObserver};

use crate::llm_support::wire_conversation;

/// How one exchange ends.
#[derive(Clone, Copy)]
pub(crate) enum Ending {
    /// The whole response, then the server closes.
    Whole,
    /// Delivered through the end of frame `k`, then the proxy's cut with this action.
    CutAfter(usize, CutAction),
    /// Delivered through the end of frame `k`; the connection stays open.
    Open(usize),
    /// Nothing of the response delivered, then the proxy's cut (e.g. a reset of its first
    /// byte).
    CutBeforeResponse(CutAction),
    /// The response head delivered, then the proxy's cut before the first event.
    CutAfterHead(CutAction),
}

/// The end of the response head in `down`.
fn head_len(down: &[u8]) -> usize {
    down.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4
}

/// Delivers `down` through `at`, then the proxy's cut there and the connection's close.
fn cut(
    sink: &Arc<dyn ObservationSink>,
    d: &mut dyn WireObserver,
    conn: u64,
    at: u64,
    action: CutAction,
) {
    d.delivered_through(at);
    let point = d.cut_at(at);
    sink.record(Observation::Cut {
        conn,
        direction: Direction::Downstream,
        action,
        point,
    });
    sink.record(Observation::ConnClosed { conn });
}

/// Runs one exchange on connection `conn` through the observer into `auditor`.
pub(crate) fn exchange(
    auditor: &Arc<Auditor>,
    conn: u64,
    api: LlmApi,
    tool: bool,
    extra: &[(&str, &str)],
    ending: Ending,
) -> Vec<Part> {
    let (frames, up, down, ends) = wire_conversation(api, tool, 6, extra);
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    let (mut u, mut d) = observer_pair(conn, sink.clone());
    u.observe(&up);
    u.delivered_through(up.len() as u64);
    d.observe(&down);
    match ending {
        Ending::Whole => {
            d.delivered_through(down.len() as u64);
            d.eof();
            sink.record(Observation::ConnClosed { conn });
        }
        Ending::CutAfter(k, action) => cut(&sink, &mut *d, conn, ends[k] as u64, action),
        Ending::Open(k) => d.delivered_through(ends[k] as u64),
        Ending::CutBeforeResponse(action) => cut(&sink, &mut *d, conn, 0, action),
        Ending::CutAfterHead(action) => cut(&sink, &mut *d, conn, head_len(&down) as u64, action),
    }
    frames.iter().map(|f| f.part).collect()
}

fn index_of(parts: &[Part], part: Part, nth: usize) -> usize {
    parts
        .iter()
        .enumerate()
        .filter(|(_, p)| **p == part)
        .nth(nth)
        .map(|(i, _)| i)
        .expect("part present")
}

pub(crate) fn llm(findings: &[Finding]) -> Vec<&Finding> {
    findings
        .iter()
        .filter(|f| f.kind.as_str().starts_with("llm-"))
        .collect()
}

pub(crate) fn kinds(findings: &[Finding]) -> Vec<FindingKind> {
    llm(findings).iter().map(|f| f.kind).collect()
}

pub(crate) fn auditor() -> Arc<Auditor> {
    Arc::new(Auditor::new(AuditConfig::default()))
}

#[tokio::test(start_paused = true)]
async fn a_complete_answer_has_no_llm_finding() {
    for api in LlmApi::ALL {
        for tool in [false, true] {
            let a = auditor();
            exchange(&a, 1, api, tool, &[], Ending::Whole);
            a.finish();
            assert_eq!(kinds(&a.findings()), [], "{api} tool={tool}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_truncated_answer_never_sent_again_is_a_loss_saying_what_was_missing() {
    for api in LlmApi::ALL {
        let a = auditor();
        let (f, _, _, _) = wire_conversation(api, false, 6, &[]);
        let parts: Vec<Part> = f.iter().map(|f| f.part).collect();
        let third = index_of(&parts, Part::Delta, 2);
        exchange(
            &a,
            1,
            api,
            false,
            &[],
            Ending::CutAfter(third, CutAction::CleanEnd),
        );
        // Not judged before abandon_after, nor at once.
        assert_eq!(kinds(&a.findings()), [], "{api}");
        tokio::time::advance(Duration::from_secs(31)).await;
        let found = a.findings();
        let l = llm(&found);
        assert_eq!(l.len(), 1, "{api}: {l:?}");
        let f = l[0];
        assert_eq!(
            (f.kind, f.class),
            (FindingKind::LlmTruncated, FindingClass::Loss)
        );
        assert!(f.detail.contains("3 text deltas"), "{}", f.detail);
        assert!(f.detail.contains("clean-end cut at"), "{}", f.detail);
        assert!(f.detail.contains("the wire cannot tell"), "{}", f.detail);
        assert_eq!(f.stream.request, format!("POST {}", api.endpoint()));
        assert_eq!(a.loss_affected(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn only_a_clean_end_before_the_completion_signal_is_called_a_silent_loss() {
    for (action, silent) in [
        (CutAction::CleanEnd, true),
        (CutAction::Reset, false),
        (CutAction::Fin, false),
    ] {
        let a = auditor();
        let (f, _, _, _) = wire_conversation(LlmApi::ChatCompletions, false, 6, &[]);
        let parts: Vec<Part> = f.iter().map(|f| f.part).collect();
        let second = index_of(&parts, Part::Delta, 1);
        exchange(
            &a,
            1,
            LlmApi::ChatCompletions,
            false,
            &[],
            Ending::CutAfter(second, action),
        );
        a.finish();
        let found = a.findings();
        let l = llm(&found);
        assert_eq!(kinds(&found), [FindingKind::LlmTruncated], "{action:?}");
        assert_eq!(a.loss_affected(), 1, "{action:?}");
        let summary = a.summary();
        let text = &l[0].detail;
        if silent {
            assert!(text.contains("the wire cannot tell"), "{text}");
            assert!(!text.contains("visible loss"), "{text}");
            assert!(
                summary.starts_with("silent loss observed: yes (1 call affected)\n"),
                "{summary}"
            );
        } else {
            assert!(text.contains("the client saw an error"), "{text}");
            assert!(!text.contains("the wire cannot tell"), "{text}");
            assert!(
                summary.starts_with(
                    "silent loss observed: no (0 calls affected); visible loss: 1 call"
                ),
                "{action:?}: {summary}"
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_that_got_no_answer_is_a_visible_loss_not_a_silent_one() {
    let a = auditor();
    exchange(
        &a,
        1,
        LlmApi::Messages,
        false,
        &[],
        Ending::CutBeforeResponse(CutAction::Reset),
    );
    a.finish();
    assert_eq!(kinds(&a.findings()), [FindingKind::LlmUnanswered]);
    let summary = a.summary();
    assert!(
        summary.starts_with("silent loss observed: no (0 calls affected); visible loss: 1 call"),
        "{summary}"
    );
}

/// Runs one Chat Completions exchange whose response head says `Content-Encoding: encoding`
/// (when given), delivered through the end of the second text delta, then the proxy's
/// `clean-end` cut.
fn encoded_exchange(auditor: &Arc<Auditor>, encoding: Option<&str>) {
    let (frames, up, mut down, ends) = wire_conversation(LlmApi::ChatCompletions, false, 6, &[]);
    let parts: Vec<Part> = frames.iter().map(|f| f.part).collect();
    let mut at = ends[index_of(&parts, Part::Delta, 1)];
    if let Some(e) = encoding {
        let line_end = down
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("status line")
            + 2;
        let header = format!("Content-Encoding: {e}\r\n");
        down.splice(line_end..line_end, header.bytes());
        at += header.len();
    }
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    let (mut u, mut d) = observer_pair(1, sink.clone());
    u.observe(&up);
    u.delivered_through(up.len() as u64);
    d.observe(&down);
    cut(&sink, &mut *d, 1, at as u64, CutAction::CleanEnd);
}

#[tokio::test(start_paused = true)]
async fn an_encoded_stream_is_reported_unread_and_never_judged_truncated() {
    for encoding in ["gzip", "deflate", "br"] {
        let a = auditor();
        encoded_exchange(&a, Some(encoding));
        a.finish();
        let found = a.findings();
        let kinds: Vec<&str> = found.iter().map(|f| f.kind.as_str()).collect();
        assert_eq!(kinds, ["observer-gave-up"], "{encoding}: {found:#?}");
        assert!(
            found[0]
                .detail
                .contains(&format!("content-encoding {encoding}")),
            "{}",
            found[0].detail
        );
        assert!(
            found[0].detail.contains("not judged"),
            "{}",
            found[0].detail
        );
        assert_eq!(found[0].stream.request, "POST /v1/chat/completions");
        assert_eq!(a.loss_affected(), 0);
    }
    // The same cut on the plain stream is judged, and nothing says the observer gave up.
    let a = auditor();
    encoded_exchange(&a, None);
    a.finish();
    let found = a.findings();
    let kinds: Vec<&str> = found.iter().map(|f| f.kind.as_str()).collect();
    assert_eq!(kinds, ["llm-truncated"], "{found:#?}");
}

/// A Chat Completions exchange on `/gen/stream` (a gateway path tearline does not know),
/// cut with a clean end after the second delta, observed with `routes`.
fn exchange_on_a_gateway_path(auditor: &Arc<Auditor>, routes: Arc<LlmRoutes>) {
    let (frames, up, down, ends) = wire_conversation(LlmApi::ChatCompletions, false, 6, &[]);
    let up = String::from_utf8_lossy(&up).replacen("/v1/chat/completions", "/gen/stream", 1);
    let parts: Vec<Part> = frames.iter().map(|f| f.part).collect();
    let at = ends[index_of(&parts, Part::Delta, 1)];
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    let (mut u, mut d) = observer_pair_routed(1, sink.clone(), routes);
    u.observe(up.as_bytes());
    u.delivered_through(up.len() as u64);
    d.observe(&down);
    cut(&sink, &mut *d, 1, at as u64, CutAction::CleanEnd);
}

#[tokio::test(start_paused = true)]
async fn a_declared_llm_route_is_judged_and_an_undeclared_one_is_not() {
    let declared = Arc::new(LlmRoutes::new(vec![(
        "/gen/*".to_owned(),
        LlmApi::ChatCompletions,
    )]));
    let a = auditor();
    exchange_on_a_gateway_path(&a, declared.clone());
    a.finish();
    let found = a.findings();
    assert_eq!(kinds(&found), [FindingKind::LlmTruncated], "{found:#?}");
    assert_eq!(llm(&found)[0].stream.request, "POST /v1/chat/completions");
    assert!(
        declared.noticed().is_empty(),
        "a declared route needs no notice"
    );

    // Undeclared: not an LLM stream, and the POST answered with an event stream is noticed
    // (once, however often it comes).
    let routes = Arc::new(LlmRoutes::default());
    for _ in 0..2 {
        let a = auditor();
        exchange_on_a_gateway_path(&a, routes.clone());
        a.finish();
        assert_eq!(
            kinds(&a.findings()),
            [],
            "an unknown path is not an LLM stream"
        );
    }
    assert_eq!(routes.noticed(), ["/gen/stream"]);
}

#[tokio::test(start_paused = true)]
async fn a_truncated_answer_is_judged_at_the_end_of_the_run_whatever_the_wait() {
    let a = auditor();
    let (f, _, _, _) = wire_conversation(LlmApi::Messages, false, 6, &[]);
    let parts: Vec<Part> = f.iter().map(|f| f.part).collect();
    let first = index_of(&parts, Part::Delta, 0);
    exchange(
        &a,
        1,
        LlmApi::Messages,
        false,
        &[],
        Ending::CutAfter(first, CutAction::Reset),
    );
    a.finish();
    assert_eq!(kinds(&a.findings()), [FindingKind::LlmTruncated]);
}

#[tokio::test(start_paused = true)]
async fn a_re_send_with_the_same_idempotency_key_or_attempt_number_is_llm_retried() {
    for (api, first, again) in [
        (
            LlmApi::ChatCompletions,
            vec![("Idempotency-Key", "k-1")],
            vec![("Idempotency-Key", "k-1")],
        ),
        (
            LlmApi::Messages,
            vec![("X-Stainless-Retry-Count", "0")],
            vec![("X-Stainless-Retry-Count", "1")],
        ),
        (
            LlmApi::Responses,
            vec![("x-stainless-retry-count", "0")],
            vec![("x-stainless-retry-count", "2")],
        ),
    ] {
        let a = auditor();
        exchange(
            &a,
            1,
            api,
            false,
            &first,
            Ending::CutAfter(3, CutAction::Reset),
        );
        tokio::time::advance(Duration::from_millis(40)).await;
        exchange(&a, 2, api, false, &again, Ending::Whole);
        a.finish();
        let found = a.findings();
        assert_eq!(kinds(&found), [FindingKind::LlmRetried], "{api}");
        let f = llm(&found)[0];
        assert_eq!(f.class, FindingClass::Info);
        assert!(f.detail.contains("proven by"), "{}", f.detail);
        assert_eq!(f.ids.last().map(String::as_str), Some("2/0"));
        assert_eq!(a.loss_affected(), 0);
    }
}

#[tokio::test(start_paused = true)]
async fn an_identical_request_without_a_marker_is_only_a_candidate() {
    let api = LlmApi::ChatCompletions;
    let a = auditor();
    exchange(
        &a,
        1,
        api,
        false,
        &[],
        Ending::CutAfter(3, CutAction::CleanEnd),
    );
    exchange(&a, 2, api, false, &[], Ending::Whole);
    // A different key is no proof either.
    exchange(
        &a,
        3,
        api,
        false,
        &[("Idempotency-Key", "other")],
        Ending::Whole,
    );
    a.finish();
    let found = a.findings();
    assert_eq!(kinds(&found), [FindingKind::LlmTruncated]);
    let f = llm(&found)[0];
    assert!(f.detail.contains("connection 2 request 0"), "{}", f.detail);
    assert!(f.detail.contains("connection 3 request 0"), "{}", f.detail);
    assert_eq!(f.ids, ["2/0", "3/0"]);
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_cut_between_argument_pieces_says_its_arguments_do_not_parse() {
    for api in LlmApi::ALL {
        let (f, _, _, _) = wire_conversation(api, true, 6, &[]);
        let parts: Vec<Part> = f.iter().map(|f| f.part).collect();
        let second = index_of(&parts, Part::ToolArgs, 1);
        let a = auditor();
        exchange(
            &a,
            1,
            api,
            true,
            &[],
            Ending::CutAfter(second, CutAction::CleanEnd),
        );
        a.finish();
        let found = a.findings();
        let l = llm(&found);
        assert_eq!(l.len(), 1, "{api}");
        assert!(
            l[0].detail.contains("(get_weather)")
                && l[0].detail.contains("not parseable (partial JSON)"),
            "{api}: {}",
            l[0].detail
        );
    }
}

#[tokio::test(start_paused = true)]
async fn complete_but_for_the_terminal_event_is_info_and_never_on_responses() {
    for api in LlmApi::ALL {
        let (f, _, _, _) = wire_conversation(api, false, 6, &[]);
        let parts: Vec<Part> = f.iter().map(|f| f.part).collect();
        let completion = index_of(&parts, Part::Completion, 0);
        let a = auditor();
        exchange(
            &a,
            1,
            api,
            false,
            &[],
            Ending::CutAfter(completion, CutAction::CleanEnd),
        );
        a.finish();
        let want: &[FindingKind] = if api == LlmApi::Responses {
            &[]
        } else {
            &[FindingKind::LlmNoTerminal]
        };
        assert_eq!(kinds(&a.findings()), want, "{api}");
        if api != LlmApi::Responses {
            let found = a.findings();
            let d = &llm(&found)[0].detail;
            assert!(d.contains("the answer is whole"), "{d}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_silent_before_it_ended_unfinished_is_a_stall_and_still_a_truncation() {
    let api = LlmApi::ChatCompletions;
    let a = auditor();
    let (f, up, down, ends) = wire_conversation(api, false, 6, &[]);
    let parts: Vec<Part> = f.iter().map(|f| f.part).collect();
    let last_delta = index_of(&parts, Part::Delta, 5);
    let sink: Arc<dyn ObservationSink> = a.clone();
    let (mut u, mut d) = observer_pair(1, sink.clone());
    u.observe(&up);
    u.delivered_through(up.len() as u64);
    d.observe(&down);
    d.delivered_through(ends[last_delta] as u64);
    tokio::time::advance(Duration::from_millis(2500)).await;
    let point = d.cut_at(ends[last_delta] as u64);
    sink.record(Observation::Cut {
        conn: 1,
        direction: Direction::Downstream,
        action: CutAction::Reset,
        point,
    });
    sink.record(Observation::ConnClosed { conn: 1 });
    a.finish();
    let found = a.findings();
    assert_eq!(
        kinds(&found),
        [FindingKind::LlmStalled, FindingKind::LlmTruncated]
    );
    assert!(
        llm(&found)[0].detail.contains("silent for 2.5 s"),
        "{}",
        llm(&found)[0].detail
    );
    // The same cut without the silence: no stall.
    let b = auditor();
    exchange(
        &b,
        1,
        api,
        false,
        &[],
        Ending::CutAfter(last_delta, CutAction::Reset),
    );
    b.finish();
    assert_eq!(kinds(&b.findings()), [FindingKind::LlmTruncated]);
}

#[tokio::test(start_paused = true)]
async fn a_stream_still_open_and_silent_at_the_end_of_the_run_is_hung() {
    let api = LlmApi::Messages;
    let a = auditor();
    exchange(&a, 1, api, false, &[], Ending::Open(4));
    tokio::time::advance(Duration::from_secs(5)).await;
    a.finish();
    let found = a.findings();
    assert_eq!(kinds(&found), [FindingKind::LlmHung]);
    assert_eq!(llm(&found)[0].class, FindingClass::ClientBug);
    // Still streaming a moment ago: not hung.
    let b = auditor();
    exchange(&b, 1, api, false, &[], Ending::Open(4));
    tokio::time::advance(Duration::from_millis(500)).await;
    b.finish();
    assert_eq!(kinds(&b.findings()), []);
}

#[tokio::test(start_paused = true)]
async fn a_request_reset_before_its_response_and_never_sent_again_is_unanswered() {
    for api in LlmApi::ALL {
        let a = auditor();
        exchange(
            &a,
            1,
            api,
            false,
            &[],
            Ending::CutBeforeResponse(CutAction::Reset),
        );
        a.finish();
        let found = a.findings();
        assert_eq!(kinds(&found), [FindingKind::LlmUnanswered], "{api}");
        let f = llm(&found)[0];
        assert_eq!(f.class, FindingClass::Loss);
        assert!(
            f.detail.contains("got no answer") && f.detail.contains("reset cut"),
            "{}",
            f.detail
        );
        assert_eq!(a.loss_affected(), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn resets_before_the_response_re_sent_with_attempt_numbers_are_retried_then_unanswered() {
    // What every Stainless SDK does with a reset before the response: three attempts,
    // numbered 0, 1, 2, each reset; the last one is not re-sent.
    let api = LlmApi::ChatCompletions;
    let a = auditor();
    for n in 0..3u64 {
        let count = n.to_string();
        exchange(
            &a,
            n + 1,
            api,
            false,
            &[("x-stainless-retry-count", count.as_str())],
            Ending::CutBeforeResponse(CutAction::Reset),
        );
        tokio::time::advance(Duration::from_millis(500)).await;
    }
    a.finish();
    let found = a.findings();
    assert_eq!(
        kinds(&found),
        [
            FindingKind::LlmRetried,
            FindingKind::LlmRetried,
            FindingKind::LlmUnanswered
        ]
    );
    let l = llm(&found);
    assert!(l[0].detail.contains("got no answer"), "{}", l[0].detail);
    assert_eq!(l[0].ids, ["2/0"]);
    assert_eq!(l[1].ids, ["3/0"]);
    assert!(l[2].detail.contains("No proven re-send"), "{}", l[2].detail);
}

#[tokio::test(start_paused = true)]
async fn unmarked_re_sends_of_an_unanswered_request_are_named_as_candidates() {
    // What Vercel's `ai` does: the same body again, no marker.
    let api = LlmApi::Messages;
    let a = auditor();
    for conn in 1..=2 {
        exchange(
            &a,
            conn,
            api,
            false,
            &[],
            Ending::CutBeforeResponse(CutAction::Reset),
        );
    }
    a.finish();
    let found = a.findings();
    assert_eq!(
        kinds(&found),
        [FindingKind::LlmUnanswered, FindingKind::LlmUnanswered]
    );
    let first = found
        .iter()
        .find(|f| f.stream.conn == 1)
        .expect("the first request's finding");
    assert_eq!(first.ids, ["2/0"]);
    assert!(
        first.detail.contains("connection 2 request 0"),
        "{}",
        first.detail
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_right_after_its_head_is_truncated_not_unanswered() {
    for api in LlmApi::ALL {
        let a = auditor();
        exchange(
            &a,
            1,
            api,
            false,
            &[],
            Ending::CutAfterHead(CutAction::Reset),
        );
        a.finish();
        let found = a.findings();
        assert_eq!(kinds(&found), [FindingKind::LlmTruncated], "{api}");
        assert!(
            llm(&found)[0].detail.contains("0 text deltas"),
            "{}",
            llm(&found)[0].detail
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_is_not_a_stream_is_not_judged_even_when_cut() {
    let (_, up, _, _) = wire_conversation(LlmApi::ChatCompletions, false, 6, &[]);
    for (down, cut_at) in [
        (
            &b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"error\":\"boom\"}"[..],
            None,
        ),
        (
            &b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"choices\":[{\"message\":"[..],
            Some(80u64),
        ),
    ] {
        let a = auditor();
        let sink: Arc<dyn ObservationSink> = a.clone();
        let (mut u, mut d) = observer_pair(1, sink.clone());
        u.observe(&up);
        u.delivered_through(up.len() as u64);
        d.observe(down);
        match cut_at {
            None => {
                d.delivered_through(down.len() as u64);
                sink.record(Observation::ConnClosed { conn: 1 });
            }
            Some(at) => cut(&sink, &mut *d, 1, at.min(down.len() as u64), CutAction::Reset),
        }
        a.finish();
        assert_eq!(kinds(&a.findings()), [], "{}", String::from_utf8_lossy(down));
    }
}
