//! Honest figures: what the replay's tap (timeline, story) reports comes from the traffic, not
//! from the profile. Each cut's outage is the window that cut opened (none for a cut that
//! opened none, even when another fault of the profile has `outage_ms`), and a torn event's
//! data line count is the one seen on the wire when the event later came through whole.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::common::delivery::*;
use tearline::audit::{AuditConfig, Auditor};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::replay::tap::{Moment, Tap};
use tearline::wire::record::CutRecord;
use tearline::wire::{Observation, ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Two events of three data lines each, in two HTTP chunks, for every request.
fn response() -> String {
    let mut out =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_string();
    for part in [
        "id: 1\ndata: aa\ndata: bb\ndata: cc\n\nid: 2\ndata: dd\n",
        "data: ee\ndata: ff\n\n",
    ] {
        out.push_str(&format!("{:x}\r\n{part}\r\n", part.len()));
    }
    out.push_str("0\r\n\r\n");
    out
}

async fn server() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut req = [0u8; 1024];
                let _ = s.read(&mut req).await;
                let _ = s.write_all(response().as_bytes()).await;
                let _ = s.shutdown().await;
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest).await;
            });
        }
    });
    addr
}

fn cut_on(path: &str, outage_ms: Option<i64>) -> Arc<dyn tearline::fault::FaultFactory> {
    let mut pairs = vec![
        ("kind", s("sse_cut")),
        ("direction", s("downstream")),
        ("at", s("mid-value")),
        ("path", s(path)),
        ("action", s("reset")),
    ];
    if let Some(ms) = outage_ms {
        pairs.push(("outage_ms", i(ms)));
    }
    fault(&pairs)
}

async fn get(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // A reset ends the read with an error: what arrived before it is what counts.
    while let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_outages_and_torn_event_line_counts_come_from_the_traffic() {
    let upstream = server().await;
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let tap = Arc::new(Tap::new(auditor));
    let recorder = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = Arc::new(tearline::wire::observe::FanOut(vec![
        tap.clone() as Arc<dyn ObservationSink>,
        recorder.clone() as Arc<dyn ObservationSink>,
    ]));
    let proxy = Proxy::new(ProxyConfig::new("figures", upstream.to_string()));
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    proxy.set_faults(vec![cut_on("/held", Some(300)), cut_on("/plain", None)]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), stop.clone()));

    let held = get(addr, "/held").await;
    assert!(!held.ends_with(b"0\r\n\r\n"), "the /held stream was cut");
    // Held until the 300 ms window ends, then cut without an outage of its own.
    let plain = get(addr, "/plain").await;
    assert!(!plain.ends_with(b"0\r\n\r\n"), "the /plain stream was cut");
    let whole = get(addr, "/whole").await;
    assert!(
        whole.ends_with(b"0\r\n\r\n"),
        "the /whole stream was not cut"
    );
    stop.cancel();
    let _ = task.await;

    let outages: Vec<(String, Option<Duration>)> = tap
        .moments()
        .into_iter()
        .filter_map(|m| match m {
            Moment::Cut { point, outage, .. } => Some((point.request.unwrap_or_default(), outage)),
            _ => None,
        })
        .collect();
    assert_eq!(outages.len(), 2, "{outages:?}");
    assert_eq!(outages[0].0, "GET /held");
    let d = outages[0].1.expect("the /held cut opened an outage");
    assert!(
        // The window is the configured 300 ms less the time the cut took to take effect (the
        // lower bound allows that 250 ms: a check of the window, not of the clock).
        d > Duration::from_millis(50) && d <= Duration::from_millis(300),
        "{d:?}"
    );
    assert_eq!(outages[1], ("GET /plain".to_string(), None));

    let records: Vec<CutRecord> = recorder
        .all()
        .iter()
        .filter_map(|o| CutRecord::from_observation(o, "figures", SystemTime::now()))
        .collect();
    assert_eq!(records.len(), 2);
    assert!(
        records[0]
            .point
            .outage_ms
            .is_some_and(|ms| ms > 50 && ms <= 300)
    );
    assert_eq!(records[1].point.outage_ms, None);

    // Event 1 was torn mid-value (pending id 1) and came through whole on /whole.
    assert!(
        recorder.all().iter().any(|o| matches!(
            o,
            Observation::Cut { point, .. } if point.pending_id.as_deref() == Some("1")
        )),
        "event 1 was torn"
    );
    assert_eq!(tap.data_lines_of("1"), Some(3));
    assert_eq!(tap.data_lines_of("2"), None, "event 2 was never torn");
    let lines: Vec<u32> = recorder
        .all()
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent { data_lines, .. } => Some(*data_lines),
            _ => None,
        })
        .collect();
    assert_eq!(lines, vec![3, 3], "the /whole stream's two events");
}
