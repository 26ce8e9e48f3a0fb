//! MCP sessions: each owns one event ring shared by its streams, a change signal readers wait
//! on, and a cancellation token that stops its producers when the session ends.
//!
//! Invariants:
//! - A session id is 32 lowercase hex digits (visible ASCII), random, unique in the table.
//! - Event ids are `<stream>-<seq>`; the stream number is unique within the session, so an id
//!   names exactly one stream and a resume can never reach another stream's events.
//! - Producers push into the ring whether or not a client is connected; readers only read.
//! - A session is idle while no reader is attached; its idle clock restarts at every request
//!   that names it and when its last reader detaches. [`Sessions::expire`] ends (cancels) the
//!   sessions idle for longer than the limit, exactly as a DELETE would.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::StatusCode;
use http::header::HeaderMap;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::config::{IdStyle, ProtocolVersion};
use super::http::{Refusal, SESSION_HEADER, TRANSPORT_ERROR, rpc_error};
use super::ids::IdNamer;
use super::ring::{Next, Ring};

/// One MCP session (or, in 2026-07-28 mode, the state of one request's stream).
#[derive(Debug)]
pub struct Session {
    /// The `Mcp-Session-Id` value.
    pub id: String,
    /// The negotiated protocol revision.
    pub version: ProtocolVersion,
    /// Cancelled when the session ends (DELETE or server shutdown): producers stop.
    pub cancel: CancellationToken,
    ring: Mutex<Ring>,
    changed: watch::Sender<u64>,
    capacity: usize,
    /// In-flight request ids (JSON text) → the token of the producer answering them.
    inflight: Mutex<HashMap<String, CancellationToken>>,
    ids: IdNamer,
    /// When a request last named the session or its last reader detached.
    last_used: Mutex<std::time::Instant>,
}

impl Session {
    /// A session with an empty ring of `capacity` events and an optional byte budget.
    pub fn new(
        id: String,
        version: ProtocolVersion,
        capacity: usize,
        byte_budget: Option<usize>,
        cancel: CancellationToken,
    ) -> Self {
        Session {
            id,
            version,
            cancel,
            ring: Mutex::new(Ring::with_budget(capacity, byte_budget)),
            changed: watch::Sender::new(0),
            capacity: capacity.max(1),
            inflight: Mutex::new(HashMap::new()),
            ids: IdNamer::default(),
            last_used: Mutex::new(std::time::Instant::now()),
        }
    }

    /// The same session naming its events in `style`.
    pub fn with_id_style(mut self, style: IdStyle) -> Self {
        self.ids = IdNamer::new(style);
        self
    }

    /// The id of event `seq` of `stream`.
    pub fn event_id(&self, stream: u64, seq: u64) -> String {
        self.ids.name(stream, seq)
    }

