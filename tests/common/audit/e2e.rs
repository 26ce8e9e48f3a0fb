//! Shared harness of the audit end-to-end tests: a scripted raw-byte server and client over
//! real loopback sockets, through the proxy with the HTTP/1.1 wire observer and the auditor as
//! its sink, with a fault that cuts the first response at an exact byte offset.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, FindingKind as K};
use tearline::fault::{Chunk, ConnRng, Cut, Fault, FaultFactory, Plan};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::vocab::CutAction;
use tearline::vocab::Direction;
use tearline::wire::{Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, timeout};

/// Forwards observations to the auditor and counts closed connections.
pub struct Tap {
    pub auditor: Auditor,
    pub closed: watch::Sender<u64>,
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

/// Cuts the first connection's downstream after exactly `at` bytes.
pub struct CutOnce {
    armed: AtomicBool,
    at: u64,
    action: CutAction,
}

impl CutOnce {
    /// Cuts the first connection's downstream after exactly `at` bytes with `action`.
    pub fn new(at: u64, action: CutAction) -> Self {
        CutOnce {
            armed: AtomicBool::new(true),
            at,
            action,
        }
    }
}

pub struct CutFault {
    at: u64,
    action: CutAction,
    done: bool,
}

impl FaultFactory for CutOnce {
    fn kind(&self) -> &'static str {
        "cut-once"
    }
    fn direction(&self) -> Direction {
        Direction::Downstream
    }
    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        self.armed.swap(false, Ordering::SeqCst).then(|| {
            Box::new(CutFault {
                at: self.at,
                action: self.action,
                done: false,
            }) as Box<dyn Fault>
        })
    }
}

impl Fault for CutFault {
    fn kind(&self) -> &'static str {
        "cut-once"
    }
    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        let (off, len) = (chunk.offset, chunk.bytes.len() as u64);
        if !self.done && self.at >= off && self.at <= off + len {
            self.done = true;
            plan.cut_at(Cut {
                at: (self.at - off) as usize,
                action: self.action,
                outage: None,
                by: "cut-once",
            });
        }
    }
}

/// The bytes a scripted server writes on one connection, in separate writes.
#[derive(Default, Clone)]
pub struct Script {
    pub writes: Vec<Vec<u8>>,
}

impl Script {
    pub fn sse(extra_headers: &str) -> Self {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n{extra_headers}\r\n"
        );
        Script {
            writes: vec![head.into_bytes()],
        }
    }

    pub fn raw(bytes: &str) -> Self {
        Script {
            writes: vec![bytes.as_bytes().to_vec()],
        }
    }

    /// One HTTP chunk carrying `text`.
    pub fn chunk(mut self, text: &str) -> Self {
        self.writes
            .push(format!("{:x}\r\n{text}\r\n", text.len()).into_bytes());
        self
    }

    /// The chunked body's end.
    pub fn end(mut self) -> Self {
        self.writes.push(b"0\r\n\r\n".to_vec());
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.writes.concat()
    }

    /// Offset of the `nth` (0-based) occurrence of `needle` in the script, plus `plus`.
    pub fn offset_of(&self, needle: &str, nth: usize, plus: u64) -> u64 {
        let all = self.bytes();
        let n = needle.as_bytes();
        let pos = all
            .windows(n.len())
            .enumerate()
            .filter(|(_, w)| *w == n)
            .nth(nth)
            .map(|(i, _)| i)
            .expect("needle in script");
        pos as u64 + plus
    }
}

