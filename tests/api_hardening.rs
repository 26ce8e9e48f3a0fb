//! The control API's edges over real sockets: the `Host` allowlist (DNS-rebinding defence), the
//! bearer token, and read timeouts that keep slow clients from holding its connection slots.

mod control_support;

use std::net::SocketAddr;
use std::time::Duration;

use control_support::{TEST_TIMEOUT, start_api};
use tearline::control::server::MAX_CONNECTIONS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

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
