//! TLS truncations through the real proxy (TLS termination with a local-CA certificate, in
//! front of the lab, every stream cut by `fin` at `before-dispatch` without `close_notify`),
//! judged by the audit: the cuts are reported as truncations; the strict load client never
//! counts such a call complete and is never reported as accepting a truncation; a careless
//! client that reads to the end of the bytes and goes on with its next call is reported
//! `truncation-accepted`.

use std::sync::Arc;
use std::time::Duration;

use crate::common::tls::{Recorder, terminator, tls_connect};
use tearline::audit::{AuditConfig, Auditor, Finding, FindingKind};
use tearline::fault::sse_cut::{SseCutConfig, factory};
use tearline::lab::{LabConfig, serve};
use tearline::load::{self, LoadConfig, Policy, Stop, Target};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// Records observations and feeds the auditor.
struct Both(Arc<Recorder>, Arc<Auditor>);

impl ObservationSink for Both {
    fn record(&self, obs: Observation) {
        self.0.record(obs.clone());
        self.1.record(obs);
    }
}

/// The lab behind a TLS-terminating proxy whose `sse_cut` truncates every stream at
/// `before-dispatch`.
struct Setup {
    lab: std::net::SocketAddr,
    port: u16,
    ca: std::path::PathBuf,
    auditor: Arc<Auditor>,
    rec: Arc<Recorder>,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Setup {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn setup() -> Setup {
    let stop = CancellationToken::new();
    let lab = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lab_addr = lab.local_addr().unwrap();
    tokio::spawn(serve(lab, LabConfig::default(), stop.clone()));
    let dir = tempfile::tempdir().unwrap();
    let t = terminator(dir.path());
    let ca = t.ca_file().unwrap().to_owned();
    let mut cfg = ProxyConfig::new("trunc", lab_addr.to_string());
    cfg.tls.client = Some(t);
    cfg.drain_timeout = Duration::from_secs(1);
    let cut: SseCutConfig = toml::from_str("at = \"before-dispatch\"\naction = \"fin\"").unwrap();
    let proxy = Proxy::with_faults(cfg, vec![factory(cut)]);
    let rec = Arc::new(Recorder::default());
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let sink: Arc<dyn ObservationSink> = Arc::new(Both(rec.clone(), auditor.clone()));
    let s2 = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| {
        tearline::wire::http1::observer_pair(conn, s2.clone())
    }));
    proxy.set_sink(Some(sink));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    Setup {
        lab: lab_addr,
        port,
        ca,
        auditor,
        rec,
        stop,
        _dir: dir,
    }
}

fn of_kind(findings: &[Finding], kind: FindingKind) -> Vec<&Finding> {
    findings.iter().filter(|f| f.kind == kind).collect()
}

