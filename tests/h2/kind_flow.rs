//! `flow_stall` between real peers through the proxy: the receiver's `WINDOW_UPDATE`s withheld
//! for a while, so the sender's window runs dry. The stall shows only once the sender has spent
//! the window the receiver granted, so which peers show it depends on their windows:
//!
//! - Node's `http2` client grants the protocol's default 64 KiB: a connection stall stalls both
//!   of its streams (from the Node server or from Go's `net/http` server alike), then the
//!   withheld credit is released in full and the rest of a body many times the window completes
//!   at speed (if the credit were lost the connection would stay shut: nothing more could flow);
//! - Go's `net/http` client grants 4 MiB per stream: its stream stalls once more than that is in
//!   flight;
//! - httpx grants 16 MiB per stream and per connection: a stall of a few hundred kilobytes
//!   never reaches it (the same fault that stalls Node does nothing to it).
//!
//! Meaningless here: curl and Chromium, which also grant windows of megabytes (by their
//! sources, not measured here: curl 7.88 32 MiB, Chromium 6 MiB per stream) — the stall would
//! show only past those sizes, as it does for Go's client.
//!
//! What the audit says: the `event-gap` latency (one delivered event to the next on an
//! exchange) holds the stall; without the fault it stays at the server's interval.

use serde_json::Value;

use crate::kind_common::*;
use crate::support::certs::Certs;
use crate::support::check::{complete_and_exact, events};
use crate::support::launch::{self, Ask};
use crate::support::peer::{Peer, Server};

const STALL_MS: i64 = 700;

fn connection_stall_def() -> Vec<(&'static str, toml::Value)> {
    vec![
        ("kind", s("flow_stall")),
        ("target", s("connection")),
        ("stall_ms", i(STALL_MS)),
        ("after_bytes", i(20_000)),
    ]
}

fn connection_stall() -> Vec<std::sync::Arc<dyn tearline::fault::FaultFactory>> {
    vec![fault(&connection_stall_def())]
}

/// Two streams of `n` events of `size` bytes, 5 ms apart.
fn ask(n: u64, size: usize) -> Ask<'static> {
    Ask {
        streams: &["a", "b"],
        n,
        query: format!("interval=5&size={size}"),
        resume: 0,
        timeout_ms: 20_000,
    }
}

/// The largest time between two consecutive events the client logged on `stream`, and where
/// (the index of the event after it).
fn largest_gap(log: &[Value], stream: &str) -> (i64, usize) {
    let t = times(log, "message", stream);
    t.windows(2)
        .enumerate()
        .map(|(k, w)| (w[1] - w[0], k + 1))
        .max()
        .unwrap_or((0, 0))
}

/// Both streams stalled about `STALL_MS` once, and flowed without another stall after it.
fn both_stalled_once(what: &str, log: &[Value]) {
    for st in ["a", "b"] {
        let (gap, at) = largest_gap(log, st);
        assert!(
            gap >= STALL_MS * 6 / 10,
            "{what}: {st} stalled {gap} ms (want about {STALL_MS}):\n{}",
            show(log)
        );
        let t = times(log, "message", st);
        let after = t[at..].windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        assert!(
            after < STALL_MS / 2,
            "{what}: {st} stalled again after the stall ({after} ms): the window did not come back whole:\n{}",
            show(log)
        );
    }
}

#[tokio::test]
async fn a_connection_stall_stalls_both_node_streams_then_the_whole_window_returns() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    // 2 × 40 events of 20 kB: 1.6 MB through a 64 KiB connection window.
    let (n, size) = (40, 20_000);
    let (plain, plain_audit) = audited_hop(&server, None, never(&connection_stall_def())).await;
    let cmd = launch::node_client(&plain.url("http"), None, &ask(n, size));
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client without the stall";
    complete_and_exact(what, &log, &["a", "b"], n, size);
    let (gap, _) = histo_max_ms(&plain_audit, "event-gap");
    assert!(
        gap < 300 && largest_gap(&log, "a").0 < 300,
        "{what}: no stall, the audit's event-gap is {gap} ms"
    );

    let (hop, auditor) = audited_hop(&server, None, connection_stall()).await;
    let cmd = launch::node_client(&hop.url("http"), None, &ask(n, size));
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "node client behind a connection stall";
    complete_and_exact(what, &log, &["a", "b"], n, size);
    both_stalled_once(what, &log);
    let (gap, count) = histo_max_ms(&auditor, "event-gap");
    assert!(
        gap >= (STALL_MS * 6 / 10) as u64,
        "{what}: the audit's event-gap shows the stall: {gap} ms over {count} gaps"
    );
}

