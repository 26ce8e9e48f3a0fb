//! `clean-end` at every SSE position class, LF and CRLF: the proxy completes the HTTP chunk with
//! inert filler and ends the body; the client's scanner and the audit's cut record agree on
//! whether the event in progress was torn (a boundary stays clean, a cut inside an event stays
//! torn).

use std::sync::Arc;
use std::time::Duration;

use crate::common::delivery::*;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Observation, ObservationSink, SseClass, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A chunked SSE response, two events per HTTP chunk, with `eol` line ends.
fn body(eol: &str) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for pair in 0..4 {
        let mut chunk = String::new();
        for k in 0..2 {
            let n = pair * 2 + k + 1;
            chunk.push_str(&format!(
                "id: {n}{eol}event: message{eol}data: {{\"a\":{n},{eol}data: \"b\":[1,2,3]}}{eol}{eol}"
            ));
        }
        out.extend_from_slice(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

async fn server(body: Vec<u8>) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let body = Arc::new(body);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut req = [0u8; 1024];
                let _ = s.read(&mut req).await;
                let _ = s.write_all(&body).await;
                let _ = s.shutdown().await;
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest).await;
            });
        }
    });
    addr
}

/// One clean-end cut aimed at `class`; returns (class cut, audit says torn, client has a
/// partial event), or `None` when the stream had no such position.
async fn cut_once(class: &str, eol: &str, seed: u64) -> Option<(SseClass, bool, bool)> {
    let upstream = server(body(eol)).await;
    let recorder = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = recorder.clone();
    let mut cfg = ProxyConfig::new("clean-end", upstream.to_string());
    cfg.seed = seed;
    let proxy = Proxy::new(cfg);
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    proxy.set_faults(vec![fault(&[
        ("kind", s("sse_cut")),
        ("direction", s("downstream")),
        ("at", s(class)),
        ("range", toml::Value::Array(vec![i(20), i(300)])),
        ("action", s("clean-end")),
    ])]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /events HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut raw))
        .await
        .expect("the proxy ends the stream");
    drop(c);
    stop.cancel();
    let _ = task.await;
    let point = recorder.all().into_iter().find_map(|o| match o {
        Observation::Cut { point, action, .. } => Some((point, action)),
        _ => None,
    });
    let (point, _) = point?;
    let cut_class = point.class?;
    let (_, partial) = client_scan(&raw);
    Some((cut_class, cut_class.tears_event(), partial))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_end_leaves_the_client_exactly_as_torn_as_the_audit_records() {
    let classes = [
        "boundary",
        "field-name",
        "after-colon",
        "mid-value",
        "before-eol",
        "cr-lf",
        "before-dispatch",
        "dispatch-cr-lf",
        "after-id",
        "mid-id",
    ];
    let mut checked = 0;
    for eol in ["\n", "\r\n"] {
        for class in classes {
            for seed in 1..=3 {
                let Some((cut, audit_torn, client_torn)) = cut_once(class, eol, seed).await else {
                    continue;
                };
                assert_eq!(
                    audit_torn, client_torn,
                    "clean-end at {cut} ({eol:?}, seed {seed}): audit torn={audit_torn}, client torn={client_torn}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} cuts were made");
}

/// Notes, when the cut is recorded, how many bytes the client had then (waiting up to 300 ms
/// for more to arrive, so a clean end written before the record would be seen).
struct CutWatch {
    received: Arc<std::sync::atomic::AtomicUsize>,
    seen: std::sync::Mutex<Option<(u64, usize)>>,
}

impl ObservationSink for CutWatch {
    fn record(&self, obs: Observation) {
        let Observation::Cut { point, .. } = obs else {
            return;
        };
        let load = || self.received.load(std::sync::atomic::Ordering::SeqCst);
        let until = std::time::Instant::now() + Duration::from_millis(300);
        while load() as u64 <= point.raw_offset && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        *self.seen.lock().unwrap() = Some((point.raw_offset, load()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_end_cut_is_recorded_before_the_client_can_see_the_end() {
    // Once the client has the clean end it may reconnect; the audit must have the cut first,
    // whichever thread runs (as for a reset or a FIN, carried out after the record).
    let upstream = server(body("\n")).await;
    let received = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watch = Arc::new(CutWatch {
        received: received.clone(),
        seen: std::sync::Mutex::new(None),
    });
    let sink: Arc<dyn ObservationSink> = watch.clone();
    let proxy = Proxy::new(ProxyConfig::new("clean-end-order", upstream.to_string()));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    proxy.set_faults(vec![fault(&[
        ("kind", s("sse_cut")),
        ("direction", s("downstream")),
        ("at", s("mid-value")),
        ("range", toml::Value::Array(vec![i(20), i(300)])),
        ("action", s("clean-end")),
    ])]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));
    // The client reads on its own thread, counting what it has.
    let client = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"GET /events HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = c.read(&mut buf) {
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
            received.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        }
        raw
    });
    let raw = tokio::task::spawn_blocking(move || client.join().unwrap())
        .await
        .unwrap();
    stop.cancel();
    let _ = task.await;
    let (cut_at, had) = watch.seen.lock().unwrap().expect("the proxy cut");
    assert!(
        had as u64 <= cut_at,
        "the client had {had} bytes when the cut at {cut_at} was recorded"
    );
    // The clean end did follow the record: the client got more than the cut's bytes, and a
    // body that ended cleanly.
    assert!(raw.len() as u64 > cut_at, "no clean end after the cut");
    assert!(raw.ends_with(b"0\r\n\r\n"), "the body did not end cleanly");
}
