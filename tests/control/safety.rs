//! The control API refuses browsers (403), wrong tokens (401) and oversized bodies (413),
//! answers malformed input with 400, and keeps serving after all of it.

use crate::common::control::{TEST_TIMEOUT, call, call_with, start_api};
use http::{Method, StatusCode};
use rand::{RngExt, SeedableRng};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn within<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(TEST_TIMEOUT, f)
        .await
        .expect("test timed out");
}

#[tokio::test]
async fn browser_origin_requests_are_forbidden_and_change_nothing() {
    within(async {
        let api = start_api(|_| {}).await;
        let body = Some(br#"{"name":"x","upstream":"127.0.0.1:1"}"#.to_vec());
        for headers in [
            &[("origin", "http://evil.example")][..],
            &[("sec-fetch-site", "cross-site")][..],
            &[("sec-fetch-site", "same-origin")][..],
            &[("user-agent", "Mozilla/5.0 (X11; Linux x86_64)")][..],
        ] {
            let r = call_with(api.addr, Method::POST, "/proxies", headers, body.clone()).await;
            assert_eq!(r.status, StatusCode::FORBIDDEN, "{headers:?}");
            assert_eq!(r.json()["status"], json!(403));
        }
        let r = call_with(
            api.addr,
            Method::GET,
            "/proxies",
            &[("sec-fetch-site", "none")],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.json(), json!({}));
    })
    .await;
}

#[tokio::test]
async fn wrong_or_missing_token_is_401_and_the_right_one_passes() {
    within(async {
        let api = start_api(|c| c.token = Some("s3cret".into())).await;
        let r = call(api.addr, Method::GET, "/proxies", None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            r.headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
        let r = call_with(
            api.addr,
            Method::GET,
            "/proxies",
            &[("authorization", "Bearer wrong")],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let r = call_with(
            api.addr,
            Method::GET,
            "/proxies",
            &[("authorization", "s3cret")],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED);
        let r = call_with(
            api.addr,
            Method::GET,
            "/proxies",
            &[("authorization", "Bearer s3cret")],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::OK);
        // The origin check comes first: a browser with the token is still refused.
        let r = call_with(
            api.addr,
            Method::GET,
            "/proxies",
            &[("authorization", "Bearer s3cret"), ("origin", "http://x")],
            None,
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN);
    })
    .await;
}

/// Sends a raw request and returns the status line (or what came back).
async fn raw(addr: std::net::SocketAddr, head: String, body: Vec<u8>) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut r, mut w) = s.split();
    let send = async {
        let _ = w.write_all(head.as_bytes()).await;
        let _ = w.write_all(&body).await;
    };
    let mut out = Vec::new();
    let recv = async {
        let _ = r.read_to_end(&mut out).await;
    };
    tokio::join!(send, recv);
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn one_mebibyte_garbage_body_is_413_and_the_server_still_answers() {
    within(async {
        let api = start_api(|_| {}).await;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let garbage: Vec<u8> = (0..1 << 20).map(|_| rng.random()).collect();
        let head = format!(
            "POST /proxies HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            garbage.len()
        );
        let status = raw(api.addr, head, garbage.clone()).await;
        assert_eq!(status, "HTTP/1.1 413 Payload Too Large");
        // Chunked, no declared length.
        let mut chunked = Vec::new();
        for part in garbage.chunks(4096) {
            chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
            chunked.extend_from_slice(part);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let head = "POST /populate HTTP/1.1\r\nhost: localhost\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n".to_owned();
        assert_eq!(raw(api.addr, head, chunked).await, "HTTP/1.1 413 Payload Too Large");
        let r = call(api.addr, Method::GET, "/version", None).await;
        assert_eq!(r.status, StatusCode::OK);
    })
    .await;
}

#[tokio::test]
async fn garbage_within_the_limit_is_400_on_every_writing_route() {
    within(async {
        let api = start_api(|_| {}).await;
        let ok = call(
            api.addr,
            Method::POST,
            "/proxies",
            Some(json!({"name": "p", "upstream": "127.0.0.1:1"})),
        )
        .await;
        assert_eq!(ok.status, StatusCode::CREATED);
        call(
            api.addr,
            Method::POST,
            "/proxies/p/toxics",
            Some(json!({"type": "latency"})),
        )
        .await;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let routes = [
            (Method::POST, "/proxies"),
            (Method::POST, "/populate"),
            (Method::PATCH, "/proxies/p"),
            (Method::POST, "/proxies/p/toxics"),
            (Method::PATCH, "/proxies/p/toxics/latency_downstream"),
        ];
        let bodies: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"{".to_vec(),
            b"{\"name\": 5}".to_vec(),
            b"{\"attributes\": [1]}".to_vec(),
            b"\xff\xfe\x00".to_vec(),
            (0..10_000).map(|_| rng.random()).collect(),
        ];
        for (method, path) in &routes {
            for body in &bodies {
                let r = call_with(api.addr, method.clone(), path, &[], Some(body.clone())).await;
                assert_eq!(
                    r.status,
                    StatusCode::BAD_REQUEST,
                    "{method} {path} {:?}: {}",
                    &body[..body.len().min(20)],
                    r.text()
                );
                assert_eq!(r.json()["status"], json!(400));
                let msg = r.json()["error"].as_str().unwrap_or_default().to_owned();
                assert!(
                    [
                        "bad request body: ",
                        "missing required field",
                        "invalid toxic type"
                    ]
                    .iter()
                    .any(|p| msg.starts_with(p)),
                    "{msg}"
                );
            }
        }
        // Nothing changed.
        let p = call(api.addr, Method::GET, "/proxies/p", None).await.json();
        assert_eq!(p["toxics"].as_array().map(Vec::len), Some(1));
        assert_eq!(p["enabled"], json!(true));
    })
    .await;
}

#[tokio::test]
async fn random_requests_never_get_a_server_error_and_the_server_keeps_answering() {
    within(async {
        let api = start_api(|_| {}).await;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let methods = [
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
            Method::PUT,
        ];
        let paths = [
            "/proxies",
            "/populate",
            "/reset",
            "/proxies/a",
            "/proxies/a/toxics",
            "/proxies/a/toxics/latency_downstream",
            "/proxies/%ff%00",
            "/version",
            "/metrics",
        ];
        let bodies = [
            json!({"name": "a", "upstream": "127.0.0.1:1", "listen": "127.0.0.1:0"}),
            json!({"type": "latency", "attributes": {"latency": 3}}),
            json!({"type": "sse_cut", "stream": "UPSTREAM", "toxicity": 0}),
            json!({"enabled": false}),
            json!({"enabled": "yes"}),
            json!([{"name": "a", "upstream": "127.0.0.1:1"}]),
            json!({"attributes": {"latency": 1e300}}),
            json!({"toxicity": -0.0}),
        ];
        for _ in 0..300 {
            let m = methods[rng.random_range(0..methods.len())].clone();
            let p = paths[rng.random_range(0..paths.len())];
            let b = bodies[rng.random_range(0..bodies.len())].clone();
            let r = call(api.addr, m.clone(), p, Some(b.clone())).await;
            assert!(
                r.status.as_u16() < 500,
                "{m} {p} {b}: {} {}",
                r.status,
                r.text()
            );
            assert!(r.status == StatusCode::NO_CONTENT || !r.body.is_empty());
        }
        assert_eq!(
            call(api.addr, Method::GET, "/version", None).await.status,
            StatusCode::OK
        );
    })
    .await;
}

#[tokio::test]
async fn shutdown_stops_the_server() {
    within(async {
        let api = start_api(|_| {}).await;
        assert_eq!(
            call(api.addr, Method::GET, "/version", None).await.status,
            StatusCode::OK
        );
        api.shutdown.cancel();
        api.task.await.expect("server task");
        assert!(tokio::net::TcpStream::connect(api.addr).await.is_err());
    })
    .await;
}
