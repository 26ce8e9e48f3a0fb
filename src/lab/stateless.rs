//! MCP 2026-07-28 on the lab's endpoint: the stateless era, served beside the 2025 one.
//!
//! Why a separate file: the two eras share tools and SSE bytes but nothing of the request
//! lifecycle. Which era a POST belongs to is decided once, by [`is_modern`]: a lab started with
//! `--protocol 2026-07-28` is modern-only; a narrowed legacy lab (`--protocol 2025-…`) never is;
//! otherwise (the default, dual-era) a request is modern iff its `MCP-Protocol-Version` header
//! or its `params._meta["io.modelcontextprotocol/protocolVersion"]` names 2026-07-28 or later,
//! or it is `server/discover`.
//!
//! Invariants (each from the published 2026-07-28 specification, `basic/transports/
//! streamable-http`, `basic/versioning`, `basic/patterns/{subscriptions,mrtr}`):
//! - No session: no `Mcp-Session-Id` is minted or read; SSE events carry no `id` and a stream
//!   is never resumable.
//! - Header validation happens before anything runs: `MCP-Protocol-Version`, `Mcp-Method`
//!   (all requests) and `Mcp-Name` (`tools/call`, `resources/read`, `prompts/get`, Base64
//!   sentinel `=?base64?…?=` decoded) must be present and equal the body's values, else
//!   **400 with JSON-RPC -32020 (HeaderMismatch)**. A version the lab does not serve gets
//!   **400 with -32022** and `data: {supported, requested}`. An unknown method gets **404 with
//!   -32601**. A batch gets 400 -32600 (2026-07-28 has none).
//! - `server/discover` and `tools/list` results carry `resultType`, `ttlMs` and `cacheScope`.
//! - `tools/call` streams as in the legacy era, except that closing the response stream cancels
//!   the call: its producer stops and nothing more is ever sent for it. With
//!   [`LabConfig::json_results`] it is answered with one JSON body instead (the final response
//!   only), written once the call has finished.
//! - `confirm` is the multi-round-trip tool: without `inputResponses` it answers
//!   `resultType: "input_required"` with one `elicitation/create` input request (key
//!   `confirm`) and a `requestState`; the retry carrying the response gets the final result.
//! - `subscriptions/listen` answers an SSE stream whose first message is
//!   `notifications/subscriptions/acknowledged` (with the honoured filter: the lab only ever
//!   honours `toolsListChanged`), then keep-alive comments until the client closes it; at
//!   server shutdown the stream ends with the listen request's `complete` result.
//! - A modern-only lab answers `initialize` with 400 -32022 naming `2026-07-28`, so a legacy
//!   client fails with a message that says which revision to speak.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::config::{LabConfig, ProtocolVersion};
use super::http::{TRANSPORT_ERROR, VERSION_HEADER, audience, json_response, rpc_error_data};
use super::session::Session;
use super::shared::Shared;
use super::sse_body::LabBody;
use super::tools::Step;

/// JSON-RPC code of a header/body mismatch or a missing required header (HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC code of a protocol version the server does not serve (HTTP 400).
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// The `_meta` key carrying a request's protocol version.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// How long clients may cache `tools/list` and `server/discover` results (the lab's tool set
/// never changes while it runs).
pub const LIST_TTL_MS: u64 = 60_000;
const MODERN: &str = "2026-07-28";
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_REQUEST: i64 = -32600;

/// Whether this POST is served by the 2026-07-28 rules (see the module doc).
pub fn is_modern(cfg: &LabConfig, headers: &HeaderMap, messages: &[Value]) -> bool {
    if cfg.protocol == ProtocolVersion::V2026_07_28 {
        return true;
    }
    if cfg.narrow {
        return false;
    }
    let modern = |v: &str| v >= MODERN;
    headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(modern)
        || messages.iter().any(|m| {
            m["method"] == "server/discover"
                || m["params"]["_meta"][META_VERSION]
                    .as_str()
                    .is_some_and(modern)
        })
}

/// The revisions the lab serves, newest first, as `server/discover` and -32022 list them.
pub fn supported(cfg: &LabConfig) -> Vec<&'static str> {
    match (cfg.protocol, cfg.narrow) {
        (ProtocolVersion::V2026_07_28, _) => vec![MODERN],
        (p, true) => vec![p.as_str()],
        _ => vec![MODERN, "2025-11-25", "2025-06-18", "2025-03-26"],
    }
}

/// The answer of a modern-only lab to `initialize`: 400 with -32022 naming what it serves.
pub(crate) fn initialize_refused(shared: &Shared, id: Value, init: &Value) -> Response<LabBody> {
    let requested = init["params"]["protocolVersion"].clone();
    rpc_error_data(
        StatusCode::BAD_REQUEST,
        id,
        UNSUPPORTED_VERSION,
        "Unsupported protocol version: this server speaks only 2026-07-28 (no initialize; send \
         per-request _meta, or restart it without --protocol to serve both eras)",
        Some(json!({"supported": supported(&shared.cfg), "requested": requested})),
    )
}

