//! Latency faults keep memory bounded: behind a latency fault the delay queue of one direction
//! stops growing at `max_inflight_bytes` when the client reads slowly, and the queues of many
//! connections together stop at the proxy's `max_buffered_bytes`; every byte still arrives,
//! in order, and the `bytes_buffered` gauge returns to 0.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::common::proxy::*;
use tearline::fault::FaultFactory;
use tearline::fault::common::{Common, Factory};
use tearline::fault::latency::LatencyConfig;
use tearline::proxy::Proxy;
use tearline::vocab::Direction;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const MIB: u64 = 1024 * 1024;
const CHUNK: u64 = 64 * 1024;

fn latency(ms: u64) -> Arc<dyn FaultFactory> {
    Factory::shared(
        Common {
            direction: Direction::Downstream,
            probability: 1.0,
        },
        LatencyConfig {
            latency: Duration::from_millis(ms),
            jitter: Duration::ZERO,
        },
    )
}

/// Samples the proxy's `bytes_buffered` every millisecond until stopped; returns the peak.
struct Peak {
    peak: Arc<AtomicU64>,
    on: Arc<AtomicBool>,
}

impl Peak {
    fn watch(proxy: Arc<Proxy>) -> Peak {
        let peak = Arc::new(AtomicU64::new(0));
        let on = Arc::new(AtomicBool::new(true));
        let (p, o) = (peak.clone(), on.clone());
        tokio::spawn(async move {
            while o.load(Ordering::Relaxed) {
                p.fetch_max(proxy.stats().bytes_buffered(), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        Peak { peak, on }
    }

    fn now(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for Peak {
    fn drop(&mut self) {
        self.on.store(false, Ordering::Relaxed);
    }
}

/// Reads `total` bytes in 64 KiB reads, pausing `pause` after each: a reader slower than the
/// server.
async fn slow_read(c: &mut TcpStream, total: u64, pause: Duration) -> Sum {
    let mut sum = Sum::default();
    let mut buf = vec![0u8; CHUNK as usize];
    while sum.len() < total {
        let n = c.read(&mut buf).await.unwrap();
        assert!(n > 0, "EOF after {} of {total} bytes", sum.len());
        sum.feed(&buf[..n]);
        tokio::time::sleep(pause).await;
    }
    sum
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_behind_a_latency_fault_keeps_the_queue_within_its_budget() {
    timeout(Duration::from_secs(60), async {
        let (server_addr, mut accepted) = accepting_server().await;
        let budget = 4 * MIB;
        let p = start_proxy(server_addr, |c| {
            c.max_inflight_bytes = budget as usize;
            c.max_buffered_bytes = 64 * MIB;
        })
        .await;
        p.proxy.set_faults(vec![latency(20)]);
        let mut client = TcpStream::connect(p.addr).await.unwrap();
        let mut server = accepted.recv().await.unwrap();
        let total = 24 * MIB;
        let sender = tokio::spawn(async move {
            let sum = send_random(&mut server, total, 5, 200_000).await.unwrap();
            server.shutdown().await.unwrap();
            sum
        });
        let peak = Peak::watch(p.proxy.clone());
        // ~64 KiB per 2 ms (≤ 32 MiB/s): far slower than the server.
        let got = slow_read(&mut client, total, Duration::from_millis(2)).await;
        let sent = sender.await.unwrap();
        assert_eq!(got, sent, "bytes were lost or reordered");
        let high = peak.now();
        let bound = budget + 2 * CHUNK;
        assert!(
            high <= bound,
            "bytes_buffered peaked at {high}, above the direction's budget {bound}"
        );
        assert!(
            high >= budget / 2,
            "the queue never filled (peak {high}): the reader was not slow"
        );
        let mut rest = [0u8; 1];
        assert_eq!(
            client.read(&mut rest).await.unwrap(),
            0,
            "EOF after the stream"
        );
        assert_eq!(p.proxy.stats().bytes_buffered(), 0);
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_delayed_connections_stop_at_the_proxy_budget() {
    timeout(Duration::from_secs(60), async {
        let (server_addr, mut accepted) = accepting_server().await;
        let (per_direction, proxy_budget) = (8 * MIB, 8 * MIB);
        let p = start_proxy(server_addr, |c| {
            c.max_inflight_bytes = per_direction as usize;
            c.max_buffered_bytes = proxy_budget;
        })
        .await;
        p.proxy.set_faults(vec![latency(20)]);
        let conns = 4u64;
        let total = 16 * MIB;
        // Every connection is open before any byte flows: once the queues fill the budget the
        // proxy refuses new connections, and this test is about the open ones.
        let mut clients = Vec::new();
        let mut servers = Vec::new();
        for _ in 0..conns {
            clients.push(TcpStream::connect(p.addr).await.unwrap());
            servers.push(accepted.recv().await.unwrap());
        }
        let mut senders = Vec::new();
        for (i, mut server) in (0..conns).zip(servers) {
            senders.push(tokio::spawn(async move {
                let sum = send_random(&mut server, total, 100 + i, 200_000)
                    .await
                    .unwrap();
                server.shutdown().await.unwrap();
                sum
            }));
        }
        let peak = Peak::watch(p.proxy.clone());
        let readers: Vec<_> = clients
            .into_iter()
            .map(|mut c| {
                tokio::spawn(async move {
                    let sum = slow_read(&mut c, total, Duration::from_millis(4)).await;
                    (sum, c)
                })
            })
            .collect();
        for (i, (r, s)) in readers.into_iter().zip(senders).enumerate() {
            let (got, _c) = r.await.unwrap();
            assert_eq!(
                got,
                s.await.unwrap(),
                "connection {i}: bytes lost or reordered"
            );
        }
        let high = peak.now();
        // Each direction may hold one chunk beyond the budget (it read it before the gauge
        // reached the budget) plus its read chunk in flight.
        let bound = proxy_budget + conns * 2 * CHUNK;
        assert!(
            high <= bound,
            "bytes_buffered peaked at {high}, above the proxy's budget {bound} \
             ({conns} connections × {per_direction} per direction would allow {})",
            conns * per_direction
        );
        assert!(
            high >= proxy_budget / 2,
            "the queues never filled (peak {high})"
        );
        assert_eq!(p.proxy.stats().bytes_buffered(), 0);
    })
    .await
    .unwrap();
}
