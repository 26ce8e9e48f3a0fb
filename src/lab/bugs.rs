//! Scripted server bugs of the lab, each off by default: the ground truth the audit's verdicts
//! are measured against (see [`super::truth`]). The knobs themselves ([`ServerBug`],
//! [`IdStyle`]) are values of [`super::config`]; event ids are [`super::ids`].
//!
//! Why: real event stores misbehave in a handful of ways (PROTOCOL.md, "What real servers put
//! on the wire"); the lab reproduces each one on purpose, on a resume leg only, and records
//! what it did, so a test knows the truth without asking the audit.
//!
//! Invariants:
//! - [`ServerBug::None`] changes nothing: a resume replays the events after the cursor, in
//!   order, once each.
//! - A bug acts on resume legs only (a POST's own stream is always correct), and only on
//!   `notifications/progress` events, except [`ServerBug::LoseFinal`] which drops the call's
//!   JSON-RPC response. The lab's progress notifications never contain `"result":` and its
//!   responses always do, so the classification of an event by its bytes is exact.
//! - Every injected deviation is recorded on the leg's truth record before the bytes leave.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

pub use super::config::{IdStyle, ServerBug};
use super::ring::StoredEvent;
use super::truth::{Injected, LegHandle};

/// Whether `bytes` (one lab event) carries a `notifications/progress`.
pub fn is_progress(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"method\":\"notifications/progress\"").is_some()
}

/// Whether `bytes` (one lab message event) carries a JSON-RPC response.
pub fn is_response(bytes: &[u8]) -> bool {
    memchr::memmem::find(bytes, b"\"result\":").is_some()
}

/// Server-wide state of the bugs: the shared store's index.
#[derive(Debug, Default)]
pub struct BugState {
    /// Shared store: request id (JSON text) → the first (session, stream) opened for it.
    by_request: Mutex<HashMap<String, (String, u64)>>,
    /// (session, stream) → the request ids its POST carried.
    requests: Mutex<HashMap<(String, u64), Vec<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BugState {
    /// Records that `stream` of `session` answers the requests `ids` (first writer wins in the
    /// shared store).
    pub fn register(&self, session: &str, stream: u64, ids: &[String]) {
        let mut by_request = lock(&self.by_request);
        for id in ids {
            by_request
                .entry(id.clone())
                .or_insert_with(|| (session.to_owned(), stream));
        }
        lock(&self.requests).insert((session.to_owned(), stream), ids.to_vec());
    }

    /// Shared store: the (session, stream) a resume of `stream` of `session` is served from.
    pub fn shared_source(&self, session: &str, stream: u64) -> Option<(String, u64)> {
        let requests = lock(&self.requests);
        let first = requests.get(&(session.to_owned(), stream))?.first()?;
        lock(&self.by_request).get(first).cloned()
    }
}

/// What one delivery does to the events it sends: its bug (on resume legs) and its truth
/// record.
#[derive(Debug, Default)]
pub struct LegShape {
    /// The bug in force; `None` on POST legs.
    pub bug: ServerBug,
    /// The truth record of this leg, when the lab records truth.
    pub leg: Option<LegHandle>,
    first_done: bool,
}

/// What the delivery does after shaping a batch.
#[derive(Debug)]
pub struct Shaped {
    /// The events to send, in order.
    pub events: Vec<StoredEvent>,
    /// True if the body must end after them (a dropped response).
    pub end: bool,
}

impl LegShape {
    /// A shape for a leg with `bug` (use `ServerBug::None` for POST legs).
    pub fn new(bug: ServerBug, leg: Option<LegHandle>) -> Self {
        LegShape {
            bug,
            leg,
            first_done: false,
        }
    }

    fn inject(&self, what: Injected) {
        if let Some(leg) = &self.leg {
            leg.inject(what);
        }
    }

