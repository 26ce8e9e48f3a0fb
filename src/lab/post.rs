//! POST on the MCP endpoint: `initialize`, notifications, responses, and requests (answered
//! with JSON, or with an SSE stream when at least one is a `tools/call`).
//!
//! Invariants: a body is a JSON-RPC message or a non-empty array of them (batches are accepted
//! for every revision; all of a batch's calls share one stream, in order, which is how one
//! stream carries events of several tools as in seed 000); `initialize` must come alone; a
//! POST holding only notifications/responses gets 202 with no body; a `tools/call` whose
//! resource indicator the token does not cover makes the whole POST a 403.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{Value, json};

use super::calls;
use super::config::ProtocolVersion;
use super::http::{
    INVALID_REQUEST, PARSE_ERROR, SESSION_HEADER, TRANSPORT_ERROR, accepts, audience,
    check_version, json_response, rpc_error,
};
use super::session::Session;
use super::shared::Shared;
use super::sse_body::LabBody;
use super::tools::Step;

/// Handles a POST on the endpoint.
pub async fn handle<B>(shared: &Arc<Shared>, req: Request<B>) -> Response<LabBody>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let headers = req.headers().clone();
    if !accepts(&headers, &["application/json", "text/event-stream"]) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            Value::Null,
            TRANSPORT_ERROR,
            "POST must accept both application/json and text/event-stream",
        );
    }
    let json_ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json_ct {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Value::Null,
            TRANSPORT_ERROR,
            "Content-Type must be application/json",
        );
    }
    if let Err(resp) = check_version(&headers) {
        return *resp;
    }
    let read = Limited::new(req.into_body(), shared.cfg.max_body_bytes).collect();
    let Ok(read) = tokio::time::timeout(shared.cfg.read_timeout, read).await else {
        tracing::debug!("lab: POST body not received within the read timeout");
        return rpc_error(
            StatusCode::REQUEST_TIMEOUT,
            Value::Null,
            INVALID_REQUEST,
            "request body not received in time",
        );
    };
    let body = match read {
        Ok(b) => b.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                Value::Null,
                INVALID_REQUEST,
                "body too large",
            );
        }
        Err(_) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                INVALID_REQUEST,
                "unreadable body",
            );
        }
    };
    let Ok(parsed) = serde_json::from_slice::<Value>(&body) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            PARSE_ERROR,
            "parse error",
        );
    };
    let (messages, batch) = match parsed {
        Value::Array(a) if !a.is_empty() => (a, true),
        Value::Object(_) => (vec![parsed], false),
        _ => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                INVALID_REQUEST,
                "invalid request",
            );
        }
    };
    // Era dispatch: 2026-07-28 requests (and every request of a modern-only lab) are served
    // statelessly by `stateless.rs`; everything else continues on the legacy path below.
    if super::stateless::is_modern(&shared.cfg, &headers, &messages) {
        return super::stateless::handle(shared, &headers, messages, batch).await;
    }
    let aud = match audience(&shared.cfg, &headers) {
        Ok(a) => a,
        Err(resp) => return *resp,
    };
    if let Some(init) = messages.iter().find(|m| m["method"] == "initialize") {
        if batch || init.get("id").is_none() {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                init.get("id").cloned().unwrap_or(Value::Null),
                INVALID_REQUEST,
                "initialize must be a single request",
            );
        }
        return initialize(shared, init);
    }
    let session = if shared.cfg.protocol.resumable() {
        match shared.sessions.named(&headers) {
            Ok(s) => s,
            Err(resp) => return *resp,
        }
    } else {
        // 2026-07-28: no sessions; each request's stream has a private ring.
        Arc::new(Session::new(
            String::new(),
            ProtocolVersion::V2026_07_28,
            shared.cfg.buffer,
            shared.cfg.buffer_bytes,
            shared.shutdown.child_token(),
        ))
    };

    for m in &messages {
        if m["method"] == "notifications/cancelled"
            && m.get("id").is_none()
            && let Some(id) = m["params"].get("requestId")
        {
            session.cancel_request(&id.to_string());
        }
    }
    let mut steps = Vec::new();
    let mut calls = 0;
    for m in &messages {
        let Some(step) = calls::plan(shared, m) else {
            continue;
        };
        if let Step::Call { id, tool, .. } = &step {
            calls += 1;
            if aud.as_ref().is_some_and(|a| !a.covers(tool.resource())) {
                let mut resp = rpc_error(
                    StatusCode::FORBIDDEN,
                    id.clone(),
                    TRANSPORT_ERROR,
                    &format!("token audience does not include {}", tool.resource()),
                );
                resp.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(
                        "Bearer realm=\"tearline-lab\", error=\"insufficient_scope\"",
                    ),
                );
                return resp;
            }
        }
        steps.push(step);
    }
    if steps.is_empty() {
        let mut resp = Response::new(LabBody::Empty);
        *resp.status_mut() = StatusCode::ACCEPTED;
        return resp;
    }
    if calls == 0 {
        let replies: Vec<Value> = steps
            .into_iter()
            .filter_map(|s| match s {
                Step::Reply(v) => Some(v),
                Step::Call { .. } => None,
            })
            .collect();
        let body = if batch {
            Value::Array(replies)
        } else {
            replies.into_iter().next().unwrap_or(Value::Null)
        };
        return json_response(StatusCode::OK, &body);
    }

    calls::stream_steps(shared, session, steps, aud)
}

fn initialize(shared: &Shared, init: &Value) -> Response<LabBody> {
    let id = init.get("id").cloned().unwrap_or(Value::Null);
    let requested = init["params"]["protocolVersion"]
        .as_str()
        .and_then(ProtocolVersion::parse);
    let version = match (shared.cfg.protocol, requested) {
        (ProtocolVersion::V2026_07_28, _) => {
            return super::stateless::initialize_refused(shared, id, init);
        }
        (narrowed, _) if shared.cfg.narrow => narrowed,
        (_, Some(v)) if v.resumable() => v,
        (default, _) => default,
    };
    let result = json!({
        "protocolVersion": version.as_str(),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "tearline-lab", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "tearline lab server: tools blob, progress, search, fetch, append",
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    if !version.resumable() {
        return json_response(StatusCode::OK, &body);
    }
    match shared.sessions.create(version, &shared.shutdown) {
        Ok(session) => {
            let mut resp = json_response(StatusCode::OK, &body);
            if let Ok(v) = HeaderValue::from_str(&session.id) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            resp
        }
        Err(_) => rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            TRANSPORT_ERROR,
            "too many sessions",
        ),
    }
}
