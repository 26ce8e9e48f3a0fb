//! Shared harness of the delivery tests: the lab server, the proxy with the HTTP/1.1 observer
//! feeding the auditor (and a recorder of what the auditor was fed), a byte tap between the
//! strict load client and the proxy that records exactly what the client received, and a
//! client-side scanner that lists the SSE events those bytes dispatch.
//!
//! The tap ends the client side with FIN after forwarding every byte it got (also when the
//! proxy reset), so the client receives exactly the recorded bytes.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, Finding, FindingKind};
use tearline::fault::FaultFactory;
use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};
use tearline::lab::{LabConfig, LineEnding, serve};
use tearline::load::{self, LoadConfig, LoadOutcome, Policy, Stop, Target};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::observe::FanOut;
use tearline::wire::sse::SseScanner;
use tearline::wire::sse_class::Classified;
use tearline::wire::{Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One SSE event as delivered: (its own id, raw offset just after its dispatching byte).
pub type Delivered = (Option<String>, u64);

/// Every observation the auditor was fed, in order.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

impl Recorder {
    pub fn all(&self) -> Vec<Observation> {
        self.0.lock().unwrap().clone()
    }

    /// The SSE events the audit recorded as delivered, sorted.
    pub fn delivered(&self) -> Vec<Delivered> {
        let mut v: Vec<Delivered> = self
            .all()
            .into_iter()
            .filter_map(|o| match o {
                Observation::SseEvent { id, raw_end, .. } => Some((id, raw_end)),
                _ => None,
            })
            .collect();
        v.sort();
        v
    }
}

/// A fault from `(key, value)` pairs, as a profile would define it.
pub fn fault(pairs: &[(&str, toml::Value)]) -> Arc<dyn FaultFactory> {
    let def = FaultDef::from_pairs(pairs.iter().map(|(k, v)| (*k, v.clone())));
    match build(&def) {
        Ok(Built::Conn(f)) => f,
        other => panic!("expected a connection fault, got {other:?}"),
    }
}

pub fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

pub fn i(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

pub fn f(v: f64) -> toml::Value {
    toml::Value::Float(v)
}

/// The bytes each tapped connection received, in accept order.
pub type Received = Arc<Mutex<Vec<Arc<Mutex<Vec<u8>>>>>>;

/// Records the bytes each client connection received, in accept order.
pub struct Tap {
    pub addr: SocketAddr,
    pub received: Received,
    open: Arc<AtomicUsize>,
}

impl Tap {
    /// Starts a tap in front of `proxy`.
    pub async fn start(proxy: SocketAddr) -> Tap {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received: Received = Arc::default();
        let open = Arc::new(AtomicUsize::new(0));
        let (rec, n) = (received.clone(), open.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(upstream) = TcpStream::connect(proxy).await else {
                    continue;
                };
                let buf = Arc::new(Mutex::new(Vec::new()));
                rec.lock().unwrap().push(buf.clone());
                n.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(relay(client, upstream, buf, n.clone()));
            }
        });
        Tap {
            addr,
            received,
            open,
        }
    }

    /// Waits (bounded) until every tapped connection has ended downstream.
    pub async fn settle(&self) {
        for _ in 0..500 {
            if self.open.load(Ordering::SeqCst) == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("tap connections did not end");
    }

    /// The SSE events the bytes each client received dispatched, sorted.
    pub fn dispatched(&self) -> Vec<Delivered> {
        let mut v = Vec::new();
        for conn in self.received.lock().unwrap().iter() {
            v.extend(client_events(&conn.lock().unwrap()));
        }
        v.sort();
        v
    }
}

async fn relay(
    client: TcpStream,
    upstream: TcpStream,
    buf: Arc<Mutex<Vec<u8>>>,
    open: Arc<AtomicUsize>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut ur, mut uw) = upstream.into_split();
    let up = tokio::spawn(async move {
        let mut b = vec![0u8; 64 * 1024];
        while let Ok(n) = cr.read(&mut b).await {
            if n == 0 || uw.write_all(&b[..n]).await.is_err() {
                break;
            }
        }
        let _ = uw.shutdown().await;
    });
    let mut b = vec![0u8; 64 * 1024];
    while let Ok(n) = ur.read(&mut b).await {
        if n == 0 {
            break;
        }
        buf.lock().unwrap().extend_from_slice(&b[..n]);
        if cw.write_all(&b[..n]).await.is_err() {
            break;
        }
    }
    let _ = cw.shutdown().await;
    open.fetch_sub(1, Ordering::SeqCst);
    // The client closes after our FIN; then the upstream copy ends too.
    let _ = tokio::time::timeout(Duration::from_secs(5), up).await;
}

