//! GET and DELETE on the MCP endpoint (2025 era): a resume by `Last-Event-ID`, answered from
//! the session's ring as [`crate::lab::LabConfig::on_evicted`] and the scripted bug say, and
//! the end of a session.
//!
//! Invariants: a resume never reaches an event of a stream other than the one its
//! `Last-Event-ID` names (except under the shared-store bug, which is the point of that bug);
//! an evicted cursor under `on_evicted = error` gets 410 with the lost range and opens a leg
//! answered `gone`; every other resume opens its leg before its first byte.

use std::sync::Arc;

use http::header::{self, HeaderMap};
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::config::OnEvicted;
use super::delivery::{self, Delivery};
use super::http::{
    EVICTED_ERROR, TRANSPORT_ERROR, accepts, audience, check_version, method_not_allowed,
    rpc_error, rpc_error_data, sse_response,
};
use super::legs;
use super::shared::Shared;
use super::sse_body::LabBody;
use super::truth::Answer;

/// What an `on-evicted = fresh` resume sends after its new priming event: the log message a
/// server that believes the stream is new might send. Not a replay of anything.
pub const FRESH_STREAM_GREETING: &str = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"stream started"}}"#;

/// A resume (GET with `Last-Event-ID`); no standalone GET stream.
pub(crate) fn get(shared: &Arc<Shared>, headers: &HeaderMap) -> Response<LabBody> {
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

/// DELETE: the session ends (its producers stop).
pub(crate) fn delete(shared: &Arc<Shared>, headers: &HeaderMap) -> Response<LabBody> {
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
