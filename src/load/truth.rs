//! What the client dispatched, per leg: the other half of the ground truth the audit is
//! measured against (the lab's half is [`crate::lab::truth`]).
//!
//! Invariants:
//! - Recording is off unless [`crate::load::LoadConfig::truth`] (or the EventSource-like
//!   client's config) holds a [`ClientTruth`]; then every request the client sends (a POST, a
//!   resume GET, a plain GET, a side request) gets one [`ClientLeg`] in send order.
//! - `dispatched` lists the events the SSE parser dispatched while the client read the leg, in
//!   order, with the last-event-id at dispatch and the XXH3-64 of the data (as the lab hashes
//!   it); `committed` is the parser's last event id when the leg stopped (it covers a priming
//!   event, which is never dispatched); `partial` says whether bytes of an undispatched event
//!   were in hand at the stop (the torn-cut condition).
//! - A leg names its logical call (`call`): a POST of a call already sent before is a re-send
//!   of that call (a re-issue), and it carries the call's `Idempotency-Key` when the policy
//!   marks re-sends; `answered` says whether the response for its request id arrived.
//! - Nothing here is derived from the audit.

use std::io::Write;
use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use crate::wire::sse::SseEvent;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dispatched {
    /// The last event id after dispatch (the event's own id, or the sticky one).
    pub id: String,
    /// Whether the event carried an `id:` field.
    pub has_id: bool,
    /// The event type.
    pub event_type: String,
    /// XXH3-64 of the data.
    pub data_hash: u64,
}

impl Dispatched {
    /// The record of `ev`.
    pub fn of(ev: &SseEvent<'_>) -> Self {
        Dispatched {
            id: ev.last_event_id.to_owned(),
            has_id: ev.id.is_some(),
            event_type: ev.event_type.to_owned(),
            data_hash: xxhash_rust::xxh3::xxh3_64(ev.data),
        }
    }
}

/// One request as the client sent and read it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ClientLeg {
    /// The `Mcp-Session-Id` sent (empty: none).
    pub session: String,
    /// `POST` or `GET`.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The JSON-RPC request id the leg serves (POST: the call; GET: the call it resumes).
    pub request_id: Option<u64>,
    /// The logical call the leg belongs to (the worker's call index: every POST and resume of
    /// one call, its re-sends included, share it).
    pub call: u64,
    /// The `Idempotency-Key` the POST carried (the call's re-send marker), if any.
    pub idempotency_key: Option<String>,
    /// Whether the response for `request_id` arrived on this leg.
    pub answered: bool,
    /// The `Last-Event-ID` sent.
    pub cursor: Option<String>,
    /// The response status (`None`: no response head).
    pub status: Option<u16>,
    /// Events dispatched, in order.
    pub dispatched: Vec<Dispatched>,
    /// The parser's last event id at the stop.
    pub committed: String,
    /// Bytes of an undispatched event in hand at the stop.
    pub partial: bool,
    /// Why reading stopped (`answered`, `clean-end`, an HTTP error kind, `discontinuity`, …).
    pub stop: String,
}

/// The record of one client (one load run or one EventSource-like client).
#[derive(Debug, Default)]
pub struct ClientTruth {
    legs: Mutex<Vec<ClientLeg>>,
}

impl ClientTruth {
    fn lock(&self) -> MutexGuard<'_, Vec<ClientLeg>> {
        self.legs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends a finished leg.
    pub fn push(&self, leg: ClientLeg) {
        self.lock().push(leg);
    }

    /// A copy of every leg so far.
    pub fn legs(&self) -> Vec<ClientLeg> {
        self.lock().clone()
    }

    /// Writes every leg as one JSON line.
    pub fn write_jsonl(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for leg in self.lock().iter() {
            serde_json::to_writer(&mut *out, leg)?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}