/// The SSE events the received bytes of one connection dispatch (WHATWG rules, the project's
/// scanner), with the raw offset after each dispatching byte. HTTP/1.1 framing is followed
/// here independently of the proxy's observer: heads, chunked and length bodies.
pub fn client_events(raw: &[u8]) -> Vec<Delivered> {
    client_scan(raw).0
}

/// [`client_events`], and whether the last SSE body left an event in progress (field lines
/// since the last blank line: what a conformant client discards as torn).
pub fn client_scan(raw: &[u8]) -> (Vec<Delivered>, bool) {
    let mut out = Vec::new();
    let mut partial = false;
    let mut pos = 0usize;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(n)) = resp.parse(&raw[pos..]) else {
            return (out, partial);
        };
        let status = resp.code.unwrap_or(0);
        let header = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
        };
        let sse = header("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
        let chunked = header("transfer-encoding").is_some_and(|t| t.contains("chunked"));
        let length = header("content-length").and_then(|l| l.trim().parse::<usize>().ok());
        pos += n;
        if (100..200).contains(&status) {
            continue;
        }
        let mut sc = Scan {
            scanner: SseScanner::new(),
            classified: Classified::default(),
            sse,
        };
        // A body that stops early leaves the scanner where the client's stopped.
        macro_rules! stop {
            () => {{
                partial = sse && sc.scanner.has_partial_event();
                return (out, partial);
            }};
        }
        if chunked {
            loop {
                let Some(eol) = find_crlf(&raw[pos..]) else {
                    stop!();
                };
                let line = String::from_utf8_lossy(&raw[pos..pos + eol]);
                let size_text = line.split(';').next().unwrap_or("").trim();
                let Ok(size) = usize::from_str_radix(size_text, 16) else {
                    stop!();
                };
                pos += eol + 2;
                if size == 0 {
                    // Trailers end with an empty line.
                    loop {
                        let Some(e) = find_crlf(&raw[pos..]) else {
                            stop!();
                        };
                        pos += e + 2;
                        if e == 0 {
                            break;
                        }
                    }
                    break;
                }
                let avail = size.min(raw.len() - pos);
                sc.feed(&raw[pos..pos + avail], pos, &mut out);
                pos += avail;
                if avail < size || raw.len() < pos + 2 {
                    stop!();
                }
                pos += 2;
            }
        } else if let Some(len) = length {
            let avail = len.min(raw.len() - pos);
            sc.feed(&raw[pos..pos + avail], pos, &mut out);
            pos += avail;
            if avail < len {
                stop!();
            }
        } else if status != 204 && status != 304 {
            sc.feed(&raw[pos..], pos, &mut out);
            stop!();
        }
        partial = sse && sc.scanner.has_partial_event();
    }
}

struct Scan {
    scanner: SseScanner,
    classified: Classified,
    sse: bool,
}

impl Scan {
    fn feed(&mut self, piece: &[u8], raw_at: usize, out: &mut Vec<Delivered>) {
        if !self.sse {
            return;
        }
        let base = self.scanner.payload_offset();
        self.scanner.feed_classified(
            piece,
            &mut |e, span| {
                out.push((e.id.map(str::to_string), raw_at as u64 + (span.end - base)));
                false
            },
            &mut self.classified,
        );
        self.classified.clear();
    }
}

fn find_crlf(b: &[u8]) -> Option<usize> {
    b.windows(2).position(|w| w == b"\r\n")
}

/// One run: lab → proxy (faults, observer, auditor) → tap → strict load client.
pub struct Run {
    pub auditor: Arc<Auditor>,
    pub recorder: Arc<Recorder>,
    pub tap: Tap,
    pub outcome: LoadOutcome,
    pub proxy: Arc<Proxy>,
}

/// What a run drives.
pub struct Traffic {
    pub line_ending: LineEnding,
    pub tool: &'static str,
    pub args: serde_json::Value,
    pub calls: u64,
    pub sessions: usize,
}

