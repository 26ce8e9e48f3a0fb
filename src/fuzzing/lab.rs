//! Fuzz target `lab`: the lab server's JSON-RPC intake (POST bodies on the MCP endpoint).
//!
//! Input: 4 control bytes, then up to 8 POST bodies separated by [`super::http1::SEPARATOR`].
//! Control byte 0: bit 0 initializes a session first and sends its `Mcp-Session-Id`; bit 1 sends
//! `MCP-Protocol-Version: 2025-11-25`; bit 2 sends `MCP-Protocol-Version: 2026-07-28`.
//! Invariants checked: no 5xx but 503; a 202 has no body; every JSON answer is a JSON-RPC
//! message (or a non-empty array of them for a batch) with `jsonrpc: "2.0"` and exactly one of
//! `result`/`error`; an error answer to a single request carries that request's id or null;
//! an SSE answer is 200 `text/event-stream`.

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::Full;
use serde_json::Value;

use crate::lab::LabConfig;
use crate::lab::socketless::DirectLab;
use crate::lab::sse_body::LabBody;

use super::Input;
use super::control::split_all;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"0"}}}"#;

fn request(body: Bytes, session: Option<&str>, version: Option<&str>) -> Request<Full<Bytes>> {
    let mut b = Request::post("/mcp")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(s) = session {
        b = b.header("mcp-session-id", s);
    }
    if let Some(v) = version {
        b = b.header("mcp-protocol-version", v);
    }
    b.body(Full::new(body))
        .unwrap_or_else(|e| panic!("building a fixed request: {e}"))
}

fn check_message(m: &Value, want_id: Option<&Value>) {
    assert_eq!(m["jsonrpc"], "2.0", "not JSON-RPC 2.0: {m}");
    let has_result = m.get("result").is_some();
    let has_error = m.get("error").is_some();
    assert!(
        has_result != has_error,
        "needs exactly one of result/error: {m}"
    );
    if has_error {
        assert!(
            m["error"]["code"].is_i64(),
            "error without an integer code: {m}"
        );
        assert!(
            m["error"]["message"].is_string(),
            "error without a message: {m}"
        );
        if let Some(id) = want_id {
            assert!(
                m["id"] == *id || m["id"].is_null(),
                "error id {} answers request id {id}",
                m["id"]
            );
        }
    }
}

/// The target.
pub fn fuzz(data: &[u8]) {
    let input = Input::new(data);
    let flags = input.byte(0);
    let version = if flags & 4 != 0 {
        Some("2026-07-28")
    } else if flags & 2 != 0 {
        Some("2025-11-25")
    } else {
        None
    };
    super::block_on(async {
        // Small blobs: a call may ask for any size, and one input must stay fast.
        let config = LabConfig {
            max_blob_bytes: 64 << 10,
            ..LabConfig::default()
        };
        let lab = DirectLab::new(config).unwrap_or_else(|e| panic!("default lab config: {e}"));
        let mut session = None;
        if flags & 1 != 0 {
            let r = lab
                .answer(request(Bytes::from_static(INIT.as_bytes()), None, None))
                .await;
            assert_eq!(r.status(), StatusCode::OK, "initialize");
            session = r
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            assert!(session.is_some(), "initialize without a session id");
        }
        for body in split_all(input.payload).into_iter().take(8) {
            let sent: Option<Value> = serde_json::from_slice(body).ok();
            let r = lab
                .answer(request(
                    Bytes::copy_from_slice(body),
                    session.as_deref(),
                    version,
                ))
                .await;
            let status = r.status();
            assert!(
                !status.is_server_error() || status == StatusCode::SERVICE_UNAVAILABLE,
                "answered {status} to {}",
                String::from_utf8_lossy(body)
            );
            let ct = r
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            match r.into_body() {
                LabBody::Empty => assert!(
                    status == StatusCode::ACCEPTED || status.is_client_error(),
                    "empty {status}"
                ),
                LabBody::Full(bytes) => {
                    assert_ne!(status, StatusCode::ACCEPTED, "202 with a body");
                    let bytes = bytes.unwrap_or_default();
                    if !ct.starts_with("application/json") {
                        continue;
                    }
                    let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                        panic!(
                            "JSON answer does not parse ({e}): {}",
                            String::from_utf8_lossy(&bytes)
                        )
                    });
                    let single_id = sent.as_ref().and_then(|s| s.get("id"));
                    match &v {
                        Value::Array(items) => {
                            assert!(!items.is_empty(), "empty batch answer");
                            items.iter().for_each(|m| check_message(m, None));
                        }
                        m => check_message(m, single_id),
                    }
                }
                LabBody::Stream(_) => {
                    assert_eq!(status, StatusCode::OK, "stream with {status}");
                    assert!(ct.starts_with("text/event-stream"), "stream typed {ct:?}");
                }
            }
        }
        lab.shutdown().await;
    });
}
