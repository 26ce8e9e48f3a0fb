//! Routing of HTTP requests on the MCP endpoint, the GET (resume) and DELETE handlers, and the
//! checks every method shares (Accept, Origin, protocol header, token, session).
//!
//! Invariants: every error response carries a JSON-RPC error object (`"id": null` unless the
//! request id is known) with `Content-Type: application/json`; no input makes a handler panic;
//! a resume never reaches an event of a stream other than the one its `Last-Event-ID` names.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};

use super::Shared;
use super::auth::Audience;
use super::config::{LabConfig, OnEvicted, ProtocolVersion};
use super::delivery::{self, Delivery};
use super::legs;
use super::sse_body::LabBody;
use super::truth::Answer;

/// What an `on-evicted = fresh` resume sends after its new priming event: the log message a
/// server that believes the stream is new might send. Not a replay of anything.
pub const FRESH_STREAM_GREETING: &str = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"stream started"}}"#;

/// Header carrying the session id.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// Header carrying the negotiated protocol revision.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// JSON-RPC error code the lab uses for transport-level refusals (bad session, auth, …).
pub const TRANSPORT_ERROR: i64 = -32000;
/// JSON-RPC error code of a resume whose cursor event was evicted (HTTP 410).
pub const EVICTED_ERROR: i64 = -32010;

/// Handles one request; never fails (errors become JSON-RPC error responses).
pub async fn handle<B>(
    shared: Arc<Shared>,
    req: Request<B>,
) -> Result<Response<LabBody>, Infallible>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if let Some(api) = crate::vocab::LlmApi::from_path(req.uri().path()) {
        return Ok(super::llm::handle(&shared, api, req).await);
    }
    if shared.cfg.plain_path.as_deref() == Some(req.uri().path()) {
        return Ok(super::plain::handle(&shared, req.method(), req.headers()));
    }
    if req.uri().path() != shared.cfg.path {
        return Ok(rpc_error(
            StatusCode::NOT_FOUND,
            Value::Null,
            TRANSPORT_ERROR,
            "no such endpoint",
        ));
    }
    if let Err(resp) = check_origin(req.headers()) {
        return Ok(*resp);
    }
    let resp = match *req.method() {
        Method::POST => super::post::handle(&shared, req).await,
        Method::GET => get(&shared, req.headers()),
        Method::DELETE => delete(&shared, req.headers()),
        _ => method_not_allowed("GET, POST, DELETE"),
    };
    Ok(resp)
}

/// An error response, boxed so `Result`s carrying it stay small.
pub type Refusal = Box<Response<LabBody>>;

/// A response with a JSON-RPC error body.
pub fn rpc_error(status: StatusCode, id: Value, code: i64, message: &str) -> Response<LabBody> {
    rpc_error_data(status, id, code, message, None)
}

/// A response with a JSON-RPC error body carrying `data`.
pub fn rpc_error_data(
    status: StatusCode,
    id: Value,
    code: i64,
    message: &str,
    data: Option<Value>,
) -> Response<LabBody> {
    let mut error = json!({"code": code, "message": message});
    if let Some(data) = data {
        error["data"] = data;
    }
    json_response(status, &json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

/// A response with a JSON body.
pub fn json_response(status: StatusCode, body: &Value) -> Response<LabBody> {
    let mut resp = Response::new(LabBody::full(body.to_string()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// An SSE response around `body`.
pub fn sse_response(body: LabBody) -> Response<LabBody> {
    sse_response_as(body, "text/event-stream")
}

/// An SSE response around `body` whose `Content-Type` is `content_type` (the SSE type, with
/// or without parameters), never cached.
pub fn sse_response_as(body: LabBody, content_type: &'static str) -> Response<LabBody> {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn method_not_allowed(allow: &'static str) -> Response<LabBody> {
    let mut resp = rpc_error(
        StatusCode::METHOD_NOT_ALLOWED,
        Value::Null,
        TRANSPORT_ERROR,
        "method not allowed",
    );
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    resp
}

/// Whether the `Accept` headers admit every type in `needed` (exact, `type/*` or `*/*`).
pub fn accepts(headers: &HeaderMap, needed: &[&str]) -> bool {
    let offered: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|m| {
            m.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    needed.iter().all(|need| {
        let major = need.split('/').next().unwrap_or("");
        offered
            .iter()
            .any(|o| o == need || o == "*/*" || *o == format!("{major}/*"))
    })
}

/// 403 for a present `Origin` that is not a loopback origin (DNS-rebinding defence).
fn check_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let host = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, rest)| rest.split('/').next().unwrap_or(""))
        .map(|h| match h.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => h.split(':').next().unwrap_or(""),
        });
    match host {
        Some("localhost" | "127.0.0.1" | "::1") => Ok(()),
        _ => Err(Box::new(rpc_error(
            StatusCode::FORBIDDEN,
            Value::Null,
            TRANSPORT_ERROR,
            "origin not allowed",
        ))),
    }
}

/// 400 for an `MCP-Protocol-Version` header naming a revision the lab does not speak.
pub fn check_version(headers: &HeaderMap) -> Result<(), Refusal> {
    match headers.get(VERSION_HEADER) {
        None => Ok(()),
        Some(v) if v.to_str().ok().and_then(ProtocolVersion::parse).is_some() => Ok(()),
        // 2026-07-28 and later: `stateless.rs` answers unsupported ones with -32022.
        Some(v) if v.to_str().is_ok_and(|v| v >= "2026-07-28") => Ok(()),
        Some(_) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            TRANSPORT_ERROR,
            "unsupported MCP-Protocol-Version",
        ))),
    }
}