impl Traffic {
    /// Small events: progress notifications then a small result.
    pub fn small(line_ending: LineEnding) -> Traffic {
        Traffic {
            line_ending,
            tool: "progress",
            args: serde_json::json!({"n": 6}),
            calls: 6,
            sessions: 2,
        }
    }

    /// One 4 MiB result event per call (three `data:` lines).
    pub fn big(line_ending: LineEnding) -> Traffic {
        Traffic {
            line_ending,
            tool: "blob",
            args: serde_json::json!({"size": 4 << 20, "lines": 3}),
            calls: 4,
            sessions: 1,
        }
    }
}

/// Runs `traffic` through a proxy with `faults` (seeded) and returns everything recorded.
pub async fn run(seed: u64, faults: Vec<Arc<dyn FaultFactory>>, traffic: Traffic) -> Run {
    let lab = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lab_addr = lab.local_addr().unwrap();
    let lab_cfg = LabConfig {
        line_ending: traffic.line_ending,
        ..LabConfig::default()
    };
    let lab_stop = CancellationToken::new();
    tokio::spawn(serve(lab, lab_cfg, lab_stop.clone()));

    let mut cfg = ProxyConfig::new("delivery", lab_addr.to_string());
    cfg.seed = seed;
    cfg.drain_timeout = Duration::from_secs(2);
    let proxy = Proxy::new(cfg);
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let recorder = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = Arc::new(FanOut(vec![
        auditor.clone() as Arc<dyn ObservationSink>,
        recorder.clone() as Arc<dyn ObservationSink>,
    ]));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    proxy.set_faults(faults);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let paddr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    let tap = Tap::start(paddr).await;

    let target = Target::parse(&format!("http://{}/mcp", tap.addr)).unwrap();
    let mut lc = LoadConfig::new(target, traffic.tool, traffic.args);
    lc.policy = Policy::Strict;
    // Resumable streams (2025-11-25): the dual-era lab serves 2026-07-28 to a detecting client.
    lc.era = tearline::load::era::EraChoice::Legacy;
    lc.sessions = traffic.sessions;
    lc.stop = Stop::Calls(traffic.calls);
    lc.call_timeout = Duration::from_secs(4);
    lc.connect_timeout = Duration::from_secs(2);
    lc.backoff = Duration::from_millis(20);
    lc.max_backoff = Duration::from_millis(200);
    // Opening the session is one attempt; a fault may break it (then the next connection,
    // with its own RNG stream, tries again). What is under test is the calls.
    let mut outcome = None;
    for _ in 0..8 {
        let r = tokio::time::timeout(
            Duration::from_secs(40),
            load::run(lc.clone(), CancellationToken::new()),
        )
        .await
        .expect("load run finishes");
        if let Ok(o) = r {
            outcome = Some(o);
            break;
        }
    }
    let outcome = outcome.expect("the lab opens a session within 8 attempts");
    stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    tap.settle().await;
    lab_stop.cancel();
    Run {
        auditor,
        recorder,
        tap,
        outcome,
        proxy,
    }
}

/// Findings `unknown` because a request never reached the auditor.
pub fn unreleased_requests(findings: &[Finding]) -> Vec<Finding> {
    findings
        .iter()
        .filter(|f| f.kind == FindingKind::Unknown && f.detail.contains("never reached"))
        .cloned()
        .collect()
}

/// Asserts the delivery truth of `r`: the audit's delivered events equal the client's.
pub fn assert_delivery_truth(r: &Run, label: &str) {
    let audit = r.recorder.delivered();
    let client = r.tap.dispatched();
    assert!(
        !client.is_empty(),
        "{label}: the client received no event at all (the run proves nothing)"
    );
    if audit != client {
        let only_audit: Vec<_> = audit.iter().filter(|e| !client.contains(e)).collect();
        let only_client: Vec<_> = client.iter().filter(|e| !audit.contains(e)).collect();
        panic!(
            "{label}: audit and client disagree on delivered events\n only in audit: {only_audit:?}\n only at the client: {only_client:?}\n ({} vs {} events)",
            audit.len(),
            client.len()
        );
    }
    let cuts: u64 = r.proxy.stats().snapshot().cuts.iter().map(|c| c.1).sum();
    assert!(
        cuts > 0,
        "{label}: no cut happened (the run proves nothing)"
    );
    r.auditor.finish();
    let bad = unreleased_requests(&r.auditor.findings());
    assert!(bad.is_empty(), "{label}: requests never released: {bad:#?}");
}
