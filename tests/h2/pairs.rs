//! Each client–server pair of real HTTP/2 peers, direct and through the proxy (relaying bytes,
//! and observing): the client's own log must show every stream complete, byte for byte, over
//! HTTP/2, with nothing reset — the same through the proxy as direct — and the server's log
//! must show the requests arrived over HTTP/2. TLS pairs also run through the proxy
//! terminating TLS, where ALPN must give h2 on both sides. Through the proxy relaying bytes (or
//! plaintext between two TLS ends), everything read from one side was delivered to the other
//! once the connection closed (but for a closing record sent after the other side left).

use std::time::Duration;

use serde_json::Value;

use crate::support::certs::Certs;
use crate::support::check::{self, complete_and_exact, events, h2_streams};
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};
use crate::support::route::{self, ALL, Hop, Route, TLS_ALL};

const LIMIT: Duration = Duration::from_secs(20);
const N: u64 = 6;
const SIZE: usize = 3000;

fn ask<'a>(streams: &'a [&'a str]) -> Ask<'a> {
    Ask {
        streams,
        n: N,
        query: format!("interval=10&size={SIZE}"),
        resume: 0,
        timeout_ms: 15_000,
    }
}

/// The most a side may send after its peer left, which the proxy then has no one to give to:
/// one closing record (a TLS 1.3 `close_notify` is 24 bytes on the wire, a `GOAWAY` 17 + its
/// debug data). Which side closes first is a race between the peers, not the proxy's choice.
const CLOSING_TAIL: u64 = 64;

/// After a client finished through a byte-relaying proxy: once its connections closed, every
/// byte read from either side was delivered to the other, but for at most a closing record
/// sent after the other side had left (the events themselves are checked byte for byte in the
/// client's own log).
async fn relayed_every_byte(hop: &Hop, what: &str) {
    let Some(proxy) = &hop.proxy else { return };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let s = proxy.stats().snapshot();
        if s.connections_open == 0 && s.connections_total > 0 {
            assert!(
                s.received_upstream > 0 && s.received_downstream > 0,
                "{what}: {s:?}"
            );
            for (dir, read, delivered) in [
                ("client to server", s.received_upstream, s.bytes_upstream),
                (
                    "server to client",
                    s.received_downstream,
                    s.bytes_downstream,
                ),
            ] {
                assert!(
                    delivered <= read && read - delivered <= CLOSING_TAIL,
                    "{what}: {dir}: {read} bytes read, {delivered} delivered"
                );
            }
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: the proxy's connections did not close: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `client` (made for the hop's URL) on each route to `server` and checks its log.
async fn on_every_route(
    server: &Server,
    certs: Option<&Certs>,
    streams: &[&str],
    client: impl Fn(&str) -> (String, std::process::Command),
) {
    let (scheme, routes) = routes(certs);
    for &r in routes {
        let hop = route::open(r, server.addr(), certs, |_| {}).await;
        let (name, cmd) = client(&hop.url(scheme));
        let what = format!("{name} via {r:?}");
        let log = Peer::spawn(&name, cmd).succeed(LIMIT).await;
        complete_and_exact(&what, &log, streams, N, SIZE);
        if matches!(r, Route::Bytes | Route::Terminated) {
            relayed_every_byte(&hop, &what).await;
        }
        if matches!(r, Route::Observed | Route::Terminated) {
            assert!(
                !hop.observations().is_empty(),
                "{what}: the observing proxy recorded nothing"
            );
        }
    }
}

/// The scheme and the routes of a pair: https and [`TLS_ALL`] with certificates, else http
/// and [`ALL`].
fn routes(certs: Option<&Certs>) -> (&'static str, &'static [Route]) {
    match certs {
        Some(_) => ("https", &TLS_ALL),
        None => ("http", &ALL),
    }
}

fn node_session_alpn(log: &[Value]) -> Vec<String> {
    events(log, "session")
        .iter()
        .map(|v| v["alpn"].as_str().unwrap_or("none").to_owned())
        .collect()
}

#[tokio::test]
async fn node_http2_client_multiplexes_two_sse_streams_over_h2c_direct_and_through_the_proxy() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    for r in ALL {
        let hop = route::open(r, server.addr(), None, |_| {}).await;
        let cmd = launch::node_client(&hop.url("http"), None, &ask(&["a", "b"]));
        let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
        let what = format!("node client over h2c via {r:?}");
        complete_and_exact(&what, &log, &["a", "b"], N, SIZE);
        assert_eq!(node_session_alpn(&log), ["h2c"], "{what}: one h2c session");
        assert_eq!(h2_streams(&log), [1, 3], "{what}: two streams on it");
        if matches!(r, Route::Bytes | Route::Terminated) {
            relayed_every_byte(&hop, &what).await;
        }
    }
    let slog = server.peer.log();
    assert!(
        node_session_alpn(&slog).iter().all(|a| a == "h2c"),
        "{slog:?}"
    );
    assert_eq!(
        events(&slog, "request").len(),
        6,
        "two requests per route: {slog:?}"
    );
}

#[tokio::test]
async fn node_http2_client_multiplexes_two_sse_streams_over_tls_alpn_h2_direct_and_through_the_proxy()
 {
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    for &r in &TLS_ALL {
        let hop = route::open(r, server.addr(), Some(&certs), |_| {}).await;
        let cmd = launch::node_client(&hop.url("https"), Some(&certs), &ask(&["a", "b"]));
        let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
        let what = format!("node client over TLS via {r:?}");
        complete_and_exact(&what, &log, &["a", "b"], N, SIZE);
        assert_eq!(node_session_alpn(&log), ["h2"], "{what}: ALPN h2");
        assert_eq!(
            h2_streams(&log),
            [1, 3],
            "{what}: two streams on one session"
        );
        if matches!(r, Route::Bytes | Route::Terminated) {
            relayed_every_byte(&hop, &what).await;
        }
    }
    let slog = server.peer.log();
    assert!(
        node_session_alpn(&slog).iter().all(|a| a == "h2"),
        "{slog:?}"
    );
}

#[tokio::test]
async fn httpx_http2_client_follows_two_streams_over_h2c_prior_knowledge_through_the_proxy() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    on_every_route(&server, None, &["a", "b"], |url| {
        (
            "py-client".into(),
            launch::py_client(url, None, &ask(&["a", "b"])),
        )
    })
    .await;
    let slog = server.peer.log();
    assert!(
        node_session_alpn(&slog).iter().all(|a| a == "h2c"),
        "{slog:?}"
    );
}

