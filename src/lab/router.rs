//! The lab's router: which handler answers a request, by path and method. The one module
//! that knows every endpoint, so no handler imports another to reach it.
//!
//! Order: an LLM API path ([`crate::vocab::LlmApi::from_path`]) goes to [`super::llm`]; the
//! plain path, when set, to [`super::plain`]; the MCP endpoint, after the Origin check, to
//! [`super::post`] or [`super::resume`] by method; anything else gets 404 (JSON-RPC error).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::http::{TRANSPORT_ERROR, check_origin, method_not_allowed, rpc_error};
use super::shared::Shared;
use super::sse_body::LabBody;
use super::{llm, plain, post, resume};

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
        return Ok(llm::handle(&shared, api, req).await);
    }
    if shared.cfg.plain_path.as_deref() == Some(req.uri().path()) {
        return Ok(plain::handle(&shared, req.method(), req.headers()));
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
        Method::POST => post::handle(&shared, req).await,
        Method::GET => resume::get(&shared, req.headers()),
        Method::DELETE => resume::delete(&shared, req.headers()),
        _ => method_not_allowed("GET, POST, DELETE"),
    };
    Ok(resp)
}
