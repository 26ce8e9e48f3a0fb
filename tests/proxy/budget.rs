//! Memory bounds under hostile traffic: the proxy's memory budget (queues pause, new
//! connections are refused while it is reached, nothing is lost), and the HTTP observer's
//! bounded queue of pipelined requests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::fault::common::{Common, Factory};
use tearline::fault::latency::LatencyConfig;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::http1::{MAX_PIPELINED, observer_pair};
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, timeout};

const TOTAL: usize = 512 << 10;
const BUDGET: u64 = 256 << 10;

/// An upstream that answers each connection with TOTAL bytes (`i % 251`), then closes.
async fn pusher() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = l.local_addr().expect("upstream addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let data: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
                let _ = s.write_all(&data).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_its_memory_budget_a_proxy_pauses_its_queues_and_refuses_new_connections() {
    timeout(Duration::from_secs(30), async {
        let mut cfg = ProxyConfig::new("budget", pusher().await.to_string());
        cfg.max_buffered_bytes = BUDGET;
        let latency = LatencyConfig {
            // Nothing leaves for 1 s: the gauge stays at the budget until then.
            latency: Duration::from_secs(1),
            jitter: Duration::ZERO,
        };
        let proxy = Proxy::with_faults(cfg, vec![Factory::shared(Common::default(), latency)]);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy addr");
        let shutdown = CancellationToken::new();
        tokio::spawn(proxy::run(listener, Arc::clone(&proxy), shutdown.clone()));

        // A client that reads everything, checking each byte.
        let reader = tokio::spawn(async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            let mut got = Vec::with_capacity(TOTAL);
            c.read_to_end(&mut got).await.expect("read all");
            got
        });
        // The latency holds the stream: the queue fills up to the budget.
        let t = Instant::now();
        while !proxy.over_budget() {
            assert!(t.elapsed() < Duration::from_secs(5), "budget never reached");
            tokio::task::yield_now().await;
        }
        // The proxy accepts and resets at once; the reset may even reach the connecting
        // socket before `connect` reports success.
        match TcpStream::connect(addr).await {
            Ok(mut refused) => {
                let mut buf = [0u8; 16];
                let r = timeout(Duration::from_secs(5), refused.read(&mut buf)).await;
                assert!(
                    matches!(r, Ok(Ok(0) | Err(_))),
                    "a connection over the budget is closed at once, got {r:?}"
                );
            }
            Err(e) => assert_eq!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset,
                "a connection over the budget is reset, not failed otherwise"
            ),
        }
        // Meanwhile the gauge stays near the budget: the pump paused reading.
        let mut peak = 0;
        let got = loop {
            peak = peak.max(proxy.stats().bytes_buffered());
            if reader.is_finished() {
                break reader.await.expect("reader");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        let want: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        assert!(
            got == want,
            "every byte delivered, in order ({} bytes)",
            got.len()
        );
        let slack = 2 * 64 * 1024;
        assert!(
            peak <= BUDGET + slack,
            "peak {peak} over budget {BUDGET} + {slack}"
        );
        assert!(proxy.stats().snapshot().connections_refused >= 1);
        // Below the budget again: served.
        let mut c = TcpStream::connect(addr).await.expect("connect after");
        let mut first = [0u8; 4];
        c.read_exact(&mut first).await.expect("served again");
        assert_eq!(first, [0, 1, 2, 3]);
        shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

#[test]
fn the_observer_follows_at_most_max_pipelined_requests_awaiting_responses() {
    let rec = Arc::new(Recorder::default());
    let (mut up, mut down) = observer_pair(1, rec.clone());
    let n = MAX_PIPELINED + 5;
    let requests = "GET /x HTTP/1.1\r\nHost: h\r\n\r\n".repeat(n);
    up.observe(requests.as_bytes());
    up.delivered_through(requests.len() as u64);
    let responses = "HTTP/1.1 204 No Content\r\n\r\n".repeat(n);
    down.observe(responses.as_bytes());
    down.delivered_through(responses.len() as u64);
    let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
    let requests = obs
        .iter()
        .filter(|o| matches!(o, Observation::Request { .. }))
        .count();
    assert_eq!(
        requests, MAX_PIPELINED,
        "requests past the bound are not followed"
    );
    let paired: Vec<u64> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Response { seq, .. } if *seq < n as u64 => Some(*seq),
            _ => None,
        })
        .collect();
    let want: Vec<u64> = (0..MAX_PIPELINED as u64).collect();
    assert_eq!(
        paired, want,
        "the queued requests pair with their responses in order"
    );
}