/// A server that answers its `k`-th accepted connection with `scripts[k]` after reading one
/// request, then closes.
pub async fn server(scripts: Vec<Script>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
    let addr = listener.local_addr().expect("server addr");
    tokio::spawn(async move {
        for script in scripts {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                read_request(&mut s).await;
                for w in &script.writes {
                    if s.write_all(w).await.is_err() {
                        return;
                    }
                    let _ = s.flush().await;
                    tokio::task::yield_now().await;
                }
                let _ = s.shutdown().await;
                let mut sink = [0u8; 1024];
                while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// Reads one request head and its `Content-Length` body.
pub async fn read_request(s: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return;
            }
        }
        match s.read(&mut tmp).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

/// Sends one request through the proxy, half-closes, and reads until EOF, reset or error.
///
/// The half-close makes the HTTP/1.1 observer release the request head at once (it releases
/// upstream observations on the next chunk or EOF); the auditor also copes without it (see
/// `audit::order`), but a cut connection's request would then be known only from the cut
/// record.
pub async fn client(proxy: SocketAddr, request: String) -> Vec<u8> {
    let mut s = TcpStream::connect(proxy).await.expect("connect proxy");
    s.write_all(request.as_bytes())
        .await
        .expect("write request");
    let _ = s.shutdown().await;
    let mut out = Vec::new();
    let mut tmp = [0u8; 4096];
    while let Ok(n) = s.read(&mut tmp).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&tmp[..n]);
    }
    out
}

pub fn post(session: Option<&str>, version: Option<&str>, body: &str) -> String {
    let mut h = String::new();
    if let Some(s) = session {
        h += &format!("Mcp-Session-Id: {s}\r\n");
    }
    if let Some(v) = version {
        h += &format!("MCP-Protocol-Version: {v}\r\n");
    }
    format!(
        "POST /mcp HTTP/1.1\r\nHost: t\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\n{h}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// [`post`] carrying `Idempotency-Key: key` (the client's name for one logical call).
pub fn post_keyed(session: Option<&str>, version: Option<&str>, key: &str, body: &str) -> String {
    post(session, version, body).replacen(
        "Content-Type:",
        &format!("Idempotency-Key: {key}\r\nContent-Type:"),
        1,
    )
}

pub fn resume(session: &str, cursor: &str) -> String {
    format!(
        "GET /mcp HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Last-Event-ID: {cursor}\r\n\r\n"
    )
}

pub fn ev(eol: &str, id: Option<&str>, kind: Option<&str>, data: &[&str]) -> String {
    let mut s = String::new();
    if let Some(k) = kind {
        s += &format!("event: {k}{eol}");
    }
    if let Some(i) = id {
        s += &format!("id: {i}{eol}");
    }
    for d in data {
        s += &format!("data: {d}{eol}");
    }
    s + eol
}

pub fn progress(n: u64) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progress":{n}}}}}"#)
}

pub fn result(id: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[]}}}}"#)
}

pub fn call(id: &str, tool: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}"}}}}"#)
}

/// Runs `requests` one after the other through a proxy that cuts the first response after
/// `cut` bytes, against a server answering with `scripts`; returns the findings' kinds after
/// every connection closed and the auditor finished.
pub async fn run(
    scripts: Vec<Script>,
    cut: u64,
    action: CutAction,
    requests: Vec<String>,
) -> (Vec<K>, Arc<Tap>) {
    run_with(AuditConfig::default(), scripts, cut, action, requests).await
}

/// [`run`] with an auditor configured by `config`; when `config.abandon_after` is shorter than
/// the default, `finish` is called only once that long has passed since the last close.
pub async fn run_with(
    config: AuditConfig,
    scripts: Vec<Script>,
    cut: u64,
    action: CutAction,
    requests: Vec<String>,
) -> (Vec<K>, Arc<Tap>) {
    let upstream = server(scripts).await;
    let (tx, mut rx) = watch::channel(0u64);
    let tap = Arc::new(Tap {
        auditor: Auditor::new(config.clone()),
        closed: tx,
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy addr");
    let proxy = Proxy::new(ProxyConfig::new("audit-e2e", upstream.to_string()));
    let sink: Arc<dyn ObservationSink> = tap.clone();
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    proxy.set_faults(vec![Arc::new(CutOnce {
        armed: AtomicBool::new(true),
        at: cut,
        action,
    })]);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    let n = requests.len() as u64;
    for r in requests {
        client(addr, r).await;
    }
    rx.wait_for(|closed| *closed >= n)
        .await
        .expect("close count");
    shutdown.cancel();
    let _ = task.await;
    if config.abandon_after < AuditConfig::default().abandon_after {
        tokio::time::sleep(config.abandon_after).await;
    }
    tap.auditor.finish();
    let kinds = tap.auditor.findings().iter().map(|f| f.kind).collect();
    (kinds, tap)
}

pub fn within<F: std::future::Future>(f: F) -> tokio::time::Timeout<F> {
    timeout(Duration::from_secs(20), f)
}
