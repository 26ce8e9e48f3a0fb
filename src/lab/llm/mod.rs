//! The lab's LLM endpoints: deterministic, provider-shaped answers on the three streaming APIs
//! tearline knows ([`LlmApi`]), exactly as the official SDKs parse them, so the proxy, the
//! observer, the audit, the load client and real SDKs have a model server whose every byte
//! they control.
//!
//! # Endpoints (on every lab server, beside the MCP endpoint)
//! - `POST /v1/chat/completions` — OpenAI Chat Completions ([`chat`]);
//! - `POST /v1/responses` — OpenAI Responses ([`responses`]);
//! - `POST /v1/messages` — Anthropic Messages ([`messages`]).
//!
//! Any path ending in one of these is served (`/openai/v1/chat/completions`); the query string
//! is ignored. No key is checked (`Authorization`, `x-api-key` and `api-key` are accepted and
//! never logged). `"stream": true` gets `text/event-stream`, otherwise one JSON object.
//!
//! # The answer
//! Text of [`Knobs::tokens`] tokens (token `k` is [`answer::token`]`(k)`; a request's
//! `max_tokens`/`max_completion_tokens`/`max_output_tokens` below that ends it early with
//! `length` / `max_tokens` / `response.incomplete`), or — when the request offers function
//! tools and its `tool_choice` allows, and the conversation does not end with a tool result —
//! one call of the first offered tool (or the one `tool_choice` names), whose arguments are a
//! deterministic value valid for the tool's JSON Schema ([`args`]) streamed in pieces of
//! [`Knobs::args_chunk`] bytes.
//!
//! # Knobs
//! Server-wide from `tearline serve --llm-tokens N --llm-token-rate R --llm-ttft D
//! --llm-usage requested|always|never`, overridden per request by the header
//! [`knobs::KNOB_HEADER`] (`x-tearline-lab: tokens=64, rate=200, ttft=150ms, usage=always,
//! tool=none|auto|<name>, args-chunk=4`). The lab's `--line-ending` and `--chunking` apply.
//!
//! # Errors
//! Provider-shaped bodies: OpenAI `{"error":{"message","type","param","code"}}`, Anthropic
//! `{"type":"error","error":{"type","message"}}`; 400 for a body that is not a JSON object or a
//! bad knob header (the message says what is wrong), 405 for methods other than POST, 408/413
//! as the MCP endpoint.

pub mod answer;
pub mod args;
pub mod chat;
pub mod frame;
pub mod knobs;
pub mod messages;
pub mod pace;
pub mod request;
pub mod responses;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};

pub use knobs::{Knobs, LlmArgs, ToolMode, UsageMode};

use super::shared::Shared;
use super::sse_body::LabBody;
use crate::vocab::LlmApi;
use answer::Answer;
use frame::{Frame, Sse};
use request::LlmRequest;

/// The events of a streamed answer to `req` under `knobs` with line ending `eol`: what the
/// lab writes, for tests that need the exact bytes and the position of each part.
pub fn frames(req: &LlmRequest, a: &Answer, knobs: &Knobs, eol: &'static [u8]) -> Vec<Frame> {
    let sse = Sse::new(eol);
    match req.api {
        LlmApi::ChatCompletions => chat::stream(a, sse, req.include_usage, knobs.usage),
        LlmApi::Responses => responses::stream(a, sse),
        LlmApi::Messages => messages::stream(a, sse),
    }
}

/// Handles a request on an LLM endpoint.
pub(crate) async fn handle<B>(shared: &Shared, api: LlmApi, req: Request<B>) -> Response<LabBody>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if req.method() != Method::POST {
        let mut resp = error(
            api,
            StatusCode::METHOD_NOT_ALLOWED,
            "only POST is served here",
        );
        resp.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    let knobs = match req
        .headers()
        .get(knobs::KNOB_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
    {
        None => shared.cfg.llm.clone(),
        Some(h) => match shared.cfg.llm.with_overrides(h) {
            Ok(k) => k,
            Err(e) => return error(api, StatusCode::BAD_REQUEST, &e.to_string()),
        },
    };
    let read = Limited::new(req.into_body(), shared.cfg.max_body_bytes).collect();
    let body = match tokio::time::timeout(shared.cfg.read_timeout, read).await {
        Err(_) => {
            return error(
                api,
                StatusCode::REQUEST_TIMEOUT,
                "request body not received in time",
            );
        }
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return error(api, StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
        Ok(Err(_)) => return error(api, StatusCode::BAD_REQUEST, "unreadable request body"),
    };
    let parsed = LlmRequest::parse(api, &body).and_then(|r| {
        let index = shared.llm.answered.fetch_add(1, Ordering::Relaxed) + 1;
        Answer::plan(&r, &knobs, index).map(|a| (r, a))
    });
    let (llm_req, answer) = match parsed {
        Ok(v) => v,
        Err(e) => return error(api, StatusCode::BAD_REQUEST, &e.0),
    };
    let request_id = format!("req_{}", answer.suffix());
    let mut resp = if llm_req.stream {
        let frames = frames(&llm_req, &answer, &knobs, shared.cfg.line_ending.bytes());
        let body = pace::spawn(
            &shared.tasks,
            shared.shutdown.clone(),
            frames,
            knobs.ttft,
            knobs.gap(),
            shared.cfg.chunking,
        );
        super::http::sse_response_as(body, "text/event-stream; charset=utf-8")
    } else {
        // A whole answer arrives once it is generated: first token, then one gap per token.
        let wait = knobs.ttft + knobs.gap() * answer.output_tokens().saturating_sub(1);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = shared.shutdown.cancelled() => {}
        }
        let text = match api {
            LlmApi::ChatCompletions => chat::body(&answer),
            LlmApi::Responses => responses::body(&answer),
            LlmApi::Messages => messages::body(&answer),
        };
        json(StatusCode::OK, text)
    };
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        let name = match api {
            LlmApi::Messages => "request-id",
            _ => "x-request-id",
        };
        resp.headers_mut().insert(name, v);
    }
    resp
}

fn json(status: StatusCode, body: String) -> Response<LabBody> {
    let mut resp = Response::new(LabBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// An error response in the API's own error shape.
fn error(api: LlmApi, status: StatusCode, message: &str) -> Response<LabBody> {
    let kind = match status {
        StatusCode::METHOD_NOT_ALLOWED | StatusCode::BAD_REQUEST => "invalid_request_error",
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        _ => "api_error",
    };
    let m = frame::q(message);
    let body = match api {
        LlmApi::Messages => {
            format!(r#"{{"type":"error","error":{{"type":"{kind}","message":{m}}}}}"#)
        }
        _ => format!(r#"{{"error":{{"message":{m},"type":"{kind}","param":null,"code":null}}}}"#),
    };
    json(status, body)
}
