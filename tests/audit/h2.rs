//! The audit per HTTP/2 stream (issue 36 item 4), from observation sequences as the h2
//! observer produces them: `Protocol` first, every `seq` a stream id (odd, not contiguous),
//! streams interleaved on one connection, a cut naming its stream (`h2_stream`) with the
//! connection left open, `RST_STREAM` from either side, `GOAWAY` with streams above and below
//! its last stream id. Each finding kind these touch is checked where it must appear and where
//! it must not; every finding names the protocol and the stream id.

use std::time::Duration;

use crate::common::audit::{Eol, Wire, call_with_token, event, progress_of, result};
use tearline::audit::{Finding, FindingKind as K};
use tearline::vocab::{CutAction, Direction, WireProtocol};
use tearline::wire::{CutPoint, Observation};

const S: Option<&str> = Some("s-1");
const MODERN: Option<&str> = Some("2026-07-28");
const CANCEL: u32 = 0x8;
const REFUSED_STREAM: u32 = 0x7;
const INTERNAL_ERROR: u32 = 0x2;
const PROTOCOL_ERROR: u32 = 0x1;
const NO_ERROR: u32 = 0x0;

fn msg(id: &str, data: &str) -> String {
    event(Eol::Lf, Some(id), None, &[data])
}

fn h2c(w: &Wire, conn: u64) {
    w.rec(Observation::Protocol {
        conn,
        protocol: WireProtocol::H2c,
    });
}

fn of(w: &Wire, k: K) -> Vec<Finding> {
    w.auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == k)
        .collect()
}

fn reset(w: &Wire, conn: u64, stream: u64, direction: Direction, code: u32, by_proxy: bool) {
    w.rec(Observation::StreamReset {
        conn,
        seq: stream,
        direction,
        code,
        by_proxy,
    });
}

fn goaway(w: &Wire, conn: u64, last_stream: u64) {
    w.rec(Observation::GoAway {
        conn,
        direction: Direction::Downstream,
        last_stream,
        code: NO_ERROR,
        by_proxy: false,
    });
}

/// `tools/list` answered on h2 connection 10, stream 1: `append` is not repeat-safe.
fn list_tools(w: &mut Wire) {
    h2c(w, 10);
    w.request(
        10,
        1,
        "POST",
        None,
        None,
        MODERN,
        Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#),
    );
    w.sse_ok(10, 1);
    let list = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"append","annotations":{"readOnlyHint":false,"idempotentHint":false,"destructiveHint":false}}],"ttlMs":60000}}"#;
    w.deliver_h2(
        10,
        1,
        &event(Eol::Lf, None, None, &[list]),
        None,
        CutAction::Reset,
    );
    w.end(10, 1, true);
}

/// Call `id` (`tools/call search`, progress token `t<id>`) POSTed on stream `stream`.
fn call_on(w: &Wire, conn: u64, stream: u64, id: &str) {
    w.post(
        conn,
        stream,
        S,
        &call_with_token(id, "search", &format!("t{id}")),
    );
}

/// Answers call `id` on stream `stream`: one progress event `<id>-1` and the result `<id>-r`,
/// then a clean end of the stream.
fn answer(w: &mut Wire, conn: u64, stream: u64, id: &str) {
    let body = msg(&format!("{id}-1"), &progress_of(&format!("t{id}"), 1))
        + &msg(&format!("{id}-r"), &result(id, "ok"));
    w.deliver_h2(conn, stream, &body, None, CutAction::Reset);
    w.end(conn, stream, true);
}