#[tokio::test]
async fn httpx_http2_client_negotiates_h2_with_the_go_server_and_multiplexes_through_the_proxy() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    for &r in &TLS_ALL {
        let hop = route::open(r, server.addr(), Some(&certs), |_| {}).await;
        let cmd = launch::py_client(&hop.url("https"), Some(&certs), &ask(&["a", "b"]));
        let log = Peer::spawn("py-client", cmd).succeed(LIMIT).await;
        let what = format!("httpx against Go via {r:?}");
        complete_and_exact(&what, &log, &["a", "b"], N, SIZE);
        assert!(
            events(&log, "response")
                .iter()
                .all(|v| v["http_version"] == "HTTP/2"),
            "{what}: {log:?}"
        );
        assert_eq!(
            h2_streams(&log),
            [1, 3],
            "{what}: two streams on one connection"
        );
        if matches!(r, Route::Bytes | Route::Terminated) {
            relayed_every_byte(&hop, &what).await;
        }
    }
    go_server_saw_only_h2(&server);
}

fn go_server_saw_only_h2(server: &Server) {
    let slog = server.peer.log();
    let reqs = events(&slog, "request");
    assert!(!reqs.is_empty(), "{slog:?}");
    assert!(
        reqs.iter().all(|v| v["proto"] == "HTTP/2.0"),
        "the Go server saw a request that was not HTTP/2: {slog:?}"
    );
}

#[tokio::test]
async fn go_net_http_client_and_server_speak_h2_over_tls_through_the_proxy() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    on_every_route(&server, Some(&certs), &["a", "b"], |url| {
        (
            "go-client".into(),
            launch::go_client(url, &certs, &ask(&["a", "b"])),
        )
    })
    .await;
    go_server_saw_only_h2(&server);
}

