//! A stream cut mid-event between real peers, through the proxy's stream relay: event 3 of SSE
//! stream `a` is torn inside its data value and the h2 stream is reset (`RST_STREAM(CANCEL)` to
//! both ends, see `support::cut`). Each client's own log must show the reset on that stream
//! only, with its code; the sibling stream `b` on the same connection complete and exact; and
//! a client that resumes (Node `http2`, httpx, Go `net/http` by their peer programs, Chromium's
//! EventSource by itself) resuming with `Last-Event-ID: 2` and getting events 3.. exactly once
//! — the torn event never dispatched. curl, which does not resume, reports the reset with its
//! code and keeps the two whole events. The server's log shows the reset (or the cancelled
//! request) and the resume; the proxy records its own `RST_STREAM`.

use std::time::Duration;

use serde_json::Value;
use tearline::vocab::{Direction, WireProtocol};
use tearline::wire::Observation;
use tearline::wire::h2::ErrorCode;

use crate::support::certs::Certs;
use crate::support::check::{self, events, messages};
use crate::support::cut::TearEvent;
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};
use crate::support::route::{self, Hop, Route};

const LIMIT: Duration = Duration::from_secs(25);
const N: u64 = 6;
const SIZE: usize = 200;

/// Events 40 ms apart, each written in two frames 30 ms apart.
fn query() -> String {
    format!("interval=10&size={SIZE}&split=30")
}

fn ask<'a>(streams: &'a [&'a str]) -> Ask<'a> {
    Ask {
        streams,
        n: N,
        query: query(),
        resume: 2,
        timeout_ms: 15_000,
    }
}

fn show(log: &[Value]) -> String {
    log.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A proxy on `route` to `server` tearing event 3 of stream `a`.
async fn tearing(
    route: Route,
    server: &Server,
    certs: Option<&Certs>,
) -> (Hop, std::sync::Arc<TearEvent>) {
    let tear = TearEvent::new("a", 3, ErrorCode::CANCEL);
    let hop =
        route::open_with_faults(route, server.addr(), certs, |_| {}, vec![tear.clone()]).await;
    (hop, tear)
}

/// The client's log: one reset, on stream `a`, with CANCEL; `b` untouched and exact; `a`
/// resumed after event 2 and exact (each event once, the torn one never dispatched).
fn only_a_reset_and_resumed(what: &str, log: &[Value]) {
    let resets = events(log, "reset");
    assert!(
        resets.len() == 1 && resets[0]["stream"] == "a" && resets[0]["code"] == "CANCEL",
        "{what}: one RST_STREAM(CANCEL), on stream a; the client logged:\n{}",
        show(log)
    );
    if let (Some(id), Some(first)) = (
        resets[0]["h2_stream"].as_u64(),
        events(log, "response")
            .iter()
            .find(|v| v["stream"] == "a")
            .and_then(|v| v["h2_stream"].as_u64()),
    ) {
        assert_eq!(id, first, "{what}: the reset named a's first h2 stream");
    }
    let resume = events(log, "resume");
    assert!(
        !resume.is_empty() && resume[0]["stream"] == "a" && resume[0]["last_event_id"] == "2",
        "{what}: a resumed with Last-Event-ID 2:\n{}",
        show(log)
    );
    assert!(
        resume.iter().all(|v| v["stream"] == "a"),
        "{what}: b was never resumed:\n{}",
        show(log)
    );
    for s in ["a", "b"] {
        let want: Vec<(String, String)> = (1..=N)
            .map(|k| (k.to_string(), check::data(s, k, SIZE)))
            .collect();
        assert!(
            messages(log, s) == want,
            "{what}: stream {s} should carry events 1..={N} once each; the client logged:\n{}",
            show(log)
        );
    }
    let done = events(log, "done");
    assert!(
        done.len() == 1 && done[0]["complete"] == true,
        "{what}: not complete:\n{}",
        show(log)
    );
}

/// The proxy recorded its own RST_STREAM(CANCEL) to the client on the connection it announced
/// as `protocol`.
fn proxy_recorded_its_reset(what: &str, hop: &Hop, protocol: WireProtocol) {
    let obs = hop.observations();
    assert!(
        obs.iter()
            .any(|o| matches!(o, Observation::Protocol { protocol: p, .. } if *p == protocol)),
        "{what}: the proxy did not announce {protocol:?}: {obs:?}"
    );
    assert!(
        obs.iter().any(|o| matches!(
            o,
            Observation::StreamReset {
                direction: Direction::Downstream,
                code: 8,
                by_proxy: true,
                ..
            }
        )),
        "{what}: no RST_STREAM(CANCEL) by the proxy recorded: {obs:?}"
    );
}

/// The Node server's log: its first stream of `a` was reset with CANCEL, and `a` was asked
/// again with Last-Event-ID 2.
fn node_server_saw_reset_and_resume(what: &str, server: &Server) {
    let slog = server.peer.log();
    let first_a = events(&slog, "request")
        .into_iter()
        .find(|v| v["stream"] == "a")
        .and_then(|v| v["h2_stream"].as_u64());
    assert!(
        events(&slog, "reset").iter().any(|v| v["stream"] == "a"
            && v["code"] == "CANCEL"
            && v["h2_stream"].as_u64() == first_a),
        "{what}: the server's stream of a was not reset with CANCEL:\n{}",
        show(&slog)
    );
    assert!(
        events(&slog, "reset").iter().all(|v| v["stream"] != "b"),
        "{what}: b was reset at the server:\n{}",
        show(&slog)
    );
    resumed_at_server(what, &slog);
}

fn resumed_at_server(what: &str, slog: &[Value]) {
    assert!(
        events(slog, "request")
            .iter()
            .any(|v| v["stream"] == "a" && v["last_event_id"] == "2"),
        "{what}: the server never got a's resume with Last-Event-ID 2:\n{}",
        show(slog)
    );
}

#[tokio::test]
async fn a_stream_cut_mid_event_resets_only_that_stream_and_the_node_client_resumes_on_its_session()
{
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, tear) = tearing(Route::Observed, &server, None).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask(&["a", "b"]));
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client over h2c";
    assert!(tear.fired(), "{what}: the cut never fired:\n{}", show(&log));
    only_a_reset_and_resumed(what, &log);
    assert_eq!(
        events(&log, "session").len(),
        1,
        "{what}: one session throughout"
    );
    assert!(
        events(&log, "reconnect").is_empty(),
        "{what}: {}",
        show(&log)
    );
    proxy_recorded_its_reset(what, &hop, WireProtocol::H2c);
    node_server_saw_reset_and_resume(what, &server);
}

