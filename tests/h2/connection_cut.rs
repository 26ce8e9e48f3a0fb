//! `sse_cut` with `scope = "connection"` on HTTP/2, through the stream relay, with Node's own
//! `http2` client and server over h2c: the cut falls mid-value in event 3 of stream `a` while
//! stream `b` on the same connection is held mid-event (the server writes each of b's events
//! in two frames a second apart), so the one cut tears both. The client's own log must show
//! both streams closed with their session, a new session, and each stream resumed on it with
//! its own `Last-Event-ID` (2 for `a`, 1 for `b`) and then exact; the proxy records one cut per
//! stream (`a`'s naming the connection, `b`'s naming its h2 stream); and the audit judges each:
//! one `torn-cut` per stream (the event it tore) and each resume's `replay-exact`, nothing
//! else. And where `b` stands between two events at the cut: `b` is cut and resumed just the
//! same, but no `torn-cut` names it.
//!
//! Why paced apart: a stream is torn only if its event was in flight when the connection was
//! cut; b's events are held open ~1 s each and a's cut comes ~0.5 s into b's second event, so
//! the tear of b does not depend on the scheduler.

use std::time::Duration;

use tearline::audit::FindingKind;
use tearline::vocab::WireProtocol;
use tearline::wire::{Observation, SseClass};

use crate::stream_cut::shipped_cut;
use crate::support::check::{self, events, show};
use crate::support::judged;
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};
use crate::support::route::{self, Route};

const N: u64 = 3;
const SIZE: usize = 200;

/// Runs the pair with b paced by `b_query`, cut when a's event 3 is half sent; `b_torn`: b's
/// event 2 is in flight then (else b stands between its events 1 and 2).
async fn connection_cut(what: &str, b_query: &str, b_torn: bool) {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let hop = route::open_with_faults(
        Route::Observed,
        server.addr(),
        None,
        |_| {},
        shipped_cut("/sse?stream=a*", "scope = \"connection\""),
    )
    .await;
    // a: events 40 ms apart after 1.4 s (event 3 torn at ~1.48 s).
    let ask = Ask {
        streams: &["a", "b"],
        n: N,
        query: format!("first_delay=1400&interval=10&size={SIZE}&split=30"),
        resume: 2,
        timeout_ms: 20_000,
    };
    let mut cmd = launch::node_client(&hop.url("http"), None, &ask);
    cmd.arg("--query-for")
        .arg(format!("b:size={SIZE}&{b_query}"));
    let log = Peer::spawn("node-client", cmd)
        .succeed(Duration::from_secs(30))
        .await;
    let closed = events(&log, "closed_with_session");
    assert!(
        closed.len() == 2
            && closed.iter().any(|v| v["stream"] == "a")
            && closed.iter().any(|v| v["stream"] == "b")
            && events(&log, "reset").is_empty(),
        "{what}: both streams ended with their session, no RST_STREAM:\n{}",
        show(&log)
    );
    assert_eq!(
        events(&log, "session").len(),
        2,
        "{what}: a new session after the cut:\n{}",
        show(&log)
    );
    let resumed = |s: &str, last: &str| {
        events(&log, "resume")
            .iter()
            .any(|v| v["stream"] == s && v["last_event_id"] == last)
    };
    assert!(
        resumed("a", "2") && resumed("b", "1") && events(&log, "resume").len() == 2,
        "{what}: a resumed after 2, b after 1, once each:\n{}",
        show(&log)
    );
    check::each_once(what, &log, &["a", "b"], N, SIZE);
    let obs = hop.observations();
    assert!(
        obs.iter().any(|o| matches!(
            o,
            Observation::Protocol {
                protocol: WireProtocol::H2c,
                ..
            }
        )),
        "{what}: the relay carried it as h2c: {obs:?}"
    );
    let cuts: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Cut { point, .. } => Some(point.clone()),
            _ => None,
        })
        .collect();
    let b_class = if b_torn {
        SseClass::MidValue
    } else {
        SseClass::Boundary
    };
    assert!(
        cuts.len() == 2
            && cuts[0].h2_stream == Some(3)
            && cuts[0].class == Some(b_class)
            && cuts[0].event_index == Some(1)
            && cuts[1].h2_stream.is_none()
            && cuts[1].exchange == Some(1)
            && cuts[1].class == Some(SseClass::MidValue)
            && cuts[1].event_index == Some(2),
        "{what}: b's stream cut ({b_class:?}) after its event 1, then the connection's, in a's event 3: {cuts:#?}"
    );
    let findings = judged::settled(&hop, Duration::from_secs(10)).await;
    let (want, mut want_torn): (&[&str], _) = if b_torn {
        (
            &["torn-cut", "torn-cut", "replay-exact", "replay-exact"],
            vec![(Some(3), vec!["2".to_owned(), "1".to_owned()])],
        )
    } else {
        (&["torn-cut", "replay-exact", "replay-exact"], vec![])
    };
    want_torn.push((Some(1), vec!["3".to_owned(), "2".to_owned()]));
    want_torn.sort();
    judged::exactly(what, &findings, want);
    let mut torn: Vec<(Option<u64>, Vec<String>)> = judged::of(&findings, FindingKind::TornCut)
        .into_iter()
        .map(|f| (f.stream.h2_stream, f.ids.clone()))
        .collect();
    torn.sort();
    assert_eq!(
        torn, want_torn,
        "{what}: one torn-cut per stream torn, naming the torn event and the last committed: {findings:#?}"
    );
    let mut exact: Vec<Option<u64>> = judged::of(&findings, FindingKind::ReplayExact)
        .into_iter()
        .map(|f| f.stream.h2_stream)
        .collect();
    exact.sort();
    assert_eq!(exact, [Some(1), Some(3)], "{what}: {findings:#?}");
}

#[tokio::test]
async fn a_connection_scope_cut_tears_every_stream_in_flight_and_each_is_resumed_and_judged() {
    // b: each event's halves 1 s apart (event 2 in flight from ~1.01 s to ~2.01 s).
    connection_cut(
        "node client over h2c, sse_cut scope = connection, b mid-event",
        "interval=10&split=1000",
        true,
    )
    .await;
}

#[tokio::test]
async fn a_connection_scope_cut_tears_no_event_of_a_stream_standing_between_events() {
    // b: whole events at ~1 s and ~2 s (between events 1 and 2 at the cut, ~1.48 s).
    connection_cut(
        "node client over h2c, sse_cut scope = connection, b between events",
        "first_delay=1000&interval=1000",
        false,
    )
    .await;
}
