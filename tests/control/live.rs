//! The control API over the real relay (`RuntimeHub`) and fault registry
//! (`RegistryCatalog`): toxics change live connections without losing or reordering a byte,
//! and `/metrics` counts what went through.

use std::time::Duration;

use crate::common::control::live::{create, start_live};
use crate::common::control::prom::{get, parse};
use crate::common::control::{TEST_TIMEOUT, call, echo_server};
use http::{Method, StatusCode};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Byte `i` of the sequenced stream with seed `seed`, in blocks.
fn fill(seed: u64, block: u64, buf: &mut [u8]) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ block.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    rng.fill(buf);
}

const TOTAL: u64 = 64 << 20;
const BLOCK: usize = 128 << 10;
const CHANGES: u64 = 500;

/// Sends TOTAL sequenced bytes, pausing before each of CHANGES segments until that many
/// toxic changes were made (so changes interleave with data in flight).
async fn send_sequenced(
    mut w: impl tokio::io::AsyncWrite + Unpin,
    seed: u64,
    mut made: tokio::sync::watch::Receiver<u64>,
) {
    let mut buf = vec![0u8; BLOCK];
    let blocks = TOTAL / BLOCK as u64;
    for b in 0..blocks {
        let want = b * CHANGES / blocks;
        let _ = made.wait_for(|m| *m >= want).await;
        fill(seed, b, &mut buf);
        w.write_all(&buf).await.expect("write sequenced");
    }
    w.shutdown().await.expect("shutdown");
}