#[tokio::test]
async fn a_stream_cut_mid_event_shows_in_httpx_as_that_streams_reset_and_it_resumes() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, tear) = tearing(Route::Observed, &server, None).await;
    let cmd = launch::py_client(&hop.url("http"), None, &ask(&["a", "b"]));
    let log = Peer::spawn("py-client", cmd).succeed(LIMIT).await;
    let what = "httpx over h2c";
    assert!(tear.fired(), "{what}: the cut never fired:\n{}", show(&log));
    only_a_reset_and_resumed(what, &log);
    proxy_recorded_its_reset(what, &hop, WireProtocol::H2c);
    node_server_saw_reset_and_resume(what, &server);
}

#[tokio::test]
async fn a_stream_cut_mid_event_over_tls_shows_in_go_net_http_as_that_streams_reset() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    let (hop, tear) = tearing(Route::Terminated, &server, Some(&certs)).await;
    let cmd = launch::go_client(&hop.url("https"), &certs, &ask(&["a", "b"]));
    let log = Peer::spawn("go-client", cmd).succeed(LIMIT).await;
    let what = "Go client over TLS (terminated)";
    assert!(tear.fired(), "{what}: the cut never fired:\n{}", show(&log));
    only_a_reset_and_resumed(what, &log);
    proxy_recorded_its_reset(what, &hop, WireProtocol::H2);
    let slog = server.peer.log();
    assert!(
        events(&slog, "cancelled")
            .iter()
            .any(|v| v["stream"] == "a")
            && events(&slog, "cancelled")
                .iter()
                .all(|v| v["stream"] != "b"),
        "{what}: the Go server's handler of a, and only a, saw its request cancelled:\n{}",
        show(&slog)
    );
    resumed_at_server(what, &slog);
}

