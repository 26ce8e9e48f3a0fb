//! The plain-SSE endpoint (off unless [`crate::lab::LabConfig::plain_path`] is set): what a
//! browser's `EventSource` talks to. No MCP, no session: `GET <plain_path>` answers a
//! `text/event-stream` of [`PLAIN_EVENTS`] events, and a later GET of the same URL with
//! `Last-Event-ID` resumes after that event.
//!
//! Invariants:
//! - The feed is fixed when the server starts: event `k` always has the same id (`<k>` for
//!   counter ids, a UUID-like string for opaque ids) and the same bytes, data
//!   `{"tick":k,"of":N,"last":bool}` (`last` is true for the final event only, so a client knows
//!   when the feed is complete). No priming event, no bug: a resume replays exactly the events
//!   after the cursor, in order, then the body ends.
//! - A `Last-Event-ID` naming no event of the feed gets 400; methods other than GET get 405.
//! - Every leg is recorded (answer `plain`) when the lab records truth.

use std::sync::Arc;

use http::header::HeaderMap;
use http::{Method, Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

use super::http::{TRANSPORT_ERROR, rpc_error, sse_response};
pub use super::plain_feed::PLAIN_EVENTS;
use super::shared::Shared;
use super::sse_body::{LabBody, SseEncoder};
use super::truth::{Answer, LabLeg};

/// Handles a request on the plain path.
pub(crate) fn handle(
    shared: &Arc<Shared>,
    method: &Method,
    headers: &HeaderMap,
) -> Response<LabBody> {
    if method != Method::GET {
        return rpc_error(
            StatusCode::METHOD_NOT_ALLOWED,
            Value::Null,
            TRANSPORT_ERROR,
            "the plain SSE endpoint only answers GET",
        );
    }
    let cursor = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("").to_owned());
    let start = match cursor.as_deref() {
        None => 0,
        Some(c) => match shared.plain.find(c) {
            Some(i) => i + 1,
            None => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    Value::Null,
                    TRANSPORT_ERROR,
                    "Last-Event-ID names no event of the plain feed",
                );
            }
        },
    };
    let leg = shared.cfg.truth.as_ref().map(|t| {
        t.open(LabLeg {
            session: String::new(),
            method: "GET",
            stream: 0,
            request_ids: Vec::new(),
            cursor: cursor.clone(),
            answer: Answer::Plain,
            injected: Vec::new(),
            emitted: Vec::new(),
        })
    });
    let (tx, rx) = mpsc::channel(4);
    let feed = Arc::clone(shared);
    let priming = super::plain_priming::resume_priming(
        shared.cfg.plain_priming,
        &SseEncoder::new(shared.cfg.line_ending),
        cursor.as_deref(),
    );
    shared.tasks.spawn(async move {
        if let Some(p) = priming
            && tx.send(p).await.is_err()
        {
            return;
        }
        for (k, ev) in feed.plain.events.iter().enumerate().skip(start) {
            if let Some(leg) = &leg {
                leg.emit("", 0, k as u64, ev);
            }
            let sent = tokio::select! {
                r = tx.send(ev.clone()) => r.is_ok(),
                _ = feed.shutdown.cancelled() => false,
            };
            if !sent {
                return;
            }
        }
    });
    sse_response(LabBody::Stream(rx))
}