fn mismatch(id: &Value, what: String) -> Response<LabBody> {
    rpc_error_data(
        StatusCode::BAD_REQUEST,
        id.clone(),
        HEADER_MISMATCH,
        &format!("Header mismatch: {what}"),
        None,
    )
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Decodes the spec's Base64 sentinel (`=?base64?…?=`); plain values pass through.
pub fn decode_header_value(v: &str) -> Option<String> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok()),
        None => Some(v.to_owned()),
    }
}

/// Checks the request metadata headers against the body (see the module doc).
fn validate(cfg: &LabConfig, headers: &HeaderMap, m: &Value) -> Result<(), Box<Response<LabBody>>> {
    let id = m.get("id").cloned().unwrap_or(Value::Null);
    let method = m["method"].as_str().unwrap_or("");
    let body_version = m["params"]["_meta"][META_VERSION].as_str();
    let Some(h_version) = header(headers, VERSION_HEADER) else {
        return Err(Box::new(mismatch(
            &id,
            "required header MCP-Protocol-Version is missing".into(),
        )));
    };
    if body_version != Some(h_version) {
        return Err(Box::new(mismatch(
            &id,
            format!(
                "MCP-Protocol-Version header value '{h_version}' does not match body value \
                 '{}' (params._meta[\"{META_VERSION}\"])",
                body_version.unwrap_or("<missing>")
            ),
        )));
    }
    if !supported(cfg).contains(&h_version) || h_version < MODERN {
        return Err(Box::new(rpc_error_data(
            StatusCode::BAD_REQUEST,
            id,
            UNSUPPORTED_VERSION,
            "Unsupported protocol version",
            Some(json!({"supported": supported(cfg), "requested": h_version})),
        )));
    }
    match header(headers, "mcp-method") {
        None => {
            return Err(Box::new(mismatch(
                &id,
                "required header Mcp-Method is missing".into(),
            )));
        }
        Some(h) if h != method => {
            return Err(Box::new(mismatch(
                &id,
                format!("Mcp-Method header value '{h}' does not match body value '{method}'"),
            )));
        }
        Some(_) => {}
    }
    if matches!(method, "tools/call" | "prompts/get" | "resources/read") {
        let body_name = m["params"]["name"]
            .as_str()
            .or_else(|| m["params"]["uri"].as_str())
            .unwrap_or("");
        match header(headers, "mcp-name").map(decode_header_value) {
            None => {
                return Err(Box::new(mismatch(
                    &id,
                    "required header Mcp-Name is missing".into(),
                )));
            }
            Some(None) => {
                return Err(Box::new(mismatch(
                    &id,
                    "Mcp-Name header holds an invalid Base64 sentinel".into(),
                )));
            }
            Some(Some(h)) if h != body_name => {
                return Err(Box::new(mismatch(
                    &id,
                    format!("Mcp-Name header value '{h}' does not match body value '{body_name}'"),
                )));
            }
            Some(Some(_)) => {}
        }
    }
    Ok(())
}

