//! Test support for the control API: an in-memory [`ProxyHub`] that relays with
//! `copy_bidirectional` and counts what it relays, a fault catalogue that records what it built,
//! and a minimal HTTP/1.1 client.
#![allow(dead_code)]

pub mod live;
pub mod prom;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tearline::control::{
    ApiConfig, ApiState, CatalogError, FaultCatalog, HubError, ProxyHub, ProxyStats, Stopped,
    serve_api,
};
use tearline::fault::{ConnRng, Fault, FaultFactory};
use tearline::vocab::Direction;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Every test body runs under this bound.
pub const TEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Counters {
    up: AtomicU64,
    down: AtomicU64,
    open: AtomicU64,
    total: AtomicU64,
}

struct Running {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// A hub that relays for real (no faults) and records the fault chains it was given.
#[derive(Default)]
pub struct FakeHub {
    running: Mutex<BTreeMap<String, Running>>,
    counters: Mutex<BTreeMap<String, Arc<Counters>>>,
    upstreams: Mutex<BTreeMap<String, Arc<Mutex<String>>>>,
    /// Fault kinds with direction, per proxy, as last set.
    pub chains: Mutex<BTreeMap<String, Vec<(String, Direction)>>>,
}

fn describe(faults: &[Arc<dyn FaultFactory>]) -> Vec<(String, Direction)> {
    faults
        .iter()
        .map(|f| (f.kind().to_owned(), f.direction()))
        .collect()
}

impl FakeHub {
    /// The chain last set on `name` (empty when none).
    pub fn chain(&self, name: &str) -> Vec<(String, Direction)> {
        self.chains
            .lock()
            .map(|c| c.get(name).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Whether `name` is running.
    pub fn is_running(&self, name: &str) -> bool {
        self.running
            .lock()
            .map(|r| r.contains_key(name))
            .unwrap_or(false)
    }
}

impl ProxyHub for FakeHub {
    fn start(
        &self,
        name: &str,
        listener: TcpListener,
        upstream: &str,
        faults: Vec<Arc<dyn FaultFactory>>,
    ) -> Result<(), HubError> {
        if let Some(old) = self.running.lock().ok().and_then(|mut r| r.remove(name)) {
            old.stop.cancel();
        }
        let stop = CancellationToken::new();
        let counters = {
            let mut c = self
                .counters
                .lock()
                .map_err(|_| HubError::NotRunning(name.into()))?;
            Arc::clone(c.entry(name.to_owned()).or_default())
        };
        let up = Arc::new(Mutex::new(upstream.to_owned()));
        if let Ok(mut u) = self.upstreams.lock() {
            u.insert(name.to_owned(), Arc::clone(&up));
        }
        if let Ok(mut c) = self.chains.lock() {
            c.insert(name.to_owned(), describe(&faults));
        }
        let token = stop.clone();
        let task = tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    () = token.cancelled() => return,
                    r = listener.accept() => r,
                };
                let Ok((mut client, _)) = accepted else {
                    continue;
                };
                let target = up.lock().map(|u| u.clone()).unwrap_or_default();
                let counters = Arc::clone(&counters);
                let token = token.clone();
                counters.total.fetch_add(1, Ordering::SeqCst);
                counters.open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        tokio::select! {
                            () = token.cancelled() => {}
                            r = tokio::io::copy_bidirectional(&mut client, &mut server) => {
                                if let Ok((a, b)) = r {
                                    counters.up.fetch_add(a, Ordering::SeqCst);
                                    counters.down.fetch_add(b, Ordering::SeqCst);
                                }
                            }
                        }
                    }
                    counters.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        if let Ok(mut r) = self.running.lock() {
            r.insert(name.to_owned(), Running { stop, task });
        }
        Ok(())
    }

    fn stop(&self, name: &str) -> Stopped {
        let run = self.running.lock().ok().and_then(|mut r| r.remove(name));
        Box::pin(async move {
            if let Some(run) = run {
                run.stop.cancel();
                let _ = run.task.await;
            }
        })
    }

    fn set_upstream(&self, name: &str, upstream: &str) -> Result<(), HubError> {
        let u = self
            .upstreams
            .lock()
            .map_err(|_| HubError::NotRunning(name.into()))?;
        let slot = u
            .get(name)
            .ok_or_else(|| HubError::NotRunning(name.into()))?;
        if let Ok(mut s) = slot.lock() {
            *s = upstream.to_owned();
        }
        Ok(())
    }

