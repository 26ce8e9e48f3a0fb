//! Bounded observer memory: an SSE line that never ends keeps being relayed byte for byte, the
//! observer reports that it gave up on the stream, and the proxy's `bytes_buffered` gauge never
//! grows with the line. The audit reports the give-up as one `observer-gave-up` finding.

use std::sync::Arc;
use std::time::Duration;

use crate::common::delivery::Recorder;
use tearline::audit::{AuditConfig, Auditor, FindingKind};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::http1::{LINE_LIMIT, observer_pair};
use tearline::wire::observe::FanOut;
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_never_ending_data_line_is_relayed_and_the_observer_gives_up() {
    let total = LINE_LIMIT as usize + (8 << 20);
    let server = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = server.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = server.accept().await.unwrap();
        let mut req = [0u8; 1024];
        let _ = s.read(&mut req).await;
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ";
        s.write_all(head).await.unwrap();
        let block = vec![b'a'; 1 << 20];
        let mut sent = 0;
        while sent < total {
            let n = block.len().min(total - sent);
            if s.write_all(&block[..n]).await.is_err() {
                return;
            }
            sent += n;
        }
        let _ = s.shutdown().await;
    });
    let recorder = Arc::new(Recorder::default());
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let sink: Arc<dyn ObservationSink> = Arc::new(FanOut(vec![
        recorder.clone() as Arc<dyn ObservationSink>,
        auditor.clone() as Arc<dyn ObservationSink>,
    ]));
    let proxy = Proxy::new(ProxyConfig::new("giveup", upstream.to_string()));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| observer_pair(conn, sink.clone())));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));

    let relay = async {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /events HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 256 * 1024];
        let (mut got, mut peak) = (0usize, 0u64);
        loop {
            let n = c.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            got += n;
            peak = peak.max(proxy.stats().bytes_buffered());
        }
        drop(c);
        (got, peak)
    };
    let (got, peak) = tokio::time::timeout(Duration::from_secs(60), relay)
        .await
        .expect("relay finishes");
    let head_len = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: ".len();
    assert_eq!(got, head_len + total, "every byte relayed");
    let gave_up: Vec<_> = recorder
        .all()
        .into_iter()
        .filter(|o| matches!(o, Observation::ObserverGaveUp { .. }))
        .collect();
    assert_eq!(gave_up.len(), 1, "{gave_up:?}");
    if let Observation::ObserverGaveUp {
        reason, raw_offset, ..
    } = &gave_up[0]
    {
        assert!(reason.contains("line too long"), "{reason}");
        assert!(*raw_offset > LINE_LIMIT, "{raw_offset}");
    }
    assert!(
        peak < 4 << 20,
        "bytes_buffered peaked at {peak} bytes while relaying one {total}-byte line"
    );
    let findings = auditor.findings();
    let gave_up: Vec<_> = findings
        .iter()
        .filter(|f| f.kind == FindingKind::ObserverGaveUp)
        .collect();
    assert_eq!(gave_up.len(), 1, "{findings:#?}");
    assert!(
        gave_up[0].detail.contains("line too long"),
        "{}",
        gave_up[0].detail
    );
    assert!(auditor.summary().contains("observer-gave-up"));
    stop.cancel();
    let _ = task.await;
}
