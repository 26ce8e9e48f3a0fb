//! An encoded (`Content-Encoding: gzip`) event stream is declared unobservable: the observer
//! reports giving up with the encoding named, records no events (even when the bytes happen to
//! look like SSE), and relays every byte. The audit turns the give-up into one
//! `observer-gave-up` finding (class info) naming the encoding, in its findings, its log and
//! its summary; the same stream without the encoding yields events and no such finding.

use std::sync::Arc;
use std::time::Duration;

use crate::common::delivery::Recorder;
use tearline::audit::{AuditConfig, Auditor, FindingClass, FindingKind};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_event_stream_yields_no_events_and_a_named_give_up() {
    // Bytes that would dispatch two events if scanned as plain text.
    let payload = "id: 1\ndata: {\"a\":1}\n\nid: 2\ndata: {\"a\":2}\n\n";
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\n\r\n{payload}",
        payload.len()
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = l.local_addr().unwrap();
    let sent = response.clone();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut req = [0u8; 1024];
        let _ = s.read(&mut req).await;
        s.write_all(sent.as_bytes()).await.unwrap();
        let _ = s.shutdown().await;
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    });
    let recorder = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = recorder.clone();
    let proxy = Proxy::new(ProxyConfig::new("encoded", upstream.to_string()));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /events HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got))
        .await
        .expect("relay ends")
        .unwrap();
    drop(c);
    stop.cancel();
    let _ = task.await;
    assert_eq!(got, response.as_bytes(), "every byte relayed unchanged");
    let all = recorder.all();
    assert!(
        !all.iter()
            .any(|o| matches!(o, Observation::SseEvent { .. })),
        "bogus events: {all:#?}"
    );
    let reasons: Vec<&str> = all
        .iter()
        .filter_map(|o| match o {
            Observation::ObserverGaveUp { reason, .. } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons.len(), 1, "{all:#?}");
    assert!(
        reasons[0].contains("content-encoding gzip"),
        "{}",
        reasons[0]
    );
}

/// Relays `response` to one GET through a proxy whose observers report to `sink`; returns the
/// bytes the client got.
async fn relay_once(response: String, sink: Arc<dyn ObservationSink>) -> Vec<u8> {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut req = [0u8; 1024];
        let _ = s.read(&mut req).await;
        s.write_all(response.as_bytes()).await.unwrap();
        let _ = s.shutdown().await;
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest).await;
    });
    let proxy = Proxy::new(ProxyConfig::new("encoded-audit", upstream.to_string()));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /events HTTP/1.1\r\nhost: x\r\naccept-encoding: gzip\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut got))
        .await
        .expect("relay ends")
        .unwrap();
    drop(c);
    // The connection's close reaches the sink before the proxy stops.
    let closed = async {
        while proxy.stats().connections_open() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("connection closes");
    stop.cancel();
    let _ = task.await;
    got
}

fn sse_response(encoding: Option<&str>) -> String {
    let payload = "id: 1\ndata: {\"a\":1}\n\nid: 2\ndata: {\"a\":2}\n\n";
    let enc = encoding.map_or(String::new(), |e| format!("content-encoding: {e}\r\n"));
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n{enc}content-length: {}\r\n\r\n{payload}",
        payload.len()
    )
}

/// Runs one response through a proxy audited by a fresh auditor that logs to a file; returns
/// the auditor, the client's bytes and the log's text.
async fn audited(response: String) -> (Arc<Auditor>, Vec<u8>, String) {
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("findings.jsonl");
    auditor.log_to_file(&log).unwrap();
    let sink: Arc<dyn ObservationSink> = auditor.clone();
    let got = relay_once(response, sink).await;
    auditor.finish();
    auditor.flush_log();
    let text = std::fs::read_to_string(&log).unwrap();
    (auditor, got, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_event_stream_is_an_observer_gave_up_finding_naming_the_encoding() {
    let response = sse_response(Some("gzip"));
    let (auditor, got, log) = audited(response.clone()).await;
    assert_eq!(got, response.as_bytes(), "every byte relayed unchanged");
    let findings = auditor.findings();
    let gave_up: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::ObserverGaveUp)
        .collect();
    assert_eq!(gave_up.len(), 1, "{findings:#?}");
    assert_eq!(gave_up[0].class, FindingClass::Info);
    assert!(
        gave_up[0].detail.contains("content-encoding gzip"),
        "{}",
        gave_up[0].detail
    );
    assert_eq!(gave_up[0].stream.request, "GET /events");
    assert!(
        !findings.iter().any(|f| f.kind == FindingKind::PendingCall),
        "a blind leg derives no pending-call: {findings:#?}"
    );
    let line = log
        .lines()
        .find(|l| l.contains("\"observer-gave-up\""))
        .unwrap_or_else(|| panic!("no observer-gave-up line in the findings log:\n{log}"));
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["class"], "info");
    assert!(
        v["detail"].as_str().unwrap_or("").contains("gzip"),
        "{line}"
    );
    assert_eq!(auditor.counts().get("observer-gave-up"), Some(&1));
    let summary = auditor.summary();
    assert!(
        summary
            .lines()
            .any(|l| l.contains("observer-gave-up") && l.contains("info")),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_event_stream_has_no_observer_gave_up_finding() {
    let response = sse_response(None);
    let (auditor, got, log) = audited(response.clone()).await;
    assert_eq!(got, response.as_bytes());
    let findings = auditor.findings();
    assert!(
        !findings
            .iter()
            .any(|f| f.kind == FindingKind::ObserverGaveUp),
        "{findings:#?}"
    );
    assert!(!log.contains("observer-gave-up"), "{log}");
    assert!(!auditor.summary().contains("observer-gave-up"));
    assert!(
        auditor.remembered_events() >= 2,
        "the plain stream's events were audited"
    );
}
