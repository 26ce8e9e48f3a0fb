//! The HTTP/2 fault kinds a gateway's failures are made of, between real peers through the
//! proxy, each judged by the peers' own logs:
//!
//! - `goaway` (graceful, `NO_ERROR`, then the close after a drain): the Node client logs the
//!   GOAWAY with its code and last stream id, its session ends, and it reconnects and resumes
//!   both streams with `Last-Event-ID` — complete, each event once.
//! - `hold_headers` (until the first `DATA`): a server that answers with headers and waits
//!   before its first event; direct, the client has its response long before the first event,
//!   through the hold they arrive together — the buffering hop that leaves an SSE client with
//!   no response until data flows.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tearline::fault::FaultFactory;
use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};
use tearline::vocab::Direction;
use tearline::wire::Observation;

use crate::support::check::{self, events, messages};
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};
use crate::support::route::{self, Route};

const LIMIT: Duration = Duration::from_secs(25);

/// A fault as a profile would define it.
fn fault(pairs: &[(&str, toml::Value)]) -> Arc<dyn FaultFactory> {
    let def = FaultDef::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())));
    match build(&def) {
        Ok(Built::Conn(f)) => f,
        other => panic!("expected a connection fault, got {other:?}"),
    }
}

fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

fn i(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

fn show(log: &[Value]) -> String {
    log.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_gateway_goaway_makes_the_node_client_reconnect_and_resume_both_streams() {
    let (n, size) = (12u64, 50usize);
    let server = Server::start("node-server", launch::node_server(None)).await;
    let goaway = fault(&[
        ("kind", s("goaway")),
        ("to", s("client")),
        ("after_ms", i(250)),
        ("code", s("no_error")),
        ("drain_ms", i(150)),
    ]);
    let hop =
        route::open_with_faults(Route::Observed, server.addr(), None, |_| {}, vec![goaway]).await;
    let ask = Ask {
        streams: &["a", "b"],
        n,
        query: format!("interval=60&size={size}"),
        resume: 3,
        timeout_ms: 15_000,
    };
    let cmd = launch::node_client(&hop.url("http"), None, &ask);
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client after a GOAWAY(NO_ERROR)";
    let goaways = events(&log, "goaway");
    assert!(
        !goaways.is_empty() && goaways[0]["code"] == "NO_ERROR" && goaways[0]["last_stream"] == 3,
        "{what}: the client logged GOAWAY(NO_ERROR, last stream 3):\n{}",
        show(&log)
    );
    assert!(
        !events(&log, "reconnect").is_empty() && events(&log, "session").len() >= 2,
        "{what}: the client opened a new session:\n{}",
        show(&log)
    );
    for st in ["a", "b"] {
        let want: Vec<(String, String)> = (1..=n)
            .map(|k| (k.to_string(), check::data(st, k, size)))
            .collect();
        assert!(
            messages(&log, st) == want,
            "{what}: stream {st} complete, each event once:\n{}",
            show(&log)
        );
        assert!(
            events(&log, "resume").iter().any(|v| v["stream"] == st),
            "{what}: {st} resumed with Last-Event-ID:\n{}",
            show(&log)
        );
    }
    assert!(
        events(&log, "reset").is_empty(),
        "{what}: no RST_STREAM:\n{}",
        show(&log)
    );
    let obs = hop.observations();
    assert!(
        obs.iter().any(|o| matches!(
            o,
            Observation::GoAway {
                direction: Direction::Downstream,
                code: 0,
                by_proxy: true,
                last_stream: 3,
                ..
            }
        )),
        "{what}: the proxy recorded its GOAWAY: {obs:?}"
    );
    let slog = server.peer.log();
    assert!(
        events(&slog, "request")
            .iter()
            .filter(|v| v["last_event_id"] != "")
            .count()
            >= 2,
        "{what}: the server got both resumes:\n{}",
        show(&slog)
    );
}

/// The time from the client's response to its first event on stream `a`.
fn headers_to_first_event(log: &[Value]) -> i64 {
    let t = |ev: &str| {
        events(log, ev)
            .into_iter()
            .find(|v| v["stream"] == "a")
            .and_then(|v| v["t_ms"].as_i64())
            .unwrap_or_else(|| panic!("no {ev} on a: {}", show(log)))
    };
    t("message") - t("response")
}

#[tokio::test]
async fn held_headers_reach_the_node_client_only_with_the_first_event() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let ask = Ask {
        streams: &["a"],
        n: 2,
        // The server answers at once and waits 800 ms before its first event.
        query: "first_delay=800&interval=10".into(),
        resume: 0,
        timeout_ms: 15_000,
    };
    let direct = route::open(Route::Direct, server.addr(), None, |_| {}).await;
    let cmd = launch::node_client(&direct.url("http"), None, &ask);
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let gap = headers_to_first_event(&log);
    assert!(
        gap >= 500,
        "direct, the response came {gap} ms before the first event (want ≥ 500):\n{}",
        show(&log)
    );

    let hold = fault(&[
        ("kind", s("hold_headers")),
        ("until", s("first-data")),
        ("only_sse", toml::Value::Boolean(false)),
    ]);
    let hop =
        route::open_with_faults(Route::Observed, server.addr(), None, |_| {}, vec![hold]).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask);
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let gap = headers_to_first_event(&log);
    assert!(
        gap < 300,
        "held, the response should reach the client with its first event, not {gap} ms before:\n{}",
        show(&log)
    );
    let resp = events(&log, "response")[0]["t_ms"].as_i64().unwrap();
    let session = events(&log, "session")[0]["t_ms"].as_i64().unwrap();
    assert!(
        resp - session >= 600,
        "held, the response came {} ms after the session opened (the server waited 800):\n{}",
        resp - session,
        show(&log)
    );
}