    /// The `(stream, seq)` an id of this session names.
    pub fn parse_id(&self, id: &str) -> Option<(u64, u64)> {
        self.ids.parse(id)
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A panic while holding the lock cannot leave the ring inconsistent (every mutation is
        // a single push/pop pair), so a poisoned lock is still usable.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn inflight(&self) -> MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.inflight.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that request `id` (its JSON text) is answered by the producer owning `token`.
    pub fn track(&self, id: String, token: CancellationToken) {
        self.inflight().insert(id, token);
    }

    /// Forgets request `id` (its producer is done).
    pub fn untrack(&self, id: &str) {
        self.inflight().remove(id);
    }

    /// `notifications/cancelled`: stops the producer answering request `id`, if any.
    pub fn cancel_request(&self, id: &str) -> bool {
        match self.inflight().remove(id) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Opens a new stream in this session.
    pub fn open_stream(&self) -> u64 {
        self.ring().open_stream()
    }

    /// Pushes an event built from its event id (`None` when the revision has no ids) and
    /// wakes readers. Returns the sequence number.
    pub fn push(
        &self,
        stream: u64,
        resource: Option<Arc<str>>,
        encode: impl FnOnce(Option<&str>) -> Bytes,
    ) -> Option<u64> {
        self.push_held(stream, resource, None, encode)
    }

    /// [`Session::push`] of an event whose delivery pauses as `hold` says.
    pub fn push_held(
        &self,
        stream: u64,
        resource: Option<Arc<str>>,
        hold: Option<super::hold::Hold>,
        encode: impl FnOnce(Option<&str>) -> Bytes,
    ) -> Option<u64> {
        let with_ids = self.version.resumable();
        let seq = self.ring().push_held(stream, resource, hold, |seq| {
            if with_ids {
                encode(Some(&self.ids.name(stream, seq)))
            } else {
                encode(None)
            }
        });
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
        seq
    }

    /// Marks `stream` finished and wakes readers.
    pub fn finish(&self, stream: u64) {
        self.ring().finish(stream);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// See [`Ring::next_after`].
    pub fn next_after(&self, stream: u64, cursor: Option<u64>, limit: usize) -> Next {
        self.ring().next_after(stream, cursor, limit)
    }

    /// Whether event `seq` of `stream` is still in the ring.
    pub fn retains(&self, stream: u64, seq: u64) -> bool {
        self.ring().retains(stream, seq)
    }

    /// `(next_seq, first_retained, finished)` of `stream`.
    pub fn stream_state(&self, stream: u64) -> Option<(u64, u64, bool)> {
        self.ring()
            .stream(stream)
            .map(|s| (s.next_seq, s.first_retained, s.finished))
    }

    /// Attaches a live reader of `stream` that needs `want` next; returns its reader id.
    pub fn attach(&self, stream: u64, want: u64) -> u64 {
        self.ring().attach(stream, want)
    }

    /// Records the progress of an attached reader and wakes producers waiting for it.
    pub fn advance(&self, stream: u64, reader: u64, want: u64) {
        self.ring().advance(stream, reader, want);
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Detaches a reader (its connection is gone) and wakes producers waiting for it.
    pub fn detach(&self, stream: u64, reader: u64) {
        self.ring().detach(stream, reader);
        self.touch();
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Restarts the idle clock.
    pub fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
    }

    /// How long the session has been idle (zero while a reader is attached).
    pub fn idle_for(&self, now: std::time::Instant) -> std::time::Duration {
        if self.ring().has_readers() {
            return std::time::Duration::ZERO;
        }
        let last = *self.last_used.lock().unwrap_or_else(|p| p.into_inner());
        now.saturating_duration_since(last)
    }

    /// Waits until `stream` has no attached reader or its reader lags by fewer than `limit`
    /// events: a connected reader is never outrun by its own producer, a gone one never
    /// slows it.
    pub async fn room(&self, stream: u64, limit: u64) {
        let mut changes = self.subscribe();
        loop {
            changes.borrow_and_update();
            if self.ring().backlog(stream).is_none_or(|b| b < limit) {
                return;
            }
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// The ring's capacity in events.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// A receiver that changes whenever an event is pushed or a stream finishes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

/// Why a session could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManySessions;

/// The live sessions of one server.
#[derive(Debug)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
    max: usize,
    capacity: usize,
    byte_budget: Option<usize>,
    style: IdStyle,
}

impl Sessions {
    /// An empty table admitting at most `max` sessions with rings of `capacity` events and an
    /// optional byte budget each.
    pub fn new(max: usize, capacity: usize, byte_budget: Option<usize>) -> Self {
        Sessions {
            map: Mutex::new(HashMap::new()),
            max,
            capacity,
            byte_budget,
            style: IdStyle::Counter,
        }
    }

    /// The session a request's `Mcp-Session-Id` names: 400 if the header is missing, 404 if
    /// unknown or ended.
    pub(crate) fn named(&self, headers: &HeaderMap) -> Result<Arc<Session>, Refusal> {
        let Some(id) = headers.get(SESSION_HEADER) else {
            return Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                TRANSPORT_ERROR,
                "Mcp-Session-Id header is required",
            )));
        };
        id.to_str().ok().and_then(|id| self.get(id)).ok_or_else(|| {
            Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                Value::Null,
                TRANSPORT_ERROR,
                "session not found",
            ))
        })
    }

    /// The same table, whose sessions name events in `style`.
    pub fn with_id_style(mut self, style: IdStyle) -> Self {
        self.style = style;
        self
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates a session whose producers stop when `parent` is cancelled or it ends.
    pub fn create(
        &self,
        version: ProtocolVersion,
        parent: &CancellationToken,
    ) -> Result<Arc<Session>, TooManySessions> {
        let mut map = self.map();
        if map.len() >= self.max {
            return Err(TooManySessions);
        }
        let id = loop {
            let id = format!("{:032x}", rand::random::<u128>());
            if !map.contains_key(&id) {
                break id;
            }
        };
        let session = Arc::new(
            Session::new(
                id.clone(),
                version,
                self.capacity,
                self.byte_budget,
                parent.child_token(),
            )
            .with_id_style(self.style),
        );
        map.insert(id, Arc::clone(&session));
        Ok(session)
    }

    /// The session named `id` (a use: its idle clock restarts).
    pub fn get(&self, id: &str) -> Option<Arc<Session>> {
        let s = self.map().get(id).cloned();
        if let Some(s) = &s {
            s.touch();
        }
        s
    }

    /// Ends every session idle for longer than `limit` (as DELETE does); returns their ids.
    pub fn expire(&self, limit: std::time::Duration) -> Vec<String> {
        let now = std::time::Instant::now();
        let mut map = self.map();
        let stale: Vec<String> = map
            .iter()
            .filter(|(_, s)| s.idle_for(now) > limit)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &stale {
            if let Some(s) = map.remove(id) {
                s.cancel.cancel();
            }
        }
        stale
    }

    /// Ends the session named `id` (its producers stop); `false` if there was none.
    pub fn remove(&self, id: &str) -> bool {
        match self.map().remove(id) {
            Some(s) => {
                s.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Number of live sessions.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether there is no live session.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_table_enforces_its_limit_and_removal_cancels() {
        let root = CancellationToken::new();
        let table = Sessions::new(1, 4, None);
        let s = table.create(ProtocolVersion::V2025_11_25, &root);
        let s = s.unwrap_or_else(|_| panic!("first session must fit"));
        assert!(table.create(ProtocolVersion::V2025_11_25, &root).is_err());
        assert_eq!(s.id.len(), 32);
        assert!(table.remove(&s.id));
        assert!(s.cancel.is_cancelled());
        assert!(table.get(&s.id).is_none());
    }

    #[test]
    fn expiry_ends_idle_sessions_and_spares_those_with_a_reader() {
        let root = CancellationToken::new();
        let table = Sessions::new(4, 4, None);
        let mk = || {
            table
                .create(ProtocolVersion::V2025_11_25, &root)
                .unwrap_or_else(|_| panic!("session fits"))
        };
        let (idle, read) = (mk(), mk());
        let stream = read.open_stream();
        read.attach(stream, 0);
        std::thread::sleep(std::time::Duration::from_millis(30));
        let expired = table.expire(std::time::Duration::from_millis(10));
        assert_eq!(expired, std::slice::from_ref(&idle.id));
        assert!(idle.cancel.is_cancelled());
        assert!(table.get(&idle.id).is_none());
        assert!(
            table.get(&read.id).is_some(),
            "a session with a reader stays"
        );
        assert!(table.expire(std::time::Duration::from_secs(60)).is_empty());
    }
}
