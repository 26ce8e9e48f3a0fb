//! The lab server's protocol surface over raw sockets: the happy path (initialize, call,
//! resume), the blob shape, status codes of bad requests, garbage input, and 2026-07-28 mode.

use crate::common::lab_client::{ACCEPT_BOTH, ACCEPT_SSE, JSON, Lab, call, event_id, scan, within};
use serde_json::Value;
use tearline::lab::{LabConfig, ProtocolVersion};

#[tokio::test]
async fn call_streams_priming_progress_and_result_then_resume_replays_exactly() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let sid = lab.session(&[]).await;
        let mut c = lab.connect().await;
        let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
        let resp = c
            .request("POST", "/mcp", &h, &call(1, "progress", r#"{"n":5}"#))
            .await;
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("content-type"), Some("text/event-stream"));
        assert_eq!(resp.header("transfer-encoding"), Some("chunked"));
        // One chunk per event: priming, 5 progress, result.
        assert_eq!(resp.chunks.len(), 7);
        assert_eq!(resp.chunks[0], b"id: 1-0\nretry: 1000\ndata: \n\n");
        let ids: Vec<String> = resp.chunks.iter().filter_map(|e| event_id(e)).collect();
        let want: Vec<String> = (0..7).map(|i| format!("1-{i}")).collect();
        assert_eq!(ids, want);
        assert_eq!(
            resp.chunks[1],
            b"event: message\nid: 1-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1,\"progressToken\":\"p1\",\"total\":5}}\n\n"
        );
        let last = resp.chunks[6].strip_prefix(b"event: message\nid: 1-6\ndata: ");
        let last = last.and_then(|l| l.strip_suffix(b"\n\n")).expect("result event");
        let v: Value = serde_json::from_slice(last).expect("result JSON");
        assert_eq!(v["id"], 1);
        assert_eq!(v["result"]["content"][0]["text"], "progress done: 5");

        let g = [ACCEPT_SSE, ("Mcp-Session-Id", sid.as_str()), ("Last-Event-ID", "1-2")];
        let replay = c.request("GET", "/mcp", &g, b"").await;
        assert_eq!(replay.status, 200);
        assert_eq!(replay.chunks, resp.chunks[3..].to_vec());
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn blob_result_is_one_event_whose_data_lines_rejoin_to_exact_json() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let sid = lab.session(&[]).await;
        let mut c = lab.connect().await;
        let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
        let resp = c
            .request(
                "POST",
                "/mcp",
                &h,
                &call(9, "blob", r#"{"size":100000,"lines":3}"#),
            )
            .await;
        assert_eq!(resp.status, 200);
        assert_eq!(
            resp.chunks.len(),
            5,
            "priming, 3 progress, one result event"
        );
        let events = scan(&resp.chunks);
        let result = events.last().expect("result event");
        assert_eq!(
            (result.event_type.as_str(), result.id.as_deref()),
            ("message", Some("1-4"))
        );
        // Three data lines: the scanner joined them with LF; line 1 holds a third of the text.
        let lines: Vec<&[u8]> = result.data.split(|&b| b == b'\n').collect();
        assert_eq!(lines.len(), 3);
        assert!(
            (33_000..34_000).contains(&lines[0].len()),
            "{}",
            lines[0].len()
        );
        let v: Value = serde_json::from_slice(&result.data).expect("rejoined JSON");
        assert_eq!(v["id"], 9);
        let body: String = v["result"]["content"]
            .as_array()
            .expect("content")
            .iter()
            .map(|i| i["text"].as_str().expect("text"))
            .collect();
        assert_eq!(body.len(), 100_000);
        assert!(
            body.bytes()
                .enumerate()
                .all(|(i, b)| b == b'a' + (i % 26) as u8)
        );
        lab.stop().await;
    })
    .await;
}

fn error_code(v: &Value) -> i64 {
    v["error"]["code"].as_i64().expect("JSON-RPC error code")
}