#[tokio::test]
async fn go_net_http_client_negotiates_h2_with_the_node_server_through_the_proxy() {
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    for &r in &TLS_ALL {
        let hop = route::open(r, server.addr(), Some(&certs), |_| {}).await;
        let cmd = launch::go_client(&hop.url("https"), &certs, &ask(&["a"]));
        let log = Peer::spawn("go-client", cmd).succeed(LIMIT).await;
        let what = format!("Go client against Node via {r:?}");
        complete_and_exact(&what, &log, &["a"], N, SIZE);
        assert!(
            events(&log, "response")
                .iter()
                .all(|v| v["proto"] == "HTTP/2.0"),
            "{what}: {log:?}"
        );
    }
}

/// curl's body, byte for byte, and its own report of the HTTP version and exit code.
async fn curl_on_every_route(server: &Server, certs: Option<&Certs>) {
    // Events of 40 KB: each spans several DATA frames and five outgrow the initial 64 KiB
    // flow-control window, so WINDOW_UPDATEs must cross the proxy too.
    let (n, size) = (5, 40_000);
    let (scheme, routes) = routes(certs);
    for &r in routes {
        let hop = route::open(r, server.addr(), certs, |_| {}).await;
        let out = tempfile::NamedTempFile::new().unwrap();
        let url = format!(
            "{}/sse?stream=c&n={n}&interval=5&size={size}",
            hop.url(scheme)
        );
        let log = Peer::spawn("curl", launch::curl(&url, certs, out.path(), 15))
            .succeed(LIMIT)
            .await;
        let what = format!("curl {scheme} via {r:?}");
        let report = &log[0];
        assert_eq!(report["http_version"], "2", "{what}: {report}");
        assert_eq!(report["exitcode"], 0, "{what}: {report}");
        assert_eq!(report["response_code"], 200, "{what}: {report}");
        let body = std::fs::read_to_string(out.path()).unwrap();
        assert!(
            body == check::body("c", n, size),
            "{what}: the body is not the server's, byte for byte ({} bytes)",
            body.len()
        );
        if matches!(r, Route::Bytes | Route::Terminated) {
            relayed_every_byte(&hop, &what).await;
        }
    }
}

#[tokio::test]
async fn curl_http2_prior_knowledge_gets_the_body_byte_for_byte_through_the_proxy() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    curl_on_every_route(&server, None).await;
}

#[tokio::test]
async fn curl_http2_over_tls_gets_the_go_servers_body_byte_for_byte_through_the_proxy() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    curl_on_every_route(&server, Some(&certs)).await;
    go_server_saw_only_h2(&server);
}

#[tokio::test]
async fn chromium_eventsource_over_https_follows_two_streams_on_h2_through_the_proxy() {
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    // Not observing without terminating: Chromium's start-up is the slowest step here.
    for r in [Route::Direct, Route::Bytes, Route::Terminated] {
        let hop = route::open(r, server.addr(), Some(&certs), |_| {}).await;
        let url = format!(
            "{}/page?streams=a,b&n={N}&interval=10&size={SIZE}",
            hop.url("https")
        );
        let log = Peer::spawn("chromium", launch::chromium(&url, 15_000))
            .succeed(LIMIT)
            .await;
        let what = format!("Chromium via {r:?}");
        let page = events(&log, "page");
        assert_eq!(page.len(), 1, "{what}: {log:?}");
        assert_eq!(page[0]["protocol"], "h2", "{what}: the page came over h2");
        for s in ["a", "b"] {
            let want: Vec<(String, String)> = (1..=N)
                .map(|k| (k.to_string(), check::data(s, k, SIZE)))
                .collect();
            assert_eq!(check::messages(&log, s), want, "{what}: stream {s}");
        }
        assert!(events(&log, "error").is_empty(), "{what}: {log:?}");
        assert_eq!(events(&log, "done").len(), 1, "{what}: {log:?}");
        if r != Route::Direct {
            relayed_every_byte(&hop, &what).await;
        }
    }
    let slog = server.peer.log();
    assert!(
        node_session_alpn(&slog).iter().all(|a| a == "h2"),
        "{slog:?}"
    );
}
