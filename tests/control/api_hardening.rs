//! The control API's edges over real sockets: the `Host` allowlist (DNS-rebinding defence), the
//! bearer token, read timeouts that keep slow clients from holding its connection slots, and
//! slot eviction that keeps hundreds of hostile connections from delaying a well-behaved
//! request.

use std::net::SocketAddr;
use std::time::Duration;

use crate::common::control::{TEST_TIMEOUT, start_api};
use tearline::control::server::MAX_CONNECTIONS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

/// Sends raw request bytes on a fresh connection; returns everything read until EOF.
async fn raw(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect api");
    s.write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn get(host: &str, extra: &str) -> String {
    format!("GET /version HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

#[tokio::test]
async fn unknown_host_names_are_refused_with_the_reason_and_loopback_names_pass() {
    timeout(TEST_TIMEOUT, async {
        let api = start_api(|c| c.allowed_hosts = vec!["proxy.lan".to_owned()]).await;
        let port = api.addr.port();
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            format!("[::1]:{port}"),
            "proxy.lan".to_owned(),
        ] {
            let r = raw(api.addr, &get(&host, "")).await;
            assert!(r.starts_with("HTTP/1.1 200"), "{host}: {r}");
        }
        let r = raw(api.addr, &get(&format!("rebind.example:{port}"), "")).await;
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        assert!(
            r.contains("rebind.example") && r.contains("--api-allow-host"),
            "{r}"
        );
        api.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn with_a_token_only_requests_carrying_it_are_served() {
    timeout(TEST_TIMEOUT, async {
        let api = start_api(|c| c.token = Some("s3cret".to_owned())).await;
        let host = api.addr.to_string();
        let r = raw(api.addr, &get(&host, "")).await;
        assert!(r.starts_with("HTTP/1.1 401"), "{r}");
        let r = raw(api.addr, &get(&host, "Authorization: Bearer wrong\r\n")).await;
        assert!(r.starts_with("HTTP/1.1 401"), "{r}");
        let r = raw(api.addr, &get(&host, "Authorization: Bearer s3cret\r\n")).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        api.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn slow_clients_are_dropped_after_the_read_timeout_and_cannot_hold_every_slot() {
    timeout(TEST_TIMEOUT, async {
        let read_timeout = Duration::from_millis(400);
        let api = start_api(|c| c.read_timeout = read_timeout).await;
        // Every slot taken by a client that sends half a request line and stops.
        let mut slow = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut s = TcpStream::connect(api.addr).await.expect("connect");
            s.write_all(b"GET /vers").await.expect("write");
            slow.push(s);
        }
        let t = Instant::now();
        let host = api.addr.to_string();
        let r = raw(api.addr, &get(&host, "")).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(
            t.elapsed() < read_timeout * 5,
            "served after {:?}: slow clients held the slots",
            t.elapsed()
        );
        // The slow clients were closed by the server.
        for mut s in slow {
            let mut buf = [0u8; 512];
            let n = timeout(read_timeout * 5, s.read(&mut buf)).await;
            assert!(n.is_ok(), "a slow client was not closed");
        }
        // A body that never completes is answered 408 at the read timeout.
        let t = Instant::now();
        let req = format!(
            "POST /proxies HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n{{\"na"
        );
        let mut s = TcpStream::connect(api.addr).await.expect("connect");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        let r = String::from_utf8_lossy(&out);
        assert!(r.starts_with("HTTP/1.1 408"), "{r}");
        assert!(t.elapsed() >= read_timeout, "answered before the timeout");
        api.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

/// Opens a hostile connection, then keeps it going in a task: slowloris (odd `i`: a request
/// head, a byte a second) or one endless header (even `i`: ten bytes every 100 ms), until
/// `stop` or the server closes it.
async fn hostile(
    addr: SocketAddr,
    i: usize,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mut s = TcpStream::connect(addr).await.expect("connect hostile");
    s.write_all(b"G").await.expect("first byte");
    tokio::spawn(async move {
        let head = b"GET /version HTTP/1.1\r\nHost: localhost\r\nX-Endless: ";
        let (pause, chunk) = if i % 2 == 1 {
            (Duration::from_secs(1), 1)
        } else {
            (Duration::from_millis(100), 10)
        };
        let mut sent = 1;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
            let bytes: Vec<u8> = (sent..sent + chunk)
                .map(|k| head.get(k).copied().unwrap_or(b'a'))
                .collect();
            if s.write_all(&bytes).await.is_err() {
                return;
            }
            sent += chunk;
        }
    })
}

/// `tearline_api_connections_evicted_total` from `/metrics`.
async fn evicted_total(addr: SocketAddr) -> u64 {
    let r = raw(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    r.lines()
        .find_map(|l| l.strip_prefix("tearline_api_connections_evicted_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no eviction counter in /metrics: {r}"))
}

#[tokio::test]
async fn two_hundred_slow_connections_do_not_delay_a_well_behaved_request() {
    timeout(TEST_TIMEOUT, async {
        // The default head timeout (10 s): without eviction a request would wait for it.
        let api = start_api(|_| {}).await;
        let stop = CancellationToken::new();
        let hostile_conns = 200;
        let mut tasks = Vec::new();
        for i in 0..hostile_conns {
            tasks.push(hostile(api.addr, i, stop.clone()).await);
        }
        let host = api.addr.to_string();
        let bound = Duration::from_secs(2);
        for probe in 0..5 {
            let t = Instant::now();
            let r = timeout(bound, raw(api.addr, &get(&host, "")))
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "probe {probe} not answered within {bound:?} (head timeout {:?}): \
                         hostile connections held the slots",
                        tearline::control::server::READ_TIMEOUT
                    )
                });
            assert!(r.starts_with("HTTP/1.1 200"), "probe {probe}: {r}");
            assert!(
                t.elapsed() < bound,
                "probe {probe} answered after {:?} (bound {bound:?}, head timeout {:?}): \
                 hostile connections held the slots",
                t.elapsed(),
                tearline::control::server::READ_TIMEOUT
            );
        }
        // Every hostile connection beyond the slots, and the first probe, made room by
        // eviction (a finished probe gives its slot back, so later ones may find it free).
        let evicted = evicted_total(api.addr).await;
        let least = (hostile_conns + 1 - MAX_CONNECTIONS) as u64;
        assert!(
            evicted >= least,
            "{evicted} evicted, expected at least {least}"
        );
        stop.cancel();
        for t in tasks {
            let _ = t.await;
        }
        api.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_request_head_larger_than_the_limit_is_refused_with_431() {
    timeout(TEST_TIMEOUT, async {
        let api = start_api(|_| {}).await;
        let host = api.addr.to_string();
        let big = format!(
            "X-Big: {}\r\n",
            "a".repeat(tearline::control::server::MAX_HEAD_BYTES)
        );
        let r = raw(api.addr, &get(&host, &big)).await;
        assert!(r.starts_with("HTTP/1.1 431"), "{r}");
        api.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}