#[tokio::test]
async fn bad_requests_get_the_spec_status_and_a_json_rpc_error() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let sid = lab.session(&[]).await;
        let s = ("Mcp-Session-Id", sid.as_str());
        let mut c = lab.connect().await;

        let r = c
            .request("POST", "/mcp", &[ACCEPT_BOTH, JSON, s], b"{not json")
            .await;
        assert_eq!((r.status, error_code(&r.json())), (400, -32700));

        let unknown = br#"{"jsonrpc":"2.0","id":5,"method":"no/such"}"#;
        let r = c
            .request("POST", "/mcp", &[ACCEPT_BOTH, JSON, s], unknown)
            .await;
        assert_eq!((r.status, error_code(&r.json())), (200, -32601));
        assert_eq!(r.json()["id"], 5);

        let list = br#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#;
        let r = c.request("POST", "/mcp", &[ACCEPT_BOTH, JSON], list).await;
        assert_eq!((r.status, error_code(&r.json())), (400, -32000));

        let other = ("Mcp-Session-Id", "ffffffffffffffffffffffffffffffff");
        let r = c
            .request("POST", "/mcp", &[ACCEPT_BOTH, JSON, other], list)
            .await;
        assert_eq!((r.status, error_code(&r.json())), (404, -32000));

        let json_only = ("Accept", "application/json");
        let r = c.request("POST", "/mcp", &[json_only, JSON, s], list).await;
        assert_eq!((r.status, error_code(&r.json())), (406, -32000));
        let r = c
            .request(
                "GET",
                "/mcp",
                &[json_only, s, ("Last-Event-ID", "1-0")],
                b"",
            )
            .await;
        assert_eq!((r.status, error_code(&r.json())), (406, -32000));

        let r = c
            .request(
                "POST",
                "/mcp",
                &[ACCEPT_BOTH, JSON, s, ("MCP-Protocol-Version", "1999-01-01")],
                list,
            )
            .await;
        assert_eq!((r.status, error_code(&r.json())), (400, -32000));

        let r = c.request("GET", "/mcp", &[ACCEPT_SSE, s], b"").await;
        assert_eq!(r.status, 405);
        assert!(r.header("allow").is_some());
        let r = c
            .request(
                "GET",
                "/mcp",
                &[ACCEPT_SSE, s, ("Last-Event-ID", "7-0")],
                b"",
            )
            .await;
        assert_eq!((r.status, error_code(&r.json())), (400, -32000));
        let r = c.request("PUT", "/mcp", &[ACCEPT_BOTH, s], b"").await;
        assert_eq!((r.status, error_code(&r.json())), (405, -32000));
        let r = c
            .request("POST", "/nope", &[ACCEPT_BOTH, JSON, s], list)
            .await;
        assert_eq!((r.status, error_code(&r.json())), (404, -32000));

        let r = c
            .request("POST", "/mcp", &[ACCEPT_BOTH, JSON, s], list)
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(
            r.json()["result"]["tools"].as_array().map(Vec::len),
            Some(5)
        );
        let r = c.request("DELETE", "/mcp", &[s], b"").await;
        assert_eq!(r.status, 200);
        let r = c
            .request("POST", "/mcp", &[ACCEPT_BOTH, JSON, s], list)
            .await;
        assert_eq!(r.status, 404);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn garbage_bytes_never_panic_the_server() {
    use rand::{RngExt, SeedableRng};
    within(async {
        let panicked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&panicked);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
            previous(info);
        }));
        let lab = Lab::start(LabConfig::default()).await;
        let sid = lab.session(&[]).await;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x7ea7);
        let fixed: [&[u8]; 6] = [
            b"\x00\xff\xfe garbage\r\n\r\n",
            b"GET /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST /mcp HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\nAccept: */*\r\nContent-Type: application/json\r\nContent-Length: 4\r\n\r\n[[]]",
            b"GET /mcp HTTP/1.1\r\nAccept: text/event-stream\r\nLast-Event-ID: \xff\xfe-\x01\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\nAccept: */*\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]",
        ];
        for case in 0..120 {
            let mut c = lab.connect().await;
            let bytes: Vec<u8> = match case {
                i if i < fixed.len() => fixed[i].to_vec(),
                i if i % 2 == 0 => (0..rng.random_range(1..600)).map(|_| rng.random()).collect(),
                _ => {
                    // A well-formed POST with a random JSON-ish body and the session header.
                    let alphabet = br#"{}[]":,0123456789.-eE tnrufalsjidmethodparamsnametools/call"#;
                    let body: Vec<u8> = (0..rng.random_range(0..300))
                        .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                        .collect();
                    let mut req = format!(
                        "POST /mcp HTTP/1.1\r\nAccept: */*\r\nContent-Type: application/json\r\nMcp-Session-Id: {sid}\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    req.extend_from_slice(&body);
                    req
                }
            };
            c.send_raw(&bytes).await;
            let _ = tokio::io::AsyncWriteExt::shutdown(&mut c.stream).await;
            let mut sink = Vec::new();
            let _ = tokio::io::AsyncReadExt::read_to_end(&mut c.stream, &mut sink).await;
        }
        // Still serving.
        let mut c = lab.connect().await;
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        let r = c
            .request("POST", "/mcp", &[ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())], list)
            .await;
        assert_eq!(r.status, 200);
        lab.stop().await;
        assert!(!panicked.load(std::sync::atomic::Ordering::SeqCst), "the server panicked");
    })
    .await;
}

