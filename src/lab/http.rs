//! The response plumbing every lab handler shares (JSON-RPC errors, JSON and SSE responses)
//! and the checks every method of the MCP endpoint shares (Accept, Origin, protocol header,
//! token). Which handler answers a request is [`super::router`]'s business.
//!
//! Invariants: every error response carries a JSON-RPC error object (`"id": null` unless the
//! request id is known) with `Content-Type: application/json`; no input makes a handler panic.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::auth::Audience;
use super::config::{LabConfig, ProtocolVersion};
use super::sse_body::LabBody;

/// Header carrying the session id.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// Header carrying the negotiated protocol revision.
pub const VERSION_HEADER: &str = "mcp-protocol-version";
/// JSON-RPC error code the lab uses for transport-level refusals (bad session, auth, …).
pub const TRANSPORT_ERROR: i64 = -32000;
/// JSON-RPC: the body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object (or batch).
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: no such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: the method's parameters are invalid.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC error code of a resume whose cursor event was evicted (HTTP 410).
pub const EVICTED_ERROR: i64 = -32010;

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

/// 405 naming the methods `allow`ed.
pub fn method_not_allowed(allow: &'static str) -> Response<LabBody> {
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
pub fn check_origin(headers: &HeaderMap) -> Result<(), Refusal> {
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