#[tokio::test]
async fn a_connection_stall_stalls_both_streams_the_go_server_writes_to_the_node_client() {
    let certs = Certs::new();
    let server = Server::start("go-server", launch::go_server(&certs)).await;
    let (n, size) = (20, 20_000);
    let (hop, auditor) = audited_hop(&server, Some(&certs), connection_stall()).await;
    let cmd = launch::node_client(&hop.url("https"), Some(&certs), &ask(n, size));
    let log = Peer::spawn("node-client", cmd).succeed(LIMIT).await;
    let what = "Go server to the Node client behind a connection stall";
    complete_and_exact(what, &log, &["a", "b"], n, size);
    both_stalled_once(what, &log);
    let (gap, _) = histo_max_ms(&auditor, "event-gap");
    assert!(
        gap >= (STALL_MS * 6 / 10) as u64,
        "{what}: the audit's event-gap: {gap} ms"
    );
    // The Go server's handlers were held up by flow control: each wrote its last event a
    // stall's length after its request, although 20 events 5 ms apart take 100 ms.
    let slog = server.peer.log();
    for st in ["a", "b"] {
        let start = times(&slog, "request", st).first().copied().unwrap_or(0);
        let end = times(&slog, "end", st).first().copied().unwrap_or(0);
        assert!(
            end - start >= STALL_MS * 6 / 10,
            "{what}: the Go server finished {st} {} ms after its request:\n{}",
            end - start,
            show(&slog)
        );
    }
}

#[tokio::test]
async fn the_go_clients_stream_stalls_only_once_more_than_its_4_mib_window_is_in_flight() {
    let certs = Certs::new();
    let server = Server::start("node-server", launch::node_server(Some(&certs))).await;
    // One stream of 8 events of 1 MB; the stall starts at 3 MB, when the Go client has already
    // returned the credit for what it read: the server has a full 4 MiB window to spend first.
    let stall = 2_500;
    let f = fault(&[
        ("kind", s("flow_stall")),
        ("stream", s("all")),
        ("stall_ms", i(stall)),
        ("after_bytes", i(3_000_000)),
    ]);
    let (hop, auditor) = audited_hop(&server, Some(&certs), vec![f]).await;
    let ask = Ask {
        streams: &["a"],
        n: 8,
        query: "interval=5&size=1000000".into(),
        resume: 0,
        timeout_ms: 25_000,
    };
    let cmd = launch::go_client(&hop.url("https"), &certs, &ask);
    let log = Peer::spawn("go-client", cmd).succeed(LIMIT).await;
    let what = "Go client behind a stream stall";
    complete_and_exact(what, &log, &["a"], 8, 1_000_000);
    let (gap, at) = largest_gap(&log, "a");
    assert!(
        gap >= stall / 3 && at >= 4,
        "{what}: the stream stalled {gap} ms before event {} — after its first 4 MB:\n{}",
        at + 1,
        show(&log)
    );
    let (audit_gap, _) = histo_max_ms(&auditor, "event-gap");
    assert!(
        audit_gap >= (stall / 3) as u64,
        "{what}: the audit's event-gap: {audit_gap} ms"
    );
}

#[tokio::test]
async fn httpx_grants_16_mib_windows_so_the_stall_that_stops_node_never_reaches_it() {
    let server = Server::start("node-server", launch::node_server(None)).await;
    let (n, size) = (8, 20_000);
    let (hop, auditor) = audited_hop(&server, None, connection_stall()).await;
    let cmd = launch::py_client(&hop.url("http"), None, &ask(n, size));
    let log = Peer::spawn("py-client", cmd).succeed(LIMIT).await;
    let what = "httpx behind a connection stall";
    complete_and_exact(what, &log, &["a", "b"], n, size);
    for st in ["a", "b"] {
        let (gap, _) = largest_gap(&log, st);
        assert!(
            gap < STALL_MS / 2,
            "{what}: {st} never stalled ({gap} ms):\n{}",
            show(&log)
        );
    }
    let (gap, _) = histo_max_ms(&auditor, "event-gap");
    assert!(gap < (STALL_MS / 2) as u64, "{what}: event-gap {gap} ms");
    // The same stall does stop the Node client (see the Node test): the difference is the
    // window, which httpx announces as 16 MiB.
    assert!(
        events(&log, "response").len() == 2,
        "{what}: both answered:\n{}",
        show(&log)
    );
}