#[tokio::test(start_paused = true)]
async fn interleaved_streams_are_each_judged_and_the_finding_names_h2_and_its_stream() {
    let mut w = Wire::new();
    h2c(&w, 1);
    // Both requests before either response; the later stream answers first.
    call_on(&w, 1, 1, "7");
    call_on(&w, 1, 3, "8");
    w.sse_ok(1, 3);
    w.sse_ok(1, 1);
    w.deliver_h2(
        1,
        3,
        &msg("8-1", &progress_of("t8", 1)),
        None,
        CutAction::Reset,
    );
    w.deliver_h2(
        1,
        1,
        &msg("7-1", &progress_of("t7", 1)),
        None,
        CutAction::Reset,
    );
    // Stream 3 ends cleanly without its result: pending-call; stream 1 gets its answer.
    w.end(1, 3, true);
    w.deliver_h2(
        1,
        1,
        &msg("7-r", &result("7", "ok")),
        None,
        CutAction::Reset,
    );
    w.end(1, 1, true);
    w.auditor.finish();
    let pending = of(&w, K::PendingCall);
    assert_eq!(pending.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(pending[0].ids, ["8"]);
    assert_eq!(pending[0].stream.protocol, WireProtocol::H2c);
    assert_eq!(pending[0].stream.h2_stream, Some(3));
    assert_eq!(pending[0].stream.seq, 3);
    let json = serde_json::to_value(&pending[0]).unwrap_or_default();
    assert_eq!(json["stream"]["protocol"], "h2c");
    assert_eq!(json["stream"]["h2_stream"], 3);
    assert!(pending[0].stream.label().ends_with("(h2c stream 3)"));
    assert_eq!(
        w.kinds(),
        [K::PendingCall],
        "call 7 answered on stream 1 is judged normally"
    );
}

#[tokio::test(start_paused = true)]
async fn an_http1_finding_names_http1_and_no_stream_id() {
    let mut w = Wire::new();
    call_on(&w, 1, 0, "8");
    w.sse_ok(1, 0);
    w.stream_clean(1, 0, &msg("8-1", &progress_of("t8", 1)));
    w.auditor.finish();
    let pending = of(&w, K::PendingCall);
    assert_eq!(pending.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(pending[0].stream.protocol, WireProtocol::Http1);
    assert_eq!(pending[0].stream.h2_stream, None);
    let json = serde_json::to_value(&pending[0]).unwrap_or_default();
    assert_eq!(json["stream"]["protocol"], "http1");
    assert!(json["stream"].get("h2_stream").is_none());
    assert!(pending[0].stream.label().ends_with("(http1)"));
}

/// Streams 1, 3, 5 carry calls 1, 3, 5; each delivers its progress event; stream 3 is cut
/// in the middle of its result event (stream scope: the connection stays open).
fn cut_one_of_three(w: &mut Wire) {
    h2c(w, 1);
    for s in [1u64, 3, 5] {
        call_on(w, 1, s, &s.to_string());
    }
    for s in [1u64, 3, 5] {
        w.sse_ok(1, s);
        let id = s.to_string();
        w.deliver_h2(
            1,
            s,
            &msg(&format!("{id}-1"), &progress_of(&format!("t{id}"), 1)),
            None,
            CutAction::Reset,
        );
    }
    let torn = msg("3-r", &result("3", "ok"));
    w.deliver_h2(1, 3, &torn, Some(20), CutAction::Reset);
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_is_torn_alone_and_its_siblings_complete() {
    let mut w = Wire::new();
    cut_one_of_three(&mut w);
    for s in [1u64, 5] {
        let id = s.to_string();
        w.deliver_h2(
            1,
            s,
            &msg(&format!("{id}-r"), &result(&id, "ok")),
            None,
            CutAction::Reset,
        );
        w.end(1, s, true);
    }
    tokio::time::advance(Duration::from_millis(300)).await;
    w.auditor.finish();
    let torn = of(&w, K::TornCut);
    assert_eq!(torn.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(torn[0].stream.h2_stream, Some(3));
    let lost = of(&w, K::Abandoned);
    assert_eq!(lost.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(lost[0].ids, ["3"]);
    assert_eq!(lost[0].stream.h2_stream, Some(3));
    assert!(of(&w, K::PendingCall).is_empty());
    assert_eq!(w.auditor.loss_affected(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cut_stream_resumed_on_a_new_stream_of_the_same_or_another_connection_replays_exactly() {
    for (conn, stream) in [(1u64, 7u64), (2, 1)] {
        let mut w = Wire::new();
        cut_one_of_three(&mut w);
        if conn != 1 {
            h2c(&w, conn);
        }
        w.resume(conn, stream, S, "3-1");
        w.sse_ok(conn, stream);
        w.deliver_h2(
            conn,
            stream,
            &msg("3-r", &result("3", "ok")),
            None,
            CutAction::Reset,
        );
        w.end(conn, stream, true);
        w.auditor.finish();
        let exact = of(&w, K::ReplayExact);
        assert_eq!(exact.len(), 1, "conn {conn}: {:#?}", w.auditor.findings());
        assert_eq!(exact[0].stream.h2_stream, Some(3), "the stream resumed");
        let found = w.kinds();
        assert!(!found.contains(&K::Abandoned), "conn {conn}: {found:?}");
        assert!(!found.contains(&K::ReplayGap), "conn {conn}: {found:?}");
        assert!(!found.contains(&K::CursorAhead), "conn {conn}: {found:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_resume_with_the_torn_events_id_is_cursor_ahead_on_h2_too() {
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    w.sse_ok(1, 1);
    let body = msg("7-1", &progress_of("t7", 1)) + &msg("7-2", &progress_of("t7", 2));
    let first = msg("7-1", &progress_of("t7", 1)).len();
    // Torn inside event 7-2's data, after its id line.
    w.deliver_h2(1, 1, &body, Some(first + 12), CutAction::Reset);
    w.resume(1, 3, S, "7-2");
    w.sse_ok(1, 3);
    w.end(1, 3, true);
    w.auditor.finish();
    let ahead = of(&w, K::CursorAhead);
    assert_eq!(ahead.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(ahead[0].stream.h2_stream, Some(1));
}

#[tokio::test(start_paused = true)]
async fn a_client_cancel_is_recorded_and_judged_as_a_client_that_gave_up() {
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    call_on(&w, 1, 3, "8");
    w.sse_ok(1, 1);
    w.sse_ok(1, 3);
    w.deliver_h2(
        1,
        1,
        &msg("7-1", &progress_of("t7", 1)),
        None,
        CutAction::Reset,
    );
    reset(&w, 1, 1, Direction::Upstream, CANCEL, false);
    answer(&mut w, 1, 3, "8");
    tokio::time::advance(Duration::from_millis(300)).await;
    w.auditor.finish();
    let resets = of(&w, K::StreamReset);
    assert_eq!(resets.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(resets[0].class.as_str(), "info");
    assert_eq!(resets[0].stream.h2_stream, Some(1));
    assert!(
        resets[0]
            .detail
            .contains("RST_STREAM(CANCEL) sent by the client"),
        "{}",
        resets[0].detail
    );
    // As a client that closed its connection: not a cut the proxy made, no loss verdict.
    assert_eq!(w.kinds(), [K::StreamReset]);
}

#[tokio::test(start_paused = true)]
async fn a_client_cancel_of_a_stream_it_has_its_answer_from_is_no_finding() {
    // The result arrived; the client drops the body before `END_STREAM` (hyper, `fetch` and
    // Go send RST_STREAM(CANCEL) then), as a client closes a connection after its response.
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    w.sse_ok(1, 1);
    let body = msg("7-1", &progress_of("t7", 1)) + &msg("7-r", &result("7", "ok"));
    w.deliver_h2(1, 1, &body, None, CutAction::Reset);
    reset(&w, 1, 1, Direction::Upstream, CANCEL, false);
    tokio::time::advance(Duration::from_millis(300)).await;
    w.auditor.finish();
    assert!(w.kinds().is_empty(), "{:#?}", w.auditor.findings());

    // The same cancel with a protocol error code is the client saying the server misbehaved.
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    w.sse_ok(1, 1);
    w.deliver_h2(1, 1, &body, None, CutAction::Reset);
    reset(&w, 1, 1, Direction::Upstream, PROTOCOL_ERROR, false);
    w.auditor.finish();
    assert_eq!(w.kinds(), [K::StreamReset], "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn a_reset_the_proxy_wrote_is_no_stream_reset_finding() {
    let mut w = Wire::new();
    cut_one_of_three(&mut w);
    // The proxy's own RST_STREAM of the cut stream, as the relay reports it.
    reset(&w, 1, 3, Direction::Downstream, CANCEL, true);
    reset(&w, 1, 3, Direction::Upstream, CANCEL, true);
    w.auditor.finish();
    assert!(
        of(&w, K::StreamReset).is_empty(),
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(of(&w, K::TornCut).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_server_reset_is_judged_as_a_server_side_cut() {
    // Never resumed: the call is lost.
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    w.sse_ok(1, 1);
    w.deliver_h2(
        1,
        1,
        &msg("7-1", &progress_of("t7", 1)),
        None,
        CutAction::Reset,
    );
    reset(&w, 1, 1, Direction::Downstream, INTERNAL_ERROR, false);
    tokio::time::advance(Duration::from_millis(200)).await;
    w.auditor.finish();
    let resets = of(&w, K::StreamReset);
    assert_eq!(resets.len(), 1, "{:#?}", w.auditor.findings());
    assert!(
        resets[0]
            .detail
            .contains("RST_STREAM(INTERNAL_ERROR) sent by the server"),
        "{}",
        resets[0].detail
    );
    let lost = of(&w, K::Abandoned);
    assert_eq!(lost.len(), 1, "{:#?}", w.auditor.findings());
    assert!(
        lost[0].detail.contains("the server reset h2 stream 1"),
        "{}",
        lost[0].detail
    );
    assert!(of(&w, K::TornCut).is_empty(), "the proxy tore nothing");

    // Resumed on a new stream: the resume verdicts, no loss.
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    w.sse_ok(1, 1);
    w.deliver_h2(
        1,
        1,
        &msg("7-1", &progress_of("t7", 1)),
        None,
        CutAction::Reset,
    );
    reset(&w, 1, 1, Direction::Downstream, INTERNAL_ERROR, false);
    w.resume(1, 3, S, "7-1");
    w.sse_ok(1, 3);
    w.deliver_h2(
        1,
        3,
        &msg("7-r", &result("7", "ok")),
        None,
        CutAction::Reset,
    );
    w.end(1, 3, true);
    w.auditor.finish();
    assert_eq!(
        of(&w, K::ReplayExact).len(),
        1,
        "{:#?}",
        w.auditor.findings()
    );
    assert!(
        of(&w, K::Abandoned).is_empty(),
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn a_refused_stream_never_resent_is_lost_and_its_resend_is_legitimate() {
    // Never re-sent.
    let w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    reset(&w, 1, 1, Direction::Downstream, REFUSED_STREAM, false);
    w.auditor.finish();
    let lost = of(&w, K::Abandoned);
    assert_eq!(lost.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(lost[0].class.as_str(), "loss");
    assert!(
        lost[0].detail.contains("not processed")
            && lost[0].detail.contains("REFUSED_STREAM")
            && lost[0].detail.contains("never re-sent"),
        "{}",
        lost[0].detail
    );

    // Re-sent on the next stream with the same id, method and params: recovered.
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    reset(&w, 1, 1, Direction::Downstream, REFUSED_STREAM, false);
    call_on(&w, 1, 3, "7");
    w.sse_ok(1, 3);
    answer(&mut w, 1, 3, "7");
    w.auditor.finish();
    let found = w.kinds();
    assert!(found.contains(&K::Reissued), "{found:?}");
    assert!(!found.contains(&K::Abandoned), "{found:?}");
    assert!(!found.contains(&K::DuplicateResponse), "{found:?}");
    assert!(!found.contains(&K::UnprovenResend), "{found:?}");
}

#[tokio::test(start_paused = true)]
async fn a_refused_modern_call_resent_with_its_key_is_not_reexecuted() {
    let mut w = Wire::new();
    list_tools(&mut w);
    h2c(&w, 1);
    let call = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"append","arguments":{{}},"_meta":{{"progressToken":"p"}}}}}}"#
        )
    };
    w.post_keyed(1, 1, None, MODERN, "call-7", &call("7"));
    reset(&w, 1, 1, Direction::Downstream, REFUSED_STREAM, false);
    w.post_keyed(1, 3, None, MODERN, "call-7", &call("8"));
    w.sse_ok(1, 3);
    w.deliver_h2(
        1,
        3,
        &(event(Eol::Lf, None, None, &[&progress_of("p", 1)])
            + &event(Eol::Lf, None, None, &[&result("8", "appended")])),
        None,
        CutAction::Reset,
    );
    w.end(1, 3, true);
    w.auditor.finish();
    let found = w.kinds();
    assert!(found.contains(&K::Reissued), "{found:?}");
    assert!(!found.contains(&K::Reexecuted), "{found:?}");
    assert!(!found.contains(&K::Abandoned), "{found:?}");
}

#[tokio::test(start_paused = true)]
async fn a_started_modern_call_cut_on_its_stream_and_resent_is_reexecuted() {
    let mut w = Wire::new();
    list_tools(&mut w);
    h2c(&w, 1);
    let call = |id: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"append","arguments":{{}},"_meta":{{"progressToken":"p{id}"}}}}}}"#
        )
    };
    w.post_keyed(1, 1, None, MODERN, "call-7", &call("7"));
    w.sse_ok(1, 1);
    let body = event(Eol::Lf, None, None, &[&progress_of("p7", 1)])
        + &event(Eol::Lf, None, None, &[&result("7", "appended")]);
    let first = event(Eol::Lf, None, None, &[&progress_of("p7", 1)]).len();
    w.deliver_h2(1, 1, &body, Some(first + 10), CutAction::Reset);
    w.post_keyed(1, 3, None, MODERN, "call-7", &call("8"));
    w.sse_ok(1, 3);
    w.deliver_h2(
        1,
        3,
        &event(Eol::Lf, None, None, &[&result("8", "appended")]),
        None,
        CutAction::Reset,
    );
    w.end(1, 3, true);
    w.auditor.finish();
    let re = of(&w, K::Reexecuted);
    assert_eq!(re.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(re[0].stream.protocol, WireProtocol::H2c);
}

/// Streams 1, 3, 5 carry calls 1, 3, 5; the server's GOAWAY names last stream 3.
fn goaway_above_one(w: &mut Wire) {
    h2c(w, 1);
    for s in [1u64, 3, 5] {
        call_on(w, 1, s, &s.to_string());
    }
    w.sse_ok(1, 1);
    goaway(w, 1, 3);
    answer(w, 1, 1, "1");
    w.sse_ok(1, 3);
    answer(w, 1, 3, "3");
}

#[tokio::test(start_paused = true)]
async fn goaway_streams_above_its_last_stream_never_resent_are_lost_those_below_complete() {
    let mut w = Wire::new();
    goaway_above_one(&mut w);
    // A stream the client opened before it read the GOAWAY (another tool: not a candidate
    // re-send of call 5).
    w.post(1, 7, S, &call_with_token("77", "fetch", "t77"));
    w.rec(Observation::ConnClosed { conn: 1 });
    w.auditor.finish();
    // Reported in no fixed order (one watch per stream): sorted by stream id.
    let mut lost = of(&w, K::Abandoned);
    lost.sort_by_key(|f| f.stream.seq);
    let ids: Vec<&str> = lost.iter().map(|f| f.ids[0].as_str()).collect();
    assert_eq!(ids, ["5", "77"], "{:#?}", w.auditor.findings());
    for f in &lost {
        assert!(
            f.detail.contains("GOAWAY") && f.detail.contains("not processed"),
            "{}",
            f.detail
        );
    }
    assert_eq!(lost[0].stream.h2_stream, Some(5));
    assert_eq!(lost[1].stream.h2_stream, Some(7));
    assert!(
        of(&w, K::PendingCall).is_empty(),
        "{:#?}",
        w.auditor.findings()
    );
}

#[tokio::test(start_paused = true)]
async fn goaway_stream_resent_on_a_new_connection_is_recovered() {
    let mut w = Wire::new();
    goaway_above_one(&mut w);
    w.rec(Observation::ConnClosed { conn: 1 });
    h2c(&w, 2);
    call_on(&w, 2, 1, "5");
    w.sse_ok(2, 1);
    answer(&mut w, 2, 1, "5");
    w.auditor.finish();
    let found = w.kinds();
    assert!(found.contains(&K::Reissued), "{found:?}");
    assert!(!found.contains(&K::Abandoned), "{found:?}");
    assert!(!found.contains(&K::PendingCall), "{found:?}");
    assert_eq!(w.auditor.loss_affected(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_goaway_the_client_sent_changes_nothing() {
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 5, "5");
    w.rec(Observation::GoAway {
        conn: 1,
        direction: Direction::Upstream,
        last_stream: 0,
        code: NO_ERROR,
        by_proxy: false,
    });
    w.sse_ok(1, 5);
    answer(&mut w, 1, 5, "5");
    w.auditor.finish();
    assert_eq!(w.kinds(), Vec::<K>::new(), "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn a_connection_scoped_cut_on_h2_tears_the_stream_it_names_and_ends_every_stream() {
    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "1");
    call_on(&w, 1, 3, "3");
    w.sse_ok(1, 1);
    w.sse_ok(1, 3);
    w.deliver_h2(
        1,
        1,
        &msg("1-1", &progress_of("t1", 1)),
        None,
        CutAction::Reset,
    );
    w.end(1, 3, false);
    w.rec(Observation::Cut {
        conn: 1,
        direction: Direction::Downstream,
        action: CutAction::Reset,
        point: CutPoint {
            class: Some(tearline::wire::SseClass::MidValue),
            torn_bytes: 9,
            exchange: Some(3),
            h2_stream: None,
            ..CutPoint::default()
        },
    });
    w.rec(Observation::ConnClosed { conn: 1 });
    w.auditor.finish();
    let torn = of(&w, K::TornCut);
    assert_eq!(torn.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(torn[0].stream.h2_stream, Some(3));
    let mut lost: Vec<String> = of(&w, K::Abandoned)
        .into_iter()
        .map(|f| f.ids[0].clone())
        .collect();
    lost.sort();
    assert_eq!(lost, ["1", "3"], "{:#?}", w.auditor.findings());
}

#[tokio::test(start_paused = true)]
async fn a_call_the_proxy_refused_is_lost_unless_resent_and_named_as_the_proxys_refusal() {
    // `refuse_streams`: the relay's RST_STREAM(REFUSED_STREAM) to the client, no `Cut`.
    let w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    reset(&w, 1, 1, Direction::Upstream, CANCEL, true);
    reset(&w, 1, 1, Direction::Downstream, REFUSED_STREAM, true);
    w.auditor.finish();
    let said = of(&w, K::StreamReset);
    assert!(
        said.len() == 1 && said[0].detail.contains("sent by the proxy"),
        "{:#?}",
        w.auditor.findings()
    );
    let lost = of(&w, K::Abandoned);
    assert!(
        lost.len() == 1 && lost[0].detail.contains("not processed: the proxy refused"),
        "{:#?}",
        w.auditor.findings()
    );

    let mut w = Wire::new();
    h2c(&w, 1);
    call_on(&w, 1, 1, "7");
    reset(&w, 1, 1, Direction::Downstream, REFUSED_STREAM, true);
    call_on(&w, 1, 3, "7");
    w.sse_ok(1, 3);
    answer(&mut w, 1, 3, "7");
    w.auditor.finish();
    let found = w.kinds();
    assert!(found.contains(&K::Reissued), "{found:?}");
    assert!(!found.contains(&K::Abandoned), "{found:?}");
}

#[tokio::test(start_paused = true)]
async fn a_refused_stream_code_on_the_proxys_cut_of_an_answered_stream_is_no_refusal() {
    // A stream-scope cut may reset the client's stream with any code: it had its response,
    // its own `Cut` is judged, and the reset says nothing more.
    let mut w = Wire::new();
    cut_one_of_three(&mut w);
    reset(&w, 1, 3, Direction::Downstream, REFUSED_STREAM, true);
    w.auditor.finish();
    assert!(
        of(&w, K::StreamReset).is_empty(),
        "{:#?}",
        w.auditor.findings()
    );
    assert_eq!(of(&w, K::TornCut).len(), 1);
}

/// Call 7 on stream 1 delivers 7-1 … 7-3 and is torn inside 7-4 by a reset — of its stream
/// alone (`RST_STREAM`, `connection_scope` false) or of the whole TCP connection — then the
/// client resumes on another connection from the stale cursor 7-2.
fn stale_resume_after_a_reset(w: &mut Wire, connection_scope: bool) {
    h2c(w, 1);
    call_on(w, 1, 1, "7");
    w.sse_ok(1, 1);
    let whole: String = (1..=3)
        .map(|i| msg(&format!("7-{i}"), &progress_of("t7", i)))
        .collect();
    w.deliver_h2(1, 1, &whole, None, CutAction::Reset);
    let torn = msg("7-4", &progress_of("t7", 4));
    if connection_scope {
        w.end(1, 1, false);
        w.rec(Observation::Cut {
            conn: 1,
            direction: Direction::Downstream,
            action: CutAction::Reset,
            point: CutPoint {
                class: Some(tearline::wire::SseClass::MidValue),
                torn_bytes: 12,
                last_committed_id: Some("7-3".into()),
                exchange: Some(1),
                h2_stream: None,
                ..CutPoint::default()
            },
        });
        w.rec(Observation::ConnClosed { conn: 1 });
    } else {
        w.deliver_h2(1, 1, &torn, Some(12), CutAction::Reset);
    }
    h2c(w, 2);
    w.resume(2, 1, S, "7-2");
    w.sse_ok(2, 1);
    let replay = msg("7-3", &progress_of("t7", 3)) + &torn + &msg("7-r", &result("7", "ok"));
    w.deliver_h2(2, 1, &replay, None, CutAction::Reset);
    w.end(2, 1, true);
    w.auditor.finish();
}

#[tokio::test(start_paused = true)]
async fn a_stale_cursor_after_an_h2_stream_reset_is_cursor_behind_since_rst_stream_discards_nothing()
 {
    let mut w = Wire::new();
    stale_resume_after_a_reset(&mut w, false);
    let behind = of(&w, K::CursorBehind);
    assert_eq!(behind.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(behind[0].stream.h2_stream, Some(1));
    assert_eq!(behind[0].stream.protocol, WireProtocol::H2c);
}

#[tokio::test(start_paused = true)]
async fn the_same_stale_cursor_after_a_connection_reset_on_h2_is_inside_the_unread_window() {
    let mut w = Wire::new();
    stale_resume_after_a_reset(&mut w, true);
    let found = w.kinds();
    assert!(
        !found.contains(&K::CursorBehind),
        "{:#?}",
        w.auditor.findings()
    );
    assert!(found.contains(&K::TornCut), "{found:?}");
}

/// Call 7 on stream 1 delivers 7-1 … 7-3 and call 9 on stream 3 is torn by a reset of the
/// whole connection, which records stream 1's end at its last event as the relay does (its
/// point names stream 1, `with_connection` as given); the client resumes stream 1 on another
/// connection from the stale cursor 7-2.
fn stale_resume_of_the_other_stream(w: &mut Wire, with_connection: bool) {
    h2c(w, 1);
    call_on(w, 1, 1, "7");
    call_on(w, 1, 3, "9");
    w.sse_ok(1, 1);
    w.sse_ok(1, 3);
    let whole: String = (1..=3)
        .map(|i| msg(&format!("7-{i}"), &progress_of("t7", i)))
        .collect();
    w.deliver_h2(1, 1, &whole, None, CutAction::Reset);
    w.deliver_h2(
        1,
        3,
        &msg("9-1", &progress_of("t9", 1)),
        None,
        CutAction::Reset,
    );
    let cut = |point: CutPoint| Observation::Cut {
        conn: 1,
        direction: Direction::Downstream,
        action: CutAction::Reset,
        point,
    };
    w.rec(cut(CutPoint {
        class: Some(tearline::wire::SseClass::Boundary),
        last_committed_id: Some("7-3".into()),
        exchange: Some(1),
        h2_stream: Some(1),
        with_connection,
        ..CutPoint::default()
    }));
    w.end(1, 3, false);
    w.rec(cut(CutPoint {
        class: Some(tearline::wire::SseClass::MidValue),
        torn_bytes: 12,
        last_committed_id: Some("9-1".into()),
        exchange: Some(3),
        h2_stream: None,
        ..CutPoint::default()
    }));
    w.rec(Observation::ConnClosed { conn: 1 });
    h2c(w, 2);
    w.resume(2, 1, S, "7-2");
    w.sse_ok(2, 1);
    let replay = msg("7-3", &progress_of("t7", 3)) + &msg("7-r", &result("7", "ok"));
    w.deliver_h2(2, 1, &replay, None, CutAction::Reset);
    w.end(2, 1, true);
    w.auditor.finish();
}

#[tokio::test(start_paused = true)]
async fn a_stream_a_connection_reset_ended_with_another_keeps_the_unread_window() {
    let mut w = Wire::new();
    stale_resume_of_the_other_stream(&mut w, true);
    assert!(
        !w.kinds().contains(&K::CursorBehind),
        "{:#?}",
        w.auditor.findings()
    );
    // The same point as a stream's own cut (RST_STREAM discards nothing): the cursor is stale.
    let mut w = Wire::new();
    stale_resume_of_the_other_stream(&mut w, false);
    let behind = of(&w, K::CursorBehind);
    assert_eq!(behind.len(), 1, "{:#?}", w.auditor.findings());
    assert_eq!(behind[0].stream.h2_stream, Some(1));
}
