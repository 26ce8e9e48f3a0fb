//! An encoded (`Content-Encoding: gzip`) event stream is declared unobservable: the observer
//! reports giving up with the encoding named, records no events (even when the bytes happen to
//! look like SSE), and relays every byte.

#[path = "delivery_support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use support::Recorder;
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
