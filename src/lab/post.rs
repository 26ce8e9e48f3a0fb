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

use super::config::ProtocolVersion;
use super::delivery::{self, Delivery};
use super::http::{
    SESSION_HEADER, TRANSPORT_ERROR, accepts, audience, check_version, json_response, rpc_error,
    sse_response,
};
use super::session::Session;
use super::shared::Shared;
use super::sse_body::LabBody;
use super::tools::{self, Step, Tool};

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

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
        let Some(step) = plan(shared, m) else {
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

    stream_steps(shared, session, steps, aud)
}

/// Answers `steps` on a new SSE stream of `session`. For a 2026-07-28 session, closing the
/// response stream cancels the producer (the spec's cancellation on stream close).
pub(super) fn stream_steps(
    shared: &Arc<Shared>,
    session: Arc<Session>,
    steps: Vec<Step>,
    aud: Option<super::auth::Audience>,
) -> Response<LabBody> {
    let stream = session.open_stream();
    let shape = super::legs::post_leg(shared, &session, stream, &steps);
    let cancel = session.cancel.child_token();
    let guard = (!session.version.resumable()).then(|| cancel.clone().drop_guard());
    let body = delivery::spawn(
        shared,
        Delivery {
            session: Arc::clone(&session),
            stream,
            cursor: None,
            audience: aud,
            guard,
            shape,
        },
    );
    shared.tasks.spawn(tools::produce(
        session,
        stream,
        steps,
        shared.enc,
        shared.cfg.retry,
        cancel,
        shared.cfg.truth.clone(),
    ));
    sse_response(body)
}

/// The step answering message `m`, or `None` for notifications and responses.
pub(super) fn plan(shared: &Shared, m: &Value) -> Option<Step> {
    let id = m.get("id").cloned();
    let method = m.get("method").and_then(Value::as_str);
    let reply_error = |id: Value, code: i64, msg: &str| {
        Step::Reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": msg}}))
    };
    let (Some(id), Some(method)) = (id.clone(), method) else {
        let is_response = id.is_some() && (m.get("result").is_some() || m.get("error").is_some());
        let is_notification = method.is_some() && id.is_none();
        return if is_response || is_notification {
            None
        } else {
            Some(reply_error(
                id.unwrap_or(Value::Null),
                INVALID_REQUEST,
                "invalid request",
            ))
        };
    };
    let reply = |result: Value| Step::Reply(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    Some(match method {
        "ping" => reply(json!({})),
        "tools/list" => reply(tools::list()),
        "tools/call" => {
            let params = m.get("params").cloned().unwrap_or(Value::Null);
            let name = params.get("name").and_then(Value::as_str).unwrap_or("");
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            let parsed = Tool::parse(name, &args, shared.cfg.max_blob_bytes)
                .map(|t| t.with_counter(&shared.cfg.side_effects))
                .and_then(|t| super::stateless::fit_event(t, &args, shared.cfg.max_event_bytes));
            match parsed {
                Ok(tool) => {
                    let token = params
                        .get("_meta")
                        .and_then(|meta| meta.get("progressToken"))
                        .cloned()
                        .unwrap_or_else(|| id.clone());
                    Step::Call { id, token, tool }
                }
                Err(msg) => reply_error(id, INVALID_PARAMS, &msg),
            }
        }
        _ => reply_error(id, METHOD_NOT_FOUND, "method not found"),
    })
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