/// Serves one 2026-07-28 POST (see the module doc for every status it answers).
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    headers: &HeaderMap,
    messages: Vec<Value>,
    batch: bool,
) -> Response<LabBody> {
    if let Some(init) = messages.iter().find(|m| m["method"] == "initialize")
        && shared.cfg.protocol == ProtocolVersion::V2026_07_28
    {
        let id = init.get("id").cloned().unwrap_or(Value::Null);
        return initialize_refused(shared, id, init);
    }
    let (false, [m]) = (batch, messages.as_slice()) else {
        return rpc_error_data(
            StatusCode::BAD_REQUEST,
            Value::Null,
            INVALID_REQUEST,
            "2026-07-28 has no JSON-RPC batches: POST one message per request",
            None,
        );
    };
    let Some(id) = m.get("id").cloned() else {
        // Notifications: accepted and ignored (closing a stream is the cancellation).
        let mut resp = Response::new(LabBody::Empty);
        *resp.status_mut() = StatusCode::ACCEPTED;
        return resp;
    };
    if let Err(resp) = validate(&shared.cfg, headers, m) {
        return *resp;
    }
    let aud = match audience(&shared.cfg, headers) {
        Ok(a) => a,
        Err(resp) => return *resp,
    };
    let ok = |result: Value| {
        json_response(
            StatusCode::OK,
            &json!({"jsonrpc": "2.0", "id": id, "result": result}),
        )
    };
    match m["method"].as_str().unwrap_or("") {
        "server/discover" => ok(discover(&shared.cfg)),
        "tools/list" => {
            let mut r = super::tools::list();
            if let Some(tools) = r["tools"].as_array_mut() {
                tools.push(confirm_tool());
            }
            r["resultType"] = json!("complete");
            r["ttlMs"] = json!(LIST_TTL_MS);
            r["cacheScope"] = json!("public");
            ok(r)
        }
        "subscriptions/listen" => listen(shared, id, &m["params"]),
        "tools/call" if m["params"]["name"] == "confirm" => ok(confirm(&m["params"])),
        "tools/call" => {
            let Some(step) = super::calls::plan(shared, m) else {
                return ok(json!({}));
            };
            if let Step::Call { tool, .. } = &step
                && aud.as_ref().is_some_and(|a| !a.covers(tool.resource()))
            {
                let mut resp = rpc_error_data(
                    StatusCode::FORBIDDEN,
                    id.clone(),
                    TRANSPORT_ERROR,
                    &format!("token audience does not include {}", tool.resource()),
                    None,
                );
                resp.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(
                        "Bearer realm=\"tearline-lab\", error=\"insufficient_scope\"",
                    ),
                );
                return resp;
            }
            if let Step::Reply(v) = step {
                return json_response(StatusCode::OK, &v);
            }
            if let (true, Step::Call { id, tool, .. }) = (shared.cfg.json_results, &step) {
                let answer =
                    super::tools::answer_json(id, tool.clone(), shared.cfg.truth.as_deref()).await;
                return json_response(StatusCode::OK, &answer);
            }
            let session = Arc::new(Session::new(
                String::new(),
                ProtocolVersion::V2026_07_28,
                shared.cfg.buffer,
                shared.cfg.buffer_bytes,
                shared.shutdown.child_token(),
            ));
            super::calls::stream_steps(shared, session, vec![step], aud)
        }
        other => {
            let mut resp = rpc_error_data(
                StatusCode::NOT_FOUND,
                id.clone(),
                METHOD_NOT_FOUND,
                &format!("Method not found: {other}"),
                None,
            );
            resp.headers_mut()
                .insert("x-tearline-era", HeaderValue::from_static(MODERN));
            resp
        }
    }
}

fn discover(cfg: &LabConfig) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": supported(cfg),
        "capabilities": {"tools": {"listChanged": true}},
        "_meta": {"io.modelcontextprotocol/serverInfo":
            {"name": "tearline-lab", "version": env!("CARGO_PKG_VERSION")}},
        "instructions": "tearline lab server: tools blob, progress, search, fetch, append, confirm",
        "ttlMs": LIST_TTL_MS,
        "cacheScope": "public",
    })
}

fn confirm_tool() -> Value {
    json!({"name": "confirm",
           "description": "Multi-round-trip: asks the client to confirm (elicitation) and answers \
                           `confirmed: <message>` or `declined`.",
           "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}},
           "annotations": {"readOnlyHint": true, "destructiveHint": false,
                           "idempotentHint": true, "openWorldHint": false}})
}

/// The `confirm` tool: an `input_required` round trip (see the module doc).
fn confirm(params: &Value) -> Value {
    let message = params["arguments"]["message"]
        .as_str()
        .unwrap_or("proceed?")
        .to_owned();
    let response = &params["inputResponses"]["confirm"];
    if response.is_null() {
        return json!({
            "resultType": "input_required",
            "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": {"type": "object",
                    "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}},
            "requestState": "confirm-v1",
        });
    }
    let accepted = response["action"] == "accept" && response["content"]["ok"] != json!(false);
    let text = if accepted {
        format!("confirmed: {message}")
    } else {
        "declined".to_owned()
    };
    json!({"resultType": "complete", "content": [{"type": "text", "text": text}],
           "isError": false})
}

/// `subscriptions/listen`: acknowledgement, keep-alives, and the `complete` result at shutdown.
fn listen(shared: &Arc<Shared>, id: Value, params: &Value) -> Response<LabBody> {
    let mut honoured = json!({});
    if params["notifications"]["toolsListChanged"] == json!(true) {
        honoured["toolsListChanged"] = json!(true);
    }
    let sub_meta = json!({"io.modelcontextprotocol/subscriptionId": id});
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                     "params": {"_meta": sub_meta, "notifications": honoured}});
    let done = json!({"jsonrpc": "2.0", "id": id,
                      "result": {"resultType": "complete", "_meta": sub_meta}});
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let enc = shared.enc;
    let stop = shared.shutdown.clone();
    let every = shared.cfg.keepalive.unwrap_or(Duration::from_secs(15));
    shared.tasks.spawn(async move {
        if tx
            .send(enc.message(None, &[ack.to_string().as_bytes()]))
            .await
            .is_err()
        {
            return;
        }
        loop {
            tokio::select! {
                _ = stop.cancelled() => {
                    let _ = tx.send(enc.message(None, &[done.to_string().as_bytes()])).await;
                    return;
                }
                _ = tx.closed() => return,
                _ = tokio::time::sleep(every) => {
                    if tx.send(Bytes::from_static(b":\n\n")).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    super::http::sse_response(LabBody::Stream(rx))
}