/// The request's token audience when auth is on (`Ok(None)` when off); 401 if missing/invalid.
pub fn audience(cfg: &LabConfig, headers: &HeaderMap) -> Result<Option<Audience>, Refusal> {
    if !cfg.auth {
        return Ok(None);
    }
    match headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(Audience::from_header)
    {
        Some(a) => Ok(Some(a)),
        None => {
            let mut resp = rpc_error(
                StatusCode::UNAUTHORIZED,
                Value::Null,
                TRANSPORT_ERROR,
                "missing or invalid lab bearer token (Bearer aud=<uri>,…)",
            );
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"tearline-lab\", error=\"invalid_token\""),
            );
            Err(Box::new(resp))
        }
    }
}

fn get(shared: &Arc<Shared>, headers: &HeaderMap) -> Response<LabBody> {
    if !shared.cfg.protocol.resumable() {
        return method_not_allowed("POST");
    }
    if !accepts(headers, &["text/event-stream"]) {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            Value::Null,
            TRANSPORT_ERROR,
            "GET must accept text/event-stream",
        );
    }
    let checked = check_version(headers)
        .and_then(|()| audience(&shared.cfg, headers))
        .and_then(|aud| shared.sessions.named(headers).map(|s| (aud, s)));
    let (aud, session) = match checked {
        Ok(v) => v,
        Err(resp) => return *resp,
    };
    let Some(last) = headers.get(header::HeaderName::from_static("last-event-id")) else {
        // No standalone GET stream: server-initiated messages only travel on POST streams.
        return method_not_allowed("POST, DELETE");
    };
    let last = last.to_str().unwrap_or("").trim().to_owned();
    let parsed = session.parse_id(&last);
    let state = parsed.and_then(|(stream, seq)| {
        session
            .stream_state(stream)
            .filter(|&(next, _, _)| seq < next)
            .map(|st| (stream, seq, st))
    });
    let Some((stream, seq, (mut next, mut first_retained, _))) = state else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            TRANSPORT_ERROR,
            "Last-Event-ID names no event of this session",
        );
    };
    let (asked_session, asked_stream) = (session.id.clone(), stream);
    let (session, stream) = match legs::shared_source(shared, &session, stream, seq) {
        Some((other, other_stream)) => {
            if let Some((n, f, _)) = other.stream_state(other_stream) {
                (next, first_retained) = (n, f);
            }
            (other, other_stream)
        }
        None => (session, stream),
    };
    let served_from = (session.id != asked_session).then(|| (session.id.clone(), stream));
    let mut answer = Answer::Replay;
    let cursor = if session.retains(stream, seq) {
        Some(seq)
    } else {
        match shared.cfg.on_evicted {
            OnEvicted::Error => {
                let lost = (seq + 1 < first_retained).then(|| {
                    json!({"from": session.event_id(stream, seq + 1), "to": session.event_id(stream, first_retained - 1)})
                });
                drop(legs::resume_leg(
                    shared,
                    &asked_session,
                    asked_stream,
                    &last,
                    Answer::Gone,
                    served_from.as_ref().map(|(s, st)| (s.as_str(), *st)),
                ));
                return rpc_error_data(
                    StatusCode::GONE,
                    Value::Null,
                    EVICTED_ERROR,
                    "Last-Event-ID was evicted from the session's event buffer; events after it cannot be replayed",
                    Some(json!({"last_event_id": session.event_id(stream, seq), "lost": lost})),
                );
            }
            OnEvicted::Fresh => {
                // Seed 004's server: it starts over as if the stream were new — a priming
                // event, then its greeting notification — and never mentions the lost events.
                let enc = shared.enc;
                if session.version.primes() {
                    let retry = shared.cfg.retry;
                    session.push(stream, None, |id| {
                        enc.priming(id.unwrap_or(""), Some(retry))
                    });
                }
                let greeting = FRESH_STREAM_GREETING.as_bytes();
                session.push(stream, None, |id| enc.message(id, &[greeting]));
                answer = Answer::Fresh;
                next.checked_sub(1)
            }
            OnEvicted::ReplayFromOldest => {
                answer = Answer::ReplayFromOldest;
                first_retained.checked_sub(1)
            }
        }
    };
    let shape = legs::resume_leg(
        shared,
        &asked_session,
        asked_stream,
        &last,
        answer,
        served_from.as_ref().map(|(s, st)| (s.as_str(), *st)),
    );
    let body = delivery::spawn(
        shared,
        Delivery {
            session,
            stream,
            cursor,
            audience: aud,
            guard: None,
            shape,
        },
    );
    sse_response(body)
}

fn delete(shared: &Arc<Shared>, headers: &HeaderMap) -> Response<LabBody> {
    if !shared.cfg.protocol.resumable() {
        return method_not_allowed("POST");
    }
    let checked = audience(&shared.cfg, headers).and_then(|_| shared.sessions.named(headers));
    match checked {
        Ok(s) => {
            shared.sessions.remove(&s.id);
            let mut resp = Response::new(LabBody::Empty);
            *resp.status_mut() = StatusCode::OK;
            resp
        }
        Err(resp) => *resp,
    }
}