/// Every cut the proxy made, as (class, tls_end) names.
fn cuts(s: &Setup) -> Vec<(String, String)> {
    s.rec
        .0
        .lock()
        .unwrap()
        .iter()
        .filter_map(|o| match o {
            Observation::Cut { point, .. } => Some((
                point.class.map_or("-", |c| c.as_str()).to_owned(),
                point.tls_end.map_or("-", |e| e.as_str()).to_owned(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_client_through_truncations_counts_nothing_complete_and_accepts_none() {
    let s = setup().await;
    let url = format!("https://localhost:{}/mcp", s.port);
    let mut cfg = LoadConfig::new(
        Target::parse_with_ca(&url, std::slice::from_ref(&s.ca)).unwrap(),
        "blob",
        serde_json::json!({"size": 4096, "lines": 3}),
    );
    cfg.policy = Policy::Strict;
    cfg.sessions = 1;
    cfg.stop = Stop::Calls(2);
    cfg.max_attempts = 3;
    cfg.call_timeout = Duration::from_secs(5);
    let o = tokio::time::timeout(
        Duration::from_secs(30),
        load::run(cfg, CancellationToken::new()),
    )
    .await
    .expect("run finishes")
    .expect("the lab answers over TLS");
    let c = o.counters;
    assert_eq!(
        (c.calls, c.ok, c.silent_loss),
        (2, 0, 0),
        "every stream is cut, no call may count complete: {c:?}"
    );
    s.auditor.finish();
    let findings = s.auditor.findings();
    let torn = of_kind(&findings, FindingKind::TornCut);
    assert!(!torn.is_empty(), "{findings:#?}");
    for f in &torn {
        assert_eq!(f.cut.class_name(), Some("before-dispatch"), "{f:#?}");
        assert_eq!(
            f.cut.tls_end.map(|e| e.as_str()),
            Some("truncated"),
            "{f:#?}"
        );
    }
    assert!(
        of_kind(&findings, FindingKind::TruncationAccepted).is_empty(),
        "the strict client resumed every truncated stream: {findings:#?}"
    );
    for cut in cuts(&s) {
        assert_eq!(cut, ("before-dispatch".into(), "truncated".into()));
    }
}

/// Sends one HTTP/1.1 request on `io`.
async fn send<S: AsyncWrite + Unpin>(io: &mut S, session: &str, body: &str) {
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nMcp-Session-Id: {session}\r\n\
         MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    io.write_all(req.as_bytes()).await.unwrap();
}

/// Reads until the bytes end, taking a TLS error (no close_notify) for the end, as a careless
/// client does; returns what came.
async fn read_to_end_carelessly<S: AsyncRead + Unpin>(io: &mut S) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(10), io.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads a response head (through the blank line).
async fn head<S: AsyncRead + Unpin>(io: &mut S) -> String {
    let mut out = Vec::new();
    let mut byte = [0u8; 1];
    while !out.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), io.read(&mut byte))
            .await
            .expect("a response head within 10 s")
            .unwrap();
        assert!(
            n > 0,
            "the head ended early: {}",
            String::from_utf8_lossy(&out)
        );
        out.push(byte[0]);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A session opened directly on the lab (initialize + initialized).
async fn lab_session(lab: std::net::SocketAddr) -> String {
    let mut c = tokio::net::TcpStream::connect(lab).await.unwrap();
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"careless","version":"0"}}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{init}",
        init.len()
    );
    c.write_all(req.as_bytes()).await.unwrap();
    let resp = head(&mut c).await;
    let sid = resp
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {resp}"));
    let mut c = tokio::net::TcpStream::connect(lab).await.unwrap();
    send(
        &mut c,
        &sid,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    let h = head(&mut c).await;
    assert!(h.starts_with("HTTP/1.1 202"), "{h}");
    sid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn careless_client_moving_on_after_a_truncation_is_truncation_accepted() {
    let s = setup().await;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], s.port));
    let sid = lab_session(s.lab).await;
    let call = |id: u64, size: u64| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"blob","arguments":{{"size":{size},"lines":3}}}}}}"#
        )
    };
    let mut first = tls_connect(addr, "localhost", &s.ca).await.unwrap();
    send(&mut first, &sid, &call(1, 4096)).await;
    let got = read_to_end_carelessly(&mut first).await;
    assert!(got.contains("data:"), "{got}");
    // The careless client took that for the answer and goes on.
    let mut next = tls_connect(addr, "localhost", &s.ca).await.unwrap();
    send(&mut next, &sid, &call(2, 2048)).await;
    read_to_end_carelessly(&mut next).await;
    s.auditor.finish();
    let findings = s.auditor.findings();
    let accepted = of_kind(&findings, FindingKind::TruncationAccepted);
    assert_eq!(accepted.len(), 1, "{findings:#?}");
    let f = accepted[0];
    assert_eq!(f.session.as_deref(), Some(sid.as_str()));
    assert_eq!(f.ids, vec!["1".to_string()]);
    assert_eq!(f.cut.class_name(), Some("before-dispatch"));
    assert_eq!(f.cut.tls_end.map(|e| e.as_str()), Some("truncated"));
    assert!(f.detail.contains("tools/call 2"), "{}", f.detail);
    let torn = of_kind(&findings, FindingKind::TornCut);
    assert!(
        torn.iter().any(|t| t.raw_offsets == f.raw_offsets
            && t.cut.tls_end.map(|e| e.as_str()) == Some("truncated")),
        "{findings:#?}"
    );
}