#[tokio::test]
async fn curl_reports_the_stream_cut_as_a_cancel_and_keeps_the_events_before_it() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (hop, tear) = tearing(Route::Observed, &server, None).await;
    let out = tempfile::NamedTempFile::new().unwrap();
    let url = format!("{}/sse?stream=a&n={N}&{}", hop.url("http"), query());
    let peer = Peer::spawn("curl", launch::curl(&url, None, out.path(), 15));
    let (code, log) = peer.finish(LIMIT).await;
    let what = "curl --http2-prior-knowledge";
    assert!(tear.fired(), "{what}: the cut never fired: {log:?}");
    // curl: 92 = CURLE_HTTP2_STREAM, "stream N was not closed cleanly: CANCEL (err 8)".
    assert_eq!(code, Some(92), "{what}: {log:?}");
    let report = &log[0];
    assert_eq!(report["exitcode"], 92, "{what}: {report}");
    assert!(
        report["errormsg"]
            .as_str()
            .is_some_and(|m| m.contains("CANCEL")),
        "{what}: curl's error names CANCEL: {report}"
    );
    let body = std::fs::read_to_string(out.path()).unwrap();
    let two = check::body("a", 2, SIZE);
    let third = format!("id: 3\ndata: {}", check::data("a", 3, SIZE));
    let half = third.find("\"pad\":\"").unwrap() + 7 + SIZE / 2;
    // Events 1 and 2 whole, then at most the half of event 3 the proxy forwarded before the
    // reset (curl 7.88 with nghttp2 1.52 drops it: the RST_STREAM came in the same read).
    let rest = body.strip_prefix(&two);
    assert!(
        rest.is_some_and(|r| third[..half].starts_with(r)),
        "{what}: curl kept events 1 and 2 byte for byte and nothing past event 3's first half; got {} bytes:\n{body}",
        body.len()
    );
    proxy_recorded_its_reset(what, &hop, WireProtocol::H2c);
}

#[tokio::test]
async fn chromium_eventsource_reconnects_a_cut_stream_with_last_event_id_and_its_sibling_flows_on()
{
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    let (hop, tear) = tearing(Route::Terminated, &server, Some(&certs)).await;
    let url = format!(
        "{}/page?streams=a,b&n={N}&{}&retry=100",
        hop.url("https"),
        query()
    );
    let log = Peer::spawn("chromium", launch::chromium(&url, 20_000))
        .succeed(LIMIT)
        .await;
    let what = "Chromium EventSource over TLS (terminated)";
    assert!(tear.fired(), "{what}: the cut never fired:\n{}", show(&log));
    assert_eq!(events(&log, "page")[0]["protocol"], "h2", "{what}");
    let errors = events(&log, "error");
    assert!(
        !errors.is_empty() && errors.iter().all(|v| v["stream"] == "a"),
        "{what}: the EventSource of a, and only a, saw the error:\n{}",
        show(&log)
    );
    for s in ["a", "b"] {
        let want: Vec<(String, String)> = (1..=N)
            .map(|k| (k.to_string(), check::data(s, k, SIZE)))
            .collect();
        assert!(
            messages(&log, s) == want,
            "{what}: stream {s} should carry events 1..={N} once each:\n{}",
            show(&log)
        );
    }
    proxy_recorded_its_reset(what, &hop, WireProtocol::H2);
    node_server_saw_reset_and_resume(what, &server);
}

/// The shipped `sse_cut` itself (no test fault): `at = "mid-value"` in event 3 (index 2) of the
/// first leg of stream `a`, `action = "reset"`, on an h2c connection. The relay positions the
/// cut from the h2 observer's SSE positions inside the stream's `DATA` bodies; the Node client
/// sees only stream `a` reset, resumes it with `Last-Event-ID: 2`, and `b` flows on exactly.
#[tokio::test]
async fn the_shipped_sse_cut_tears_one_h2_stream_mid_value_and_the_node_client_resumes_it() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let cfg: tearline::fault::sse_cut::SseCutConfig = toml::from_str(
        "at = \"mid-value\"\nleg = \"first\"\nevents = [2, 2]\npath = \"/sse?stream=a*\"\naction = \"reset\"",
    )
    .expect("sse_cut config");
    let cut = tearline::fault::named("cut", tearline::fault::sse_cut::factory(cfg));
    let hop =
        route::open_with_faults(Route::Observed, server.addr(), None, |_| {}, vec![cut]).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask(&["a", "b"]));
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client over h2c, sse_cut mid-value";
    only_a_reset_and_resumed(what, &log);
    proxy_recorded_its_reset(what, &hop, WireProtocol::H2c);
    let obs = hop.observations();
    let cuts: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Cut { point, .. } => Some(point.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(cuts.len(), 1, "{what}: one cut: {cuts:?}");
    assert_eq!(
        cuts[0].class,
        Some(tearline::wire::SseClass::MidValue),
        "{what}: {cuts:?}"
    );
    assert!(
        cuts[0].h2_stream.is_some() && cuts[0].h2_stream == cuts[0].exchange,
        "{what}: the cut names its h2 stream: {cuts:?}"
    );
    assert_eq!(cuts[0].event_index, Some(2), "{what}: {cuts:?}");
    node_server_saw_reset_and_resume(what, &server);
}
