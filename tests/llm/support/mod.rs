//! Shared harness of the LLM SDK tests: one tearline proxy per matrix cell (its own listener,
//! faults, auditor and observation record, so every finding belongs to exactly one cell), and
//! in front of the lab a counting relay that is the ground truth of how many requests a cell's
//! client sent (independent of tearline's own observer).
//!
//! Invariants: every listener binds 127.0.0.1:0 before anything connects; [`CellProxy::settle`]
//! waits (bounded) until every connection the proxy opened has closed, then finishes the
//! auditor, so findings are final when read.
#![allow(dead_code)]

pub mod drivers;
pub mod h2_head;
pub mod h2_requests;
pub mod judged;
pub mod layout;
pub mod matrix;
pub mod observed;
pub mod procs;
pub mod table;
pub mod truth;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, Finding};
use tearline::fault::FaultFactory;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Feeds the auditor, keeps every observation and counts closed connections.
struct Tap {
    auditor: Auditor,
    seen: Mutex<Vec<Observation>>,
    opened: AtomicU64,
    closed: watch::Sender<u64>,
}

impl ObservationSink for Tap {
    fn record(&self, obs: Observation) {
        let (open, close) = (
            matches!(obs, Observation::ConnOpened { .. }),
            matches!(obs, Observation::ConnClosed { .. }),
        );
        if let Ok(mut v) = self.seen.lock() {
            v.push(obs.clone());
        }
        self.auditor.record(obs);
        if open {
            self.opened.fetch_add(1, Ordering::SeqCst);
        }
        if close {
            self.closed.send_modify(|n| *n += 1);
        }
    }
}

/// A tearline proxy for one cell of the matrix.
pub struct CellProxy {
    pub addr: SocketAddr,
    tap: Arc<Tap>,
    stop: CancellationToken,
}

impl CellProxy {
    /// A proxy to `upstream` with `faults`, the HTTP observer and its own auditor.
    pub async fn start(
        name: &str,
        upstream: SocketAddr,
        faults: Vec<Arc<dyn FaultFactory>>,
    ) -> CellProxy {
        let (closed, _) = watch::channel(0);
        let tap = Arc::new(Tap {
            auditor: Auditor::new(AuditConfig::default()),
            seen: Mutex::new(Vec::new()),
            opened: AtomicU64::new(0),
            closed,
        });
        let proxy = Proxy::with_faults(ProxyConfig::new(name, upstream.to_string()), faults);
        proxy.observe_http(tap.clone());
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a proxy");
        let addr = listener.local_addr().expect("proxy address");
        let stop = CancellationToken::new();
        tokio::spawn(proxy::run(listener, proxy, stop.clone()));
        CellProxy { addr, tap, stop }
    }

    /// The base URL an SDK is given.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits (at most 20 s) until every connection opened has closed, stops the proxy and
    /// finishes the audit.
    pub async fn settle(&self) {
        let mut rx = self.tap.closed.subscribe();
        let opened = self.tap.opened.load(Ordering::SeqCst);
        let all = tokio::time::timeout(
            Duration::from_secs(20),
            rx.wait_for(|n| *n >= self.tap.opened.load(Ordering::SeqCst).max(opened)),
        )
        .await;
        assert!(
            matches!(all, Ok(Ok(_))),
            "connections still open 20 s after the clients exited"
        );
        self.stop.cancel();
        self.tap.auditor.finish();
    }

    pub fn findings(&self) -> Vec<Finding> {
        self.tap.auditor.findings()
    }

    /// Every observation, in order.
    pub fn observations(&self) -> Vec<Observation> {
        self.tap.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

impl Drop for CellProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A relay in front of the lab that counts the HTTP requests clients send through it — the
/// ground truth of "retried or not", read off the bytes, not from tearline's observer.
pub struct RequestCounter {
    pub addr: SocketAddr,
    posts: Arc<AtomicU64>,
}

/// How a [`RequestCounter`] reads requests off a connection's client-to-server bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// HTTP/1.1: each `POST ` is a request.
    H1,
    /// HTTP/2 with prior knowledge: each client stream that ended is a request
    /// ([`h2_requests`]).
    H2,
}

/// Counts the requests in a connection's client-to-server bytes, read by read.
enum Counting {
    /// The last 4 bytes of the previous read, so a split `POST ` is seen.
    H1 {
        tail: Vec<u8>,
    },
    H2(h2_requests::H2Requests),
}

impl Counting {
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        match self {
            Counting::H1 { tail } => {
                tail.extend_from_slice(bytes);
                let found = tail.windows(5).filter(|w| w == b"POST ").count();
                let keep = tail.len().saturating_sub(4);
                tail.drain(..keep);
                found as u64
            }
            Counting::H2(c) => c.feed(bytes),
        }
    }
}

impl RequestCounter {
    /// A counting relay to `upstream` for HTTP/1.1 clients.
    pub async fn start(upstream: SocketAddr) -> RequestCounter {
        RequestCounter::start_on(upstream, Wire::H1).await
    }

    /// A counting relay to `upstream` for clients speaking `wire`.
    pub async fn start_on(upstream: SocketAddr, wire: Wire) -> RequestCounter {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a relay");
        let addr = listener.local_addr().expect("relay address");
        let posts = Arc::new(AtomicU64::new(0));
        let count = posts.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut dr, mut dw) = down.into_split();
                    let (mut ur, mut uw) = up.into_split();
                    let mut counting = match wire {
                        Wire::H1 => Counting::H1 { tail: Vec::new() },
                        Wire::H2 => Counting::H2(h2_requests::H2Requests::default()),
                    };
                    let requests = async {
                        let mut buf = vec![0u8; 16 * 1024];
                        while let Ok(n) = dr.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            count.fetch_add(counting.feed(&buf[..n]), Ordering::SeqCst);
                            if uw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = uw.shutdown().await;
                    };
                    let answers = async {
                        let _ = tokio::io::copy(&mut ur, &mut dw).await;
                        let _ = dw.shutdown().await;
                    };
                    tokio::join!(requests, answers);
                });
            }
        });
        RequestCounter { addr, posts }
    }

    /// Requests sent through the relay so far.
    pub fn requests(&self) -> u64 {
        self.posts.load(Ordering::SeqCst)
    }
}
