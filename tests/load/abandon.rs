//! The load client ends the sessions it abandons: streams cut by tearline's `sse_cut` are
//! resumed, the lab (a two-event ring, `on-evicted = error`) refuses the resume with 410, the
//! client renegotiates — and first sends DELETE for the old session, which the lab honours.
//!
//! load client → tearline proxy (sse_cut) → tap (records DELETE heads) → lab.

use crate::common;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::lab_client::{ACCEPT_BOTH, JSON, within};
use tearline::fault::sse_cut::{SseCutConfig, factory};
use tearline::lab::{LabConfig, OnEvicted, serve};
use tearline::load::era::EraChoice;
use tearline::load::{self, LoadConfig, Stop, Target};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::http1::observer_pair;
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Discard;

impl ObservationSink for Discard {
    fn record(&self, _obs: Observation) {}
}

/// The session ids of the DELETE requests seen in `head_bytes` from `from` on; returns where
/// the next scan starts.
fn deletes_in(bytes: &[u8], from: usize, out: &mut Vec<String>) -> usize {
    let mut at = from;
    while let Some(i) = find(&bytes[at..], b"DELETE ") {
        let start = at + i;
        let Some(end) = find(&bytes[start..], b"\r\n\r\n") else {
            return start;
        };
        let head = String::from_utf8_lossy(&bytes[start..start + end]).to_ascii_lowercase();
        if let Some(line) = head.lines().find(|l| l.starts_with("mcp-session-id:")) {
            out.push(line["mcp-session-id:".len()..].trim().to_owned());
        }
        at = start + end + 4;
    }
    at.max(bytes.len().saturating_sub(6))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A TCP relay to `upstream` that records the session id of every DELETE it forwards.
async fn tap(upstream: SocketAddr, deletes: Arc<Mutex<Vec<String>>>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind tap");
    let addr = l.local_addr().expect("tap addr");
    tokio::spawn(async move {
        while let Ok((client, _)) = l.accept().await {
            let deletes = Arc::clone(&deletes);
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = async move {
                    let (mut seen, mut scanned, mut buf) = (Vec::new(), 0, vec![0u8; 8192]);
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        let mut found = Vec::new();
                        scanned = deletes_in(&seen, scanned, &mut found);
                        if let Ok(mut d) = deletes.lock() {
                            d.extend(found);
                        }
                    }
                    let _ = sw.shutdown().await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    let _ = cw.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renegotiating_client_deletes_the_session_it_abandons() {
    within(async {
        let shutdown = CancellationToken::new();
        let lab_listener = TcpListener::bind("127.0.0.1:0").await.expect("bind lab");
        let lab_addr = lab_listener.local_addr().expect("lab addr");
        let lab_cfg = LabConfig {
            buffer: 2,
            on_evicted: OnEvicted::Error,
            ..LabConfig::default()
        };
        tokio::spawn(serve(lab_listener, lab_cfg, shutdown.clone()));
        let deletes = Arc::new(Mutex::new(Vec::new()));
        let tapped = tap(lab_addr, Arc::clone(&deletes)).await;

        // Every SSE stream is cut after 300 payload bytes.
        let cut: SseCutConfig =
            toml::from_str("at = \"any-byte\"\nrange = [300, 300]").expect("sse_cut config");
        let proxy = Proxy::with_faults(
            ProxyConfig::new("abandon", tapped.to_string()),
            vec![factory(cut)],
        );
        let sink: Arc<dyn ObservationSink> = Arc::new(Discard);
        proxy.set_observer_factory(Arc::new(move |conn| observer_pair(conn, sink.clone())));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let proxy_addr = listener.local_addr().expect("proxy addr");
        tokio::spawn(proxy::run(listener, proxy, shutdown.clone()));

        let target = Target::parse(&format!("http://{proxy_addr}/mcp")).expect("target");
        let args = serde_json::json!({"n": 40, "interval": 0});
        let mut cfg = LoadConfig::new(target, "progress", args);
        cfg.era = EraChoice::Legacy;
        cfg.stop = Stop::Calls(2);
        cfg.max_attempts = 4;
        cfg.call_timeout = Duration::from_secs(10);
        cfg.backoff = Duration::from_millis(50);
        let o = load::run(cfg, CancellationToken::new())
            .await
            .expect("run starts");
        let c = o.counters;
        assert!(
            c.renegotiations >= 1,
            "no renegotiation: {c:?} {:?}",
            o.errors
        );
        let deleted = deletes.lock().map(|d| d.clone()).unwrap_or_default();
        assert!(
            deleted.len() as u64 >= c.renegotiations,
            "{} renegotiations, {} DELETEs",
            c.renegotiations,
            deleted.len()
        );
        // The lab ended each of them: a request naming one is answered 404.
        for sid in &deleted {
            let mut conn = common::lab_client::Lab::connect_to(lab_addr).await;
            let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
            let ping = br#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
            let r = conn.request("POST", "/mcp", &h, ping).await;
            assert_eq!(r.status, 404, "session {sid} still open at the lab");
        }
        shutdown.cancel();
    })
    .await;
}