    fn set_faults(&self, name: &str, faults: Vec<Arc<dyn FaultFactory>>) -> Result<(), HubError> {
        if !self.is_running(name) {
            return Err(HubError::NotRunning(name.into()));
        }
        if let Ok(mut c) = self.chains.lock() {
            c.insert(name.to_owned(), describe(&faults));
        }
        Ok(())
    }

    fn remove(&self, name: &str) {
        if let Ok(mut c) = self.counters.lock() {
            c.remove(name);
        }
        if let Ok(mut c) = self.chains.lock() {
            c.remove(name);
        }
    }

    fn stats(&self) -> Vec<ProxyStats> {
        let Ok(c) = self.counters.lock() else {
            return Vec::new();
        };
        c.iter()
            .map(|(name, k)| ProxyStats {
                name: name.clone(),
                bytes_upstream: k.up.load(Ordering::SeqCst),
                bytes_downstream: k.down.load(Ordering::SeqCst),
                connections_open: k.open.load(Ordering::SeqCst),
                connections_total: k.total.load(Ordering::SeqCst),
                ..ProxyStats::default()
            })
            .collect()
    }
}

const KINDS: &[&str] = &[
    "bandwidth",
    "latency",
    "limit_data",
    "outage",
    "reset",
    "reset_peer",
    "slicer",
    "slow_close",
    "sse_cut",
    "stall",
    "timeout",
];

struct FakeFactory {
    kind: &'static str,
    direction: Direction,
}

impl FaultFactory for FakeFactory {
    fn kind(&self) -> &'static str {
        self.kind
    }
    fn direction(&self) -> Direction {
        self.direction
    }
    fn instantiate(
        &self,
        _rng: &mut ConnRng,
        _now: tokio::time::Instant,
    ) -> Option<Box<dyn Fault>> {
        None
    }
}

/// A catalogue of Toxiproxy's types plus ours that refuses negative latency.
pub struct FakeCatalog;

impl FaultCatalog for FakeCatalog {
    fn build(
        &self,
        type_: &str,
        attributes: &serde_json::Value,
        stream: Direction,
        _toxicity: f64,
    ) -> Result<Arc<dyn FaultFactory>, CatalogError> {
        let Some(kind) = KINDS.iter().find(|k| **k == type_) else {
            return Err(CatalogError::UnknownType {
                type_: type_.to_owned(),
                known: KINDS.join(", "),
            });
        };
        if attributes
            .get("latency")
            .and_then(|v| v.as_i64())
            .is_some_and(|l| l < 0)
        {
            return Err(CatalogError::Invalid("latency must be at least 0".into()));
        }
        Ok(Arc::new(FakeFactory {
            kind,
            direction: stream,
        }))
    }

    fn known_types(&self) -> Vec<String> {
        KINDS.iter().map(|k| (*k).to_owned()).collect()
    }
}

/// A running API server over a [`FakeHub`].
pub struct Api {
    pub addr: SocketAddr,
    pub hub: Arc<FakeHub>,
    pub shutdown: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
}

/// Starts an API server; `configure` may set the token or limits.
pub async fn start_api(configure: impl FnOnce(&mut ApiConfig)) -> Api {
    let hub = Arc::new(FakeHub::default());
    let mut config = ApiConfig::new(hub.clone(), Arc::new(FakeCatalog));
    configure(&mut config);
    start_with(config, hub).await
}

/// Starts an API server with a prepared config.
pub async fn start_with(config: ApiConfig, hub: Arc<FakeHub>) -> Api {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
    let addr = listener.local_addr().expect("api addr");
    let shutdown = CancellationToken::new();
    let state = ApiState::new(config);
    let token = shutdown.clone();
    let task = tokio::spawn(async move {
        serve_api(listener, state, token).await.expect("serve_api");
    });
    Api {
        addr,
        hub,
        shutdown,
        task,
    }
}

/// A response as the tests see it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    /// The body as JSON (Null when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request on a fresh connection.
pub async fn call_with(
    addr: SocketAddr,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect api");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("request");
    let resp = sender.send_request(req).await.expect("send request");
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    Reply {
        status,
        headers,
        body,
    }
}

/// A request with an optional JSON body.
pub async fn call(
    addr: SocketAddr,
    method: Method,
    path: &str,
    json: Option<serde_json::Value>,
) -> Reply {
    call_with(
        addr,
        method,
        path,
        &[],
        json.map(|j| j.to_string().into_bytes()),
    )
    .await
}

/// Whether something accepts connections on `listen`.
pub async fn is_up(listen: &str) -> bool {
    TcpStream::connect(listen).await.is_ok()
}

/// An echo server on 127.0.0.1:0; returns its address.
pub async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let addr = l.local_addr().expect("echo addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}