#[tokio::test]
async fn protocol_2026_has_no_ids_no_sessions_and_refuses_resume() {
    within(async {
        let cfg = LabConfig {
            protocol: ProtocolVersion::V2026_07_28,
            narrow: true,
            ..LabConfig::default()
        };
        let lab = Lab::start(cfg).await;
        let mut c = lab.connect().await;
        // A modern-only server refuses the legacy handshake and names what it speaks.
        let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
        let r = c.request("POST", "/mcp", &[ACCEPT_BOTH, JSON], init).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["code"], -32022);
        assert_eq!(r.json()["error"]["data"]["supported"], serde_json::json!(["2026-07-28"]));
        assert!(r.header("mcp-session-id").is_none());
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"progress","arguments":{"n":3},"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "progress"),
        ];
        let r = c.request("POST", "/mcp", &h, body).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.chunks.len(), 4, "3 progress + result, no priming");
        assert!(r.chunks.iter().all(|e| event_id(e).is_none()));
        assert!(r.header("mcp-session-id").is_none());
        let r = c
            .request("GET", "/mcp", &[ACCEPT_SSE, ("Last-Event-ID", "1-0"), ("Mcp-Session-Id", "x")], b"")
            .await;
        assert_eq!(r.status, 405);
        let r = c.request("DELETE", "/mcp", &[("Mcp-Session-Id", "x")], b"").await;
        assert_eq!(r.status, 405);
        lab.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_sessions_stream_progress_without_errors() {
    within(async {
        let lab = std::sync::Arc::new(Lab::start(LabConfig::default()).await);
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..1000u64 {
            let lab = std::sync::Arc::clone(&lab);
            tasks.spawn(async move {
                let sid = lab.session(&[]).await;
                let mut c = lab.connect().await;
                let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
                let r = c
                    .request(
                        "POST",
                        "/mcp",
                        &h,
                        &call(i, "progress", r#"{"n":20,"interval":100}"#),
                    )
                    .await;
                assert_eq!(r.status, 200);
                assert_eq!(r.chunks.len(), 22, "priming, 20 progress, result");
                let ids: Vec<String> = r.chunks.iter().filter_map(|e| event_id(e)).collect();
                let want: Vec<String> = (0..22).map(|s| format!("1-{s}")).collect();
                assert_eq!(ids, want);
                assert!(String::from_utf8_lossy(&r.chunks[21]).contains("progress done: 20"));
            });
        }
        let mut done = 0;
        while let Some(r) = tasks.join_next().await {
            r.expect("session task");
            done += 1;
        }
        assert_eq!(done, 1000);
        let lab = std::sync::Arc::into_inner(lab).expect("sole owner");
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn cancelled_notification_ends_the_call_without_a_response() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let sid = lab.session(&[]).await;
        let h = [ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
        let mut c = lab.connect().await;
        c.send(
            "POST",
            "/mcp",
            &h,
            &call(4, "progress", r#"{"n":1000,"interval":20}"#),
        )
        .await;
        let head = c.head().await;
        assert_eq!(head.status, 200);
        let first = c.chunk().await.expect("priming");
        assert_eq!(event_id(&first).as_deref(), Some("1-0"));
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}"#;
        let r = lab
            .connect()
            .await
            .request("POST", "/mcp", &h, cancel)
            .await;
        assert_eq!(r.status, 202);
        let mut rest = Vec::new();
        while let Some(chunk) = c.chunk().await {
            rest.push(chunk);
        }
        assert!(rest.len() < 1000, "the call stopped early");
        assert!(
            rest.iter()
                .all(|e| !String::from_utf8_lossy(e).contains("\"result\""))
        );
        lab.stop().await;
    })
    .await;
}