    /// Applies the bug to one batch of events read from the ring.
    pub fn shape(&mut self, mut events: Vec<StoredEvent>) -> Shaped {
        let first = !self.first_done;
        self.first_done = true;
        match self.bug {
            ServerBug::None | ServerBug::SharedStore => {}
            ServerBug::Reorder if first => {
                if events.len() >= 2
                    && is_progress(&events[0].bytes)
                    && is_progress(&events[1].bytes)
                {
                    events.swap(0, 1);
                    self.inject(Injected::Reordered {
                        seqs: vec![events[1].seq, events[0].seq],
                    });
                }
            }
            ServerBug::Duplicate if first => {
                if let Some(e) = events.first().filter(|e| is_progress(&e.bytes)).cloned() {
                    self.inject(Injected::Duplicated { seq: e.seq });
                    events.insert(0, e);
                }
            }
            ServerBug::DropAfterReplay if first => {
                let mut dropped = Vec::new();
                let i = 1;
                // Only progress events, never the last event of the batch: something later
                // always arrives, so the drop is a gap, not a truncation.
                while dropped.len() < 2 && i + 1 < events.len() && is_progress(&events[i].bytes) {
                    dropped.push(events.remove(i).seq);
                }
                if !dropped.is_empty() {
                    self.inject(Injected::Dropped { seqs: dropped });
                }
            }
            ServerBug::LoseFinal => {
                // Every resume leg loses it, so the response is gone for good.
                if let Some(at) = events.iter().position(|e| is_response(&e.bytes)) {
                    let seq = events[at].seq;
                    events.truncate(at);
                    self.inject(Injected::FinalLost { seq });
                    return Shaped { events, end: true };
                }
            }
            ServerBug::Reorder | ServerBug::Duplicate | ServerBug::DropAfterReplay => {}
        }
        Shaped { events, end: false }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn ev(seq: u64, body: &str) -> StoredEvent {
        StoredEvent {
            stream: 1,
            seq,
            resource: None,
            bytes: Bytes::from(body.to_owned()),
            hold: None,
        }
    }

    const P: &str = r#"data: {"method":"notifications/progress"}"#;
    const R: &str = r#"data: {"id":1,"result":{}}"#;

    fn seqs(s: &Shaped) -> Vec<u64> {
        s.events.iter().map(|e| e.seq).collect()
    }

    #[test]
    fn each_bug_shapes_only_the_first_resume_batch_of_progress_events() {
        let batch = || vec![ev(3, P), ev(4, P), ev(5, P), ev(6, R)];
        let mut s = LegShape::new(ServerBug::Reorder, None);
        assert_eq!(seqs(&s.shape(batch())), [4, 3, 5, 6]);
        assert_eq!(seqs(&s.shape(batch())), [3, 4, 5, 6]);
        let mut s = LegShape::new(ServerBug::Duplicate, None);
        assert_eq!(seqs(&s.shape(batch())), [3, 3, 4, 5, 6]);
        let mut s = LegShape::new(ServerBug::DropAfterReplay, None);
        assert_eq!(seqs(&s.shape(batch())), [3, 6]);
        let mut s = LegShape::new(ServerBug::DropAfterReplay, None);
        assert_eq!(seqs(&s.shape(vec![ev(3, P), ev(6, R)])), [3, 6]);
        let mut s = LegShape::new(ServerBug::None, None);
        assert_eq!(seqs(&s.shape(batch())), [3, 4, 5, 6]);
    }

    #[test]
    fn lose_final_drops_the_response_and_ends_the_body() {
        let mut s = LegShape::new(ServerBug::LoseFinal, None);
        let out = s.shape(vec![ev(3, P), ev(4, R)]);
        assert_eq!((seqs(&out), out.end), (vec![3], true));
        let out = s.shape(vec![ev(5, P)]);
        assert_eq!((seqs(&out), out.end), (vec![5], false));
    }

    #[test]
    fn shared_store_serves_the_first_stream_of_a_request_id() {
        let st = BugState::default();
        st.register("a", 1, &["1".to_owned()]);
        st.register("b", 1, &["1".to_owned()]);
        assert_eq!(st.shared_source("b", 1), Some(("a".to_owned(), 1)));
        assert_eq!(st.shared_source("a", 1), Some(("a".to_owned(), 1)));
        assert_eq!(st.shared_source("c", 1), None);
    }
}
