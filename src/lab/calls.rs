//! What both eras of the MCP endpoint do with a request once it is accepted: [`plan`] turns a
//! JSON-RPC message into a [`Step`] (a reply, or a tool call), and [`stream_steps`] answers
//! steps on a new SSE stream of a session (a legacy session, or the one-request session of a
//! 2026-07-28 call).
//!
//! Why a file of its own: the legacy POST handler ([`super::post`]) and the stateless one
//! ([`super::stateless`]) both plan and stream calls; with the shared part here, neither
//! imports the other for it.

use std::sync::Arc;

use http::Response;
use serde_json::{Value, json};

use super::auth::Audience;
use super::delivery::{self, Delivery};
use super::http::{INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, sse_response};
use super::legs;
use super::session::Session;
use super::shared::Shared;
use super::sse_body::LabBody;
use super::tools::{self, Step, Tool};

/// Answers `steps` on a new SSE stream of `session`. For a 2026-07-28 session, closing the
/// response stream cancels the producer (the spec's cancellation on stream close).
pub(crate) fn stream_steps(
    shared: &Arc<Shared>,
    session: Arc<Session>,
    steps: Vec<Step>,
    aud: Option<Audience>,
) -> Response<LabBody> {
    let stream = session.open_stream();
    let shape = legs::post_leg(shared, &session, stream, &steps);
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
pub(crate) fn plan(shared: &Shared, m: &Value) -> Option<Step> {
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
                .and_then(|t| fit_event(t, &args, shared.cfg.max_event_bytes));
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

/// Shrinks a `blob` without an explicit `size` to fit `max_event` bytes, or refuses an explicit
/// one that does not fit (the message names the option).
pub fn fit_event(tool: Tool, args: &Value, max_event: Option<usize>) -> Result<Tool, String> {
    const OVERHEAD: usize = 256;
    let (Some(max), Tool::Blob { size, lines, hold }) = (max_event, &tool) else {
        return Ok(tool);
    };
    // JSON framing of each item plus the `data: ` prefix and line end of each line.
    let budget = max.saturating_sub(OVERHEAD + 40 * lines);
    if *size <= budget {
        return Ok(tool);
    }
    if args.get("size").is_some_and(|s| !s.is_null()) {
        return Err(format!(
            "blob of {size} bytes does not fit one SSE event of at most {max} bytes \
             (--max-event-bytes); ask for size <= {budget}"
        ));
    }
    Ok(Tool::Blob {
        size: budget,
        lines: *lines,
        hold: *hold,
    })
}
