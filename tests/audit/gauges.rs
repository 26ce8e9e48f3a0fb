//! The audit's store gauges (`tearline_audit_tracked{store=…}` in `/metrics`) over real
//! sockets: connections churned through the proxy with the HTTP/1.1 observer and the auditor
//! (requests never answered and closed or reset, SSE streams answered and ended) fill the
//! stores while their grace runs, and every per-connection and per-stream store returns to 0
//! once the connections ended and the grace passed, so a long-running proxy holds audit state
//! only for what is live or recent.

use crate::common;
use std::sync::Arc;
use std::time::Duration;

use crate::common::control::{TEST_TIMEOUT, start_api};
use tearline::audit::{AuditConfig, Auditor};
use tearline::control::sources::AuditFindings;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, timeout};

/// Forwards observations to the auditor and counts closed connections.
struct Tap {
    auditor: Arc<Auditor>,
    closed: watch::Sender<u64>,
}

impl ObservationSink for Tap {
    fn record(&self, obs: Observation) {
        let closed = matches!(obs, Observation::ConnClosed { .. });
        self.auditor.record(obs);
        if closed {
            self.closed.send_modify(|n| *n += 1);
        }
    }
}

/// An upstream that answers `GET /sse` with one SSE event and ends it, and never answers
/// anything else (it reads until the client goes, as the churn bench's sink does).
async fn upstream() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = l.local_addr().expect("upstream addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.starts_with(b"GET /sse") {
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                              Connection: close\r\n\r\nid: 1\ndata: one\n\n",
                        )
                        .await;
                    return;
                }
                while matches!(s.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// One connection through the proxy: `i % 3` = 0 an SSE stream read to its end, 1 an unanswered
/// request then FIN, 2 an unanswered request then RST.
async fn churn_one(proxy: std::net::SocketAddr, i: u64) {
    let mut s = TcpStream::connect(proxy).await.expect("connect proxy");
    let path = if i.is_multiple_of(3) { "/sse" } else { "/" };
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write request");
    match i % 3 {
        0 => {
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out).await;
            assert!(
                out.ends_with(b"data: one\n\n"),
                "{}",
                String::from_utf8_lossy(&out)
            );
        }
        1 => {
            let _ = s.shutdown().await;
            let mut sink = [0u8; 64];
            let _ = s.read(&mut sink).await;
        }
        _ => {
            let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
        }
    }
}

fn store(sizes: &[(&'static str, u64)], name: &str) -> u64 {
    sizes
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no store {name} in {sizes:?}"))
}

/// `tearline_audit_tracked{store="<name>"}` from `/metrics`.
async fn scraped(api: std::net::SocketAddr, name: &str) -> u64 {
    let r = common::control::call(api, http::Method::GET, "/metrics", None).await;
    let prefix = format!("tearline_audit_tracked{{store=\"{name}\"}} ");
    r.text()
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix} in /metrics:\n{}", r.text()))
}

#[tokio::test]
async fn churned_connections_leave_every_audit_store_empty_once_the_grace_passed() {
    timeout(TEST_TIMEOUT, async {
        let grace = Duration::from_millis(600);
        let auditor = Arc::new(Auditor::new(AuditConfig {
            grace,
            abandon_after: grace,
            ..AuditConfig::default()
        }));
        let (tx, rx) = watch::channel(0u64);
        let tap = Arc::new(Tap {
            auditor: Arc::clone(&auditor),
            closed: tx,
        });
        let up = upstream().await;
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let proxy = Proxy::new(ProxyConfig::new("gauges", up.to_string()));
        let sink: Arc<dyn ObservationSink> = tap.clone();
        proxy.set_sink(Some(sink.clone()));
        proxy.set_observer_factory(Arc::new(move |conn| {
            http1::observer_pair(conn, sink.clone())
        }));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
        let findings = Arc::new(AuditFindings(Arc::clone(&auditor)));
        let api = start_api(move |c| c.findings = Some(findings)).await;

        let n = 300u64;
        let mut clients = tokio::task::JoinSet::new();
        for chunk in 0..n / 30 {
            for i in chunk * 30..(chunk + 1) * 30 {
                clients.spawn(churn_one(addr, i));
            }
            while let Some(r) = clients.join_next().await {
                r.expect("client");
            }
        }
        let mut rx = rx;
        rx.wait_for(|closed| *closed >= n)
            .await
            .expect("every connection closed");
        let ended = Instant::now();

        // Within the grace the ended streams are still held (the gauges do count).
        let held = auditor.store_sizes();
        assert!(
            store(&held, "streams") > 0 && store(&held, "sessions") > 0,
            "ended streams are kept for the grace: {held:?}"
        );
        assert_eq!(
            store(&held, "exchanges"),
            0,
            "every exchange ended: {held:?}"
        );
        assert_eq!(
            store(&held, "connections"),
            0,
            "every connection closed: {held:?}"
        );

        // After the grace every store that follows connections or streams is empty.
        let mut sizes = held;
        while ended.elapsed() < grace * 10 {
            tokio::time::sleep(grace / 4).await;
            sizes = auditor.store_sizes();
            if sizes
                .iter()
                .all(|(name, v)| *v == 0 || matches!(*name, "findings" | "loss_keys"))
            {
                break;
            }
        }
        assert!(
            ended.elapsed() >= grace,
            "stores emptied before the grace passed: {sizes:?}"
        );
        for (name, v) in &sizes {
            if !matches!(*name, "findings" | "loss_keys") {
                assert_eq!(*v, 0, "store {name} after the grace: {sizes:?}");
            }
        }
        // `/metrics` shows the same gauges.
        assert_eq!(scraped(api.addr, "streams").await, 0);
        assert_eq!(scraped(api.addr, "sessions").await, 0);
        shutdown.cancel();
        let _ = task.await;
        api.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}