/// Reads and checks TOTAL sequenced bytes; returns the count read.
async fn check_sequenced(mut r: impl tokio::io::AsyncRead + Unpin, seed: u64) -> u64 {
    let mut want = vec![0u8; BLOCK];
    let mut got = vec![0u8; BLOCK];
    let mut pos: u64 = 0;
    let mut filled = 0usize;
    let mut block = 0u64;
    fill(seed, 0, &mut want);
    loop {
        let n = r.read(&mut got[filled..]).await.expect("read sequenced");
        if n == 0 {
            break;
        }
        let start = filled;
        filled += n;
        if let Some(i) = (start..filled).find(|&i| got[i] != want[i]) {
            panic!("byte {} differs", pos + i as u64);
        }
        if filled == BLOCK {
            pos += BLOCK as u64;
            block += 1;
            filled = 0;
            fill(seed, block, &mut want);
        }
    }
    pos + filled as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequenced_64_mib_each_way_is_byte_exact_while_toxics_change_500_times() {
    tokio::time::timeout(Duration::from_secs(120), async {
        let live = start_live().await;
        // Upstream: sends its own sequenced stream, checks the client's.
        let server = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
        let server_addr = server.local_addr().expect("server addr");
        let (made_tx, made_rx) = tokio::sync::watch::channel(0u64);
        let server_rx = made_rx.clone();
        let server_task = tokio::spawn(async move {
            let (s, _) = server.accept().await.expect("accept");
            let (r, w) = s.into_split();
            let (_, got) = tokio::join!(send_sequenced(w, 2, server_rx), check_sequenced(r, 1));
            got
        });
        let listen = create(live.addr, "seq", server_addr).await;
        let client = TcpStream::connect(&listen).await.expect("connect proxy");
        let (r, w) = client.into_split();
        let client_task = tokio::spawn(async move {
            let (_, got) = tokio::join!(send_sequenced(w, 1, made_rx), check_sequenced(r, 2));
            got
        });

        // 500 changes: add, update or remove non-destructive toxics on both streams.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let mut present: Vec<String> = Vec::new();
        for i in 0..CHANGES {
            let r = if !present.is_empty() && (present.len() >= 4 || rng.random_bool(0.4)) {
                let name = present.swap_remove(rng.random_range(0..present.len()));
                let path = format!("/proxies/seq/toxics/{name}");
                if rng.random_bool(0.5) && name.starts_with("latency") {
                    present.push(name);
                    let patch = json!({"attributes": {"latency": rng.random_range(0..3)}});
                    call(live.addr, Method::PATCH, &path, Some(patch)).await
                } else {
                    call(live.addr, Method::DELETE, &path, None).await
                }
            } else {
                let stream = if rng.random_bool(0.5) { "upstream" } else { "downstream" };
                let (type_, attributes) = match rng.random_range(0..4) {
                    0 => ("latency", json!({"latency": rng.random_range(0..3), "jitter": 0})),
                    1 => ("bandwidth", json!({"rate": 2_000_000})),
                    2 => ("slicer", json!({"average_size": 4096, "size_variation": 1024, "delay": 0})),
                    _ => ("stall", json!({"duration_ms": 1, "at_byte": rng.random_range(0..(TOTAL / 2))})),
                };
                let name = format!("{type_}_{stream}_{i}");
                present.push(name.clone());
                let t = json!({"name": name, "type": type_, "stream": stream, "attributes": attributes});
                call(live.addr, Method::POST, "/proxies/seq/toxics", Some(t)).await
            };
            assert!(r.status.is_success(), "change {i}: {} {}", r.status, r.text());
            made_tx.send_replace(i + 1);
        }
        assert_eq!(client_task.await.expect("client"), TOTAL);
        assert_eq!(server_task.await.expect("server"), TOTAL);

        let m = parse(&call(live.addr, Method::GET, "/metrics", None).await.text()).expect("valid");
        for dir in ["upstream", "downstream"] {
            assert_eq!(
                get(&m, "tearline_proxy_bytes_total", &[("proxy", "seq"), ("direction", dir)]),
                Some(TOTAL as f64),
                "{dir}"
            );
        }
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn metrics_count_relayed_bytes_connections_and_fault_activations() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let live = start_live().await;
        let listen = create(live.addr, "m", echo_server().await).await;
        let t = json!({"type": "latency", "attributes": {"latency": 1}});
        assert_eq!(
            call(live.addr, Method::POST, "/proxies/m/toxics", Some(t))
                .await
                .status,
            StatusCode::OK
        );
        for _ in 0..3 {
            let mut s = TcpStream::connect(&listen).await.expect("connect");
            s.write_all(&[5u8; 100_000]).await.expect("write");
            s.shutdown().await.expect("shutdown");
            let mut back = Vec::new();
            s.read_to_end(&mut back).await.expect("read");
            assert_eq!(back.len(), 100_000);
        }
        let mut m =
            parse(&call(live.addr, Method::GET, "/metrics", None).await.text()).expect("valid");
        for _ in 0..200 {
            if get(&m, "tearline_proxy_connections_open", &[("proxy", "m")]) == Some(0.0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            m = parse(&call(live.addr, Method::GET, "/metrics", None).await.text()).expect("valid");
        }
        let p = [("proxy", "m")];
        assert_eq!(get(&m, "tearline_proxy_connections_total", &p), Some(3.0));
        assert_eq!(get(&m, "tearline_proxy_connections_open", &p), Some(0.0));
        for dir in ["upstream", "downstream"] {
            assert_eq!(
                get(
                    &m,
                    "tearline_proxy_bytes_total",
                    &[("proxy", "m"), ("direction", dir)]
                ),
                Some(300_000.0)
            );
        }
        assert_eq!(
            get(
                &m,
                "tearline_fault_activations_total",
                &[("proxy", "m"), ("kind", "latency")]
            ),
            Some(3.0)
        );
        assert!(get(&m, "tearline_proxy_residence_seconds_count", &p).is_some());
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn disabling_closes_the_port_and_enabling_reopens_it_with_the_same_address() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let live = start_live().await;
        let listen = create(live.addr, "d", echo_server().await).await;
        let r = call(
            live.addr,
            Method::PATCH,
            "/proxies/d",
            Some(json!({"enabled": false})),
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        assert!(
            TcpStream::connect(&listen).await.is_err(),
            "port still open after disable"
        );
        let r = call(
            live.addr,
            Method::PATCH,
            "/proxies/d",
            Some(json!({"enabled": true})),
        )
        .await;
        assert_eq!(r.json()["listen"], json!(listen));
        let mut s = TcpStream::connect(&listen).await.expect("reconnect");
        s.write_all(b"hi").await.expect("write");
        let mut b = [0u8; 2];
        s.read_exact(&mut b).await.expect("echo");
        assert_eq!(&b, b"hi");
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}

/// Whether one echo round trip through `listen` succeeds.
async fn echoes(listen: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(listen).await else {
        return false;
    };
    if s.write_all(b"hi").await.is_err() {
        return false;
    }
    let mut b = [0u8; 2];
    matches!(
        tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut b)).await,
        Ok(Ok(_))
    ) && &b == b"hi"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_toxic_refuses_connections_for_its_window_then_service_resumes() {
    tokio::time::timeout(TEST_TIMEOUT, async {
        let live = start_live().await;
        let listen = create(live.addr, "o", echo_server().await).await;
        assert!(echoes(&listen).await);
        let bad = json!({"type": "outage", "toxicity": 0.5, "attributes": {"duration_ms": 100}});
        let r = call(live.addr, Method::POST, "/proxies/o/toxics", Some(bad)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
        let bad = json!({"type": "outage", "attributes": {"duration_ms": 0}});
        let r = call(live.addr, Method::POST, "/proxies/o/toxics", Some(bad)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());

        let t = json!({"type": "outage", "attributes": {"duration_ms": 1500}});
        let r = call(live.addr, Method::POST, "/proxies/o/toxics", Some(t)).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["name"], json!("outage_downstream"));
        assert!(!echoes(&listen).await, "served inside the outage window");
        let mut resumed = false;
        for _ in 0..100 {
            if echoes(&listen).await {
                resumed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(resumed, "service did not resume after the window");
        let r = call(
            live.addr,
            Method::DELETE,
            "/proxies/o/toxics/outage_downstream",
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::NO_CONTENT);
        live.shutdown.cancel();
    })
    .await
    .expect("test timed out");
}
