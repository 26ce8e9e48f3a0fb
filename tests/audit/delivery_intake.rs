//! The data path never waits on the audit: with the audit's consumer stopped for good (paused)
//! and a small intake queue, the relay still finishes — a relay that waited for room in the
//! queue would never finish — every byte arrives, and the observations that did not fit are
//! counted, in the summary and in `/metrics`, and the stream that lost them is reported not
//! judged. (Speed is a benchmark matter, not checked here.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::control::{call, start_api};
use http::Method;
use tearline::audit::{AuditConfig, Auditor};
use tearline::control::sources::AuditFindings;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::ObservationSink;
use tearline::wire::http1::observer_pair;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const EVENTS: usize = 30_000;

/// An SSE server: per connection, one close-delimited stream of `EVENTS` small events.
async fn sse_server() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let mut body = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n".to_vec();
    for i in 0..EVENTS {
        body.extend_from_slice(format!("id: {i}\ndata: {{\"n\":{i}}}\n\n").as_bytes());
    }
    let body = Arc::new(body);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 1024];
                let _ = s.read(&mut req).await;
                let _ = s.write_all(&body).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// Relays one stream through a proxy whose observer feeds `auditor`; returns (bytes, time).
async fn relay(upstream: std::net::SocketAddr, auditor: Arc<Auditor>) -> (usize, Duration) {
    let sink: Arc<dyn ObservationSink> = auditor;
    let proxy = Proxy::new(ProxyConfig::new("intake", upstream.to_string()));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| observer_pair(conn, sink.clone())));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    let start = Instant::now();
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /events HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = c.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        got += n;
    }
    let took = start.elapsed();
    drop(c);
    stop.cancel();
    let _ = task.await;
    (got, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_audit_queue_never_blocks_the_relay_and_is_counted() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let upstream = sse_server().await;
        // Warm-up, then the baseline with a draining audit.
        let _ = relay(upstream, Arc::new(Auditor::new(AuditConfig::default()))).await;
        let draining = Arc::new(Auditor::new(AuditConfig::default()));
        let (base_bytes, _) = relay(upstream, draining.clone()).await;
        assert_eq!(draining.dropped(), 0);

        let stalled = Arc::new(Auditor::with_queue_limit(AuditConfig::default(), 256));
        stalled.set_paused(true);
        let (bytes, _) = relay(upstream, stalled.clone()).await;
        assert_eq!(bytes, base_bytes, "every byte relayed");
        let dropped = stalled.dropped();
        assert!(
            dropped as usize >= EVENTS - 256,
            "the overflow is counted: {dropped} dropped"
        );
        assert!(
            stalled
                .summary()
                .contains(&format!("{dropped} observation(s) dropped")),
            "{}",
            stalled.summary()
        );
        let api = start_api(|c| c.findings = Some(Arc::new(AuditFindings(stalled.clone())))).await;
        let metrics = call(api.addr, Method::GET, "/metrics", None).await.text();
        assert!(
            metrics.contains(&format!("tearline_audit_dropped_total {dropped}")),
            "{metrics}"
        );
        // Resumed, the audit applies what it kept; queries see it. The stream lost
        // observations: it is reported not judged, and nothing else is said of it.
        stalled.set_paused(false);
        assert!(stalled.tracked_streams() <= 1);
        stalled.finish();
        let findings = stalled.findings();
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(
            findings[0].detail.starts_with("not judged:")
                && findings[0].detail.contains("observation(s) of connection"),
            "{}",
            findings[0].detail
        );
        draining.finish();
        let whole = draining.findings();
        assert!(
            !whole.iter().any(|f| f.detail.starts_with("not judged:")),
            "{whole:#?}"
        );
    })
    .await
    .expect("test timed out");
}
