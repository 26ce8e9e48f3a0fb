//! The ledger of one logical SSE stream: the events fully delivered to the client, the event
//! cut through, and the JSON-RPC calls the stream's POST carried.
//!
//! A logical stream is opened by one exchange (a POST answered with SSE or JSON, or a
//! standalone GET) and continued by every resume GET whose `Last-Event-ID` maps to it; all its
//! legs append to the same ledger.
//!
//! Invariants:
//! - Only ids and 64-bit data hashes are kept, never payloads.
//! - At most `cap` delivered events are remembered (oldest evicted first); `evicted` counts the
//!   forgotten ones, and an id evicted is unknown to the stream from then on (a cursor naming it
//!   is judged `unknown`, never guessed).
//! - Ordinals increase by one per delivered event and are never reused, so "after the cursor"
//!   is an ordinal comparison even when ids are opaque.
//! - A resume from inside a reset's unread window rolls the stream back to its cursor: the
//!   events after it leave the delivered ledger for `unsent` (owed, in stream order, until the
//!   server sends them again), so a later resume neither counts them as delivered (no false
//!   duplicate) nor forgets that they are owed.

use super::finding::{Finding, FindingCut, StreamRef};
use super::sequence::Sequences;
use std::collections::{HashMap, VecDeque};
use tokio::time::Instant;

/// Key of a logical stream inside the ledger.
pub type StreamKey = u64;

/// One remembered delivered event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Position in the stream (0-based, never reused).
    pub ordinal: u64,
    /// The event's own id, if it had one.
    pub id: Option<String>,
    /// FNV-1a 64 of the data buffer.
    pub hash: u64,
    /// Length of the data buffer.
    pub len: u64,
    /// False for an id committed without a dispatched event (an `id:` with no data): its hash
    /// means nothing.
    pub dispatched: bool,
    /// When the proxy delivered it (the observation's receipt time).
    pub at: Instant,
}

/// The event in progress when the stream was last cut, if the cut tore it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Torn {
    /// Its id, if its `id:` line was complete.
    pub id: Option<String>,
    /// The cut as the pump recorded it (class, bytes of the event delivered, `data:` line,
    /// the fault that cut): what a finding about the torn event reports.
    pub cut: FindingCut,
    /// Raw offset of the cut on the connection.
    pub raw_offset: u64,
}

/// A JSON-RPC request the stream's POST carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The id as JSON text.
    pub id: String,
    /// The method.
    pub method: String,
    /// Hash of its params.
    pub params_hash: u64,
    /// Responses seen for it.
    pub answers: u32,
    /// True once a `pending-call` was reported for it.
    pub reported: bool,
    /// True once a later request re-sent it, proven (see `reissue`): it counts as answered.
    pub replaced: bool,
    /// The `Idempotency-Key` of its POST, if any.
    pub key: Option<String>,
    /// What showed that its execution had visibly started before its stream was cut or closed
    /// (progress or response bytes delivered, a torn event, part of a JSON body), if anything
    /// did; set by rule `stateless` (any era), read by rule `abandoned` for `unproven-resend`.
    pub started: Option<&'static str>,
    /// Its `params._meta.progressToken` (JSON text), if any.
    pub progress_token: Option<String>,
}

/// The shape of an unanswered call (what a re-send must repeat): id, method, params hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallShape {
    pub id: String,
    pub method: String,
    pub params_hash: u64,
}

/// True if and only if `id` looks globally unique: at least 16 characters and not a plain
/// counter (uuids, `<uuid>_<ms>_<random>`). MCP requires ids to be unique only within a session,
/// so short ids such as `<stream>-<seq>` may repeat in every session and are never compared
/// across sessions.
pub fn is_globally_unique(id: &str) -> bool {
    id.len() >= 16 && !is_decimal(id)
}

/// True if and only if `id` is made of ASCII digits only (a per-stream or per-session counter
/// that may collide across sessions).
pub fn is_decimal(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
}

/// Whether the stream was opened by a POST or a standalone GET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A POST (its calls are in `calls`).
    Post,
    /// A standalone GET (or a resume whose cursor could not be mapped).
    Get,
}

/// The ledger of one logical stream.
#[derive(Debug)]
pub struct Stream {
    /// `Mcp-Session-Id`, `None` without a session.
    pub session: Option<String>,
    /// The opening exchange, for evidence.
    pub reference: StreamRef,
    /// POST or GET.
    pub origin: Origin,
    /// MCP protocol version in force when the stream opened.
    pub version: Option<String>,
    /// Calls of the opening POST.
    pub calls: Vec<Call>,
    /// When the opening request was seen.
    pub opened_at: Instant,
    ring: VecDeque<Entry>,
    id_pos: HashMap<String, u64>,
    hashes: HashMap<u64, u32>,
    next_ordinal: u64,
    cap: usize,
    /// Delivered events forgotten because of the cap.
    pub evicted: u64,
    /// The client's "last event ID string" after the last delivered event (sticky ids).
    pub last_event_id: Option<String>,
    /// The event torn by the last cut, if any.
    pub torn: Option<Torn>,
    /// After a `reset` cut: the ordinals `(after, through]` the proxy delivered on the cut leg
    /// that the client may never have read (its kernel may discard unread bytes at an RST);
    /// `after` is the leg's own cursor (`None`: the stream's start). Cleared by the next resume.
    /// The window is bounded by time: only events delivered less than `rst_unread` before the
    /// reset are in it (see [`Stream::read_before`]).
    pub unread: Option<(Option<u64>, u64)>,
    /// Events rolled back by a resume from inside a reset's unread window, in stream order:
    /// owed by every later resume until the server delivers them again.
    pub unsent: Vec<Entry>,
    /// After a cut: the oldest ordinal a client may still resume from, however stale (the cut
    /// leg's own cursor; the stream's first remembered event for a first leg); an ended stream
    /// keeps the events from it on, beyond `ended_events` (see `grace`). Cleared by the next
    /// resume.
    pub hold_from: Option<u64>,
    /// When the stream was last cut.
    pub cut_at: Option<Instant>,
    /// True between a cut and the first reconnect (resume, re-open or re-issue) for it.
    pub awaiting_reconnect: bool,
    /// Legs (exchanges) not yet ended.
    pub open_legs: u32,
    /// When the last leg ended.
    pub ended_at: Option<Instant>,
    /// Findings held until the stream is forgotten or the run finishes; a resume of the
    /// stream drops them.
    pub deferred: Vec<Finding>,
    /// Order and gap state over all legs (ids and progress values).
    pub seq: Sequences,
    /// HTTP/2: how an endpoint ended this stream when the proxy did not (the server's
    /// `RST_STREAM`, or not processed: `REFUSED_STREAM`, above a `GOAWAY`'s last stream), for
    /// the detail of a lost call's finding (see `h2`).
    pub h2_end: Option<String>,
    /// The hash of the raw request target that opened the stream (`0` until set): a
    /// session-less resume continues a stream of the same target, compared here because
    /// `reference.request` names query parameters without their values.
    pub target: u64,
}

impl Stream {
    /// A new, empty stream that remembers at most `cap` delivered events.
    pub fn new(
        session: Option<String>,
        reference: StreamRef,
        origin: Origin,
        version: Option<String>,
        opened_at: Instant,
        cap: usize,
    ) -> Self {
        Stream {
            session,
            reference,
            origin,
            version,
            calls: Vec::new(),
            opened_at,
            ring: VecDeque::new(),
            id_pos: HashMap::new(),
            hashes: HashMap::new(),
            next_ordinal: 0,
            cap: cap.max(1),
            evicted: 0,
            last_event_id: None,
            torn: None,
            unread: None,
            unsent: Vec::new(),
            hold_from: None,
            cut_at: None,
            awaiting_reconnect: false,
            open_legs: 0,
            ended_at: None,
            deferred: Vec::new(),
            target: 0,
            seq: Sequences::default(),
            h2_end: None,
        }
    }

    /// Records a delivered event; returns the entry evicted to make room, if any.
    pub fn push(
        &mut self,
        id: Option<String>,
        hash: u64,
        len: u64,
        dispatched: bool,
        at: Instant,
    ) -> Option<Entry> {
        let ordinal = self.next_ordinal;
        self.next_ordinal += 1;
        if let Some(id) = &id {
            if !self.unsent.is_empty() {
                self.unsent.retain(|e| e.id.as_ref() != Some(id));
            }
            self.id_pos.insert(id.clone(), ordinal);
            if self.torn.as_ref().and_then(|t| t.id.as_ref()) == Some(id) {
                self.torn = None;
            }
        }
        if dispatched && len > 0 {
            *self.hashes.entry(hash).or_insert(0) += 1;
        }
        self.ring.push_back(Entry {
            ordinal,
            id,
            hash,
            len,
            dispatched,
            at,
        });
        if self.ring.len() <= self.cap {
            return None;
        }
        self.pop_oldest()
    }

    /// Forgets the oldest remembered entry (counted in `evicted`) and returns it.
    pub fn pop_oldest(&mut self) -> Option<Entry> {
        let old = self.ring.pop_front()?;
        self.evicted += 1;
        if let Some(id) = &old.id
            && self.id_pos.get(id) == Some(&old.ordinal)
        {
            self.id_pos.remove(id);
        }
        if old.dispatched
            && old.len > 0
            && let Some(n) = self.hashes.get_mut(&old.hash)
        {
            *n -= 1;
            if *n == 0 {
                self.hashes.remove(&old.hash);
            }
        }
        Some(old)
    }

    /// The ordinal of the newest event delivered at least `t` before `at` (read by the client
    /// by then, whatever a reset at `at` discards); `None` when every remembered event is
    /// younger and none was forgotten (the client may have read nothing).
    pub fn read_before(&self, at: Instant, t: std::time::Duration) -> Option<u64> {
        self.ring
            .iter()
            .rev()
            .find(|e| at.saturating_duration_since(e.at) >= t)
            .map(|e| e.ordinal)
            .or_else(|| {
                self.ring
                    .front()
                    .and_then(|e| e.ordinal.checked_sub(1))
                    .filter(|_| self.evicted > 0)
            })
    }

    /// Rolls the stream back to ordinal `after`: the newer remembered events become undelivered
    /// (the client never read them); those it dispatched go to the front of `unsent` (owed
    /// again). Returns the id and data hash of each rolled-back dispatched event.
    pub fn roll_back(&mut self, after: u64) -> Vec<(String, u64)> {
        let mut gone = Vec::new();
        while self.ring.back().is_some_and(|e| e.ordinal > after) {
            let Some(e) = self.ring.pop_back() else {
                break;
            };
            if e.dispatched
                && e.len > 0
                && let Some(n) = self.hashes.get_mut(&e.hash)
            {
                *n -= 1;
                if *n == 0 {
                    self.hashes.remove(&e.hash);
                }
            }
            gone.push(e);
        }
        gone.reverse();
        let ids: std::collections::HashSet<&String> =
            gone.iter().filter_map(|e| e.id.as_ref()).collect();
        for id in &ids {
            self.id_pos.remove(*id);
        }
        // An id delivered again earlier (a replay) points at its latest remaining delivery.
        for e in &self.ring {
            if let Some(id) = e.id.as_ref().filter(|id| ids.contains(id)) {
                self.id_pos.insert(id.clone(), e.ordinal);
            }
        }
        let mut owed: Vec<Entry> = gone
            .into_iter()
            .filter(|e| e.dispatched && e.len > 0 && e.id.is_some())
            .collect();
        let out = owed
            .iter()
            .filter_map(|e| e.id.clone().map(|id| (id, e.hash)))
            .collect();
        owed.append(&mut self.unsent);
        self.unsent = owed;
        out
    }

    /// True if and only if the oldest remembered event must be kept when the ended stream is
    /// compacted (a client may still resume from it: see `hold_from`).
    pub fn front_held(&self) -> bool {
        match (self.hold_from, self.ring.front()) {
            (Some(h), Some(e)) => e.ordinal >= h,
            _ => false,
        }
    }

    /// The data hash of rolled-back event `id` (owed again, see `unsent`), if it is one.
    pub fn unsent_hash(&self, id: &str) -> Option<u64> {
        self.unsent
            .iter()
            .find(|e| e.id.as_deref() == Some(id))
            .map(|e| e.hash)
    }

    /// True if and only if `id` is remembered as delivered or owed again (`unsent`).
    pub fn owns_id(&self, id: &str) -> bool {
        self.id_pos.contains_key(id) || self.unsent.iter().any(|e| e.id.as_deref() == Some(id))
    }

    /// Gives back the spare capacity of the stream's tables (an ended stream, see `grace`).
    pub fn compact(&mut self) {
        self.ring.shrink_to_fit();
        self.id_pos.shrink_to_fit();
        self.hashes.shrink_to_fit();
        self.calls.shrink_to_fit();
        self.deferred.shrink_to_fit();
        self.unsent.shrink_to_fit();
    }

    /// Every remembered entry, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.ring.iter()
    }

    /// The latest remembered entry carrying `id`.
    pub fn entry_of(&self, id: &str) -> Option<&Entry> {
        let ordinal = *self.id_pos.get(id)?;
        // Ordinals increase along the ring but skip what a roll-back removed.
        let idx = self
            .ring
            .binary_search_by_key(&ordinal, |e| e.ordinal)
            .ok()?;
        self.ring.get(idx)
    }

    /// True if and only if a remembered dispatched, non-empty event had this data hash.
    pub fn has_hash(&self, hash: u64) -> bool {
        self.hashes.contains_key(&hash)
    }

    /// Ordinal of the last delivered event (`None` before any).
    pub fn last_ordinal(&self) -> Option<u64> {
        self.next_ordinal.checked_sub(1)
    }

    /// Remembered entries with an id whose ordinal is in `(after, upto]`.
    pub fn ids_between(&self, after: Option<u64>, upto: Option<u64>) -> Vec<(u64, String)> {
        let Some(upto) = upto else {
            return Vec::new();
        };
        self.ring
            .iter()
            .filter(|e| after.is_none_or(|a| e.ordinal > a) && e.ordinal <= upto)
            .filter_map(|e| e.id.clone().map(|id| (e.ordinal, id)))
            .collect()
    }

    /// Ids of remembered events in `(after, upto]` a client dispatched (non-empty data), then
    /// the rolled-back ones (`unsent`): the events a replay after a cursor owes, each id once.
    /// Priming events and ids committed without an event are never owed.
    pub fn owed_between(&self, after: u64, upto: Option<u64>) -> Vec<String> {
        let Some(upto) = upto else {
            return Vec::new();
        };
        // An id delivered again (a replay of a stale cursor) is owed once, at its latest place.
        let latest = |e: &&Entry| {
            e.id.as_ref().is_some_and(|id| {
                self.id_pos.get(id) == Some(&e.ordinal) && !self.unsent.iter().any(|u| u.id == e.id)
            })
        };
        self.ring
            .iter()
            .filter(|e| e.ordinal > after && e.ordinal <= upto && e.dispatched && e.len > 0)
            .filter(latest)
            .chain(self.unsent.iter())
            .filter_map(|e| e.id.clone())
            .collect()
    }

    /// All ids the stream remembers, delivered or owed again (for removing them from indexes
    /// when it is forgotten).
    pub fn remembered_ids(&self) -> impl Iterator<Item = &String> {
        self.id_pos
            .keys()
            .chain(self.unsent.iter().filter_map(|e| e.id.as_ref()))
    }

    /// Number of remembered entries (bounded by the cap).
    pub fn remembered(&self) -> usize {
        self.ring.len()
    }

    /// Calls without any answer that no re-issue replaced.
    pub fn unanswered(&self) -> impl Iterator<Item = &Call> {
        self.calls.iter().filter(|c| c.answers == 0 && !c.replaced)
    }

    /// The shapes of the calls still waiting for an answer (no proven re-send replaced them).
    pub fn unanswered_shapes(&self) -> Vec<CallShape> {
        self.unanswered()
            .map(|c| CallShape {
                id: c.id.clone(),
                method: c.method.clone(),
                params_hash: c.params_hash,
            })
            .collect()
    }

    /// Ids of the opening POST's unanswered calls, as JSON text.
    pub fn unanswered_ids(&self) -> Vec<String> {
        self.unanswered().map(|c| c.id.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SseClass;

    fn stream(cap: usize) -> Stream {
        Stream::new(
            None,
            StreamRef::default(),
            Origin::Get,
            None,
            Instant::now(),
            cap,
        )
    }

    #[test]
    fn cap_evicts_oldest_ids_and_hashes() {
        let mut s = stream(3);
        for i in 0..5u64 {
            s.push(Some(i.to_string()), 100 + i, 1, true, Instant::now());
        }
        assert_eq!(s.remembered(), 3);
        assert_eq!(s.evicted, 2);
        assert!(s.entry_of("0").is_none());
        assert!(!s.has_hash(100));
        assert_eq!(s.entry_of("4").map(|e| e.ordinal), Some(4));
        assert_eq!(s.remembered_ids().count(), 3);
        let between: Vec<String> = s
            .ids_between(Some(2), Some(4))
            .into_iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(between, vec!["3".to_string(), "4".to_string()]);
    }

    #[test]
    fn roll_back_makes_later_events_owed_once_and_undelivered() {
        let mut s = stream(16);
        let t = Instant::now();
        for i in 0..6u64 {
            s.push(Some(i.to_string()), 100 + i, 1, true, t);
        }
        let gone: Vec<String> = s.roll_back(2).into_iter().map(|p| p.0).collect();
        assert_eq!(gone, ["3", "4", "5"]);
        assert!(s.entry_of("3").is_none() && s.owns_id("3") && !s.has_hash(103));
        assert_eq!(s.owed_between(2, s.last_ordinal()), ["3", "4", "5"]);
        // The replay re-delivers 3: it is delivered again, 4 and 5 are still owed.
        s.push(Some("3".into()), 103, 1, true, t);
        assert_eq!(s.entry_of("3").map(|e| e.ordinal), Some(6));
        assert_eq!(s.entry_of("2").map(|e| e.ordinal), Some(2));
        assert_eq!(s.owed_between(2, s.last_ordinal()), ["3", "4", "5"]);
        assert_eq!(s.owed_between(6, s.last_ordinal()), ["4", "5"]);
        // Nothing rolled back: nothing is owed beyond what came after the cursor.
        let mut plain = stream(16);
        plain.push(Some("a".into()), 1, 1, true, t);
        assert!(plain.owed_between(0, plain.last_ordinal()).is_empty());
    }

    #[test]
    fn read_before_is_the_newest_event_old_enough_to_have_been_read() {
        let mut s = stream(4);
        let t0 = Instant::now();
        let ms = std::time::Duration::from_millis;
        for i in 0..3u64 {
            s.push(Some(i.to_string()), i, 1, true, t0 + ms(10 * i));
        }
        assert_eq!(s.read_before(t0 + ms(20), ms(10)), Some(1));
        assert_eq!(s.read_before(t0 + ms(20), ms(50)), None);
        for i in 3..7u64 {
            s.push(Some(i.to_string()), i, 1, true, t0 + ms(100));
        }
        // Only young events remembered: the forgotten ones before them were read.
        assert_eq!(s.read_before(t0 + ms(100), ms(50)), Some(2));
    }

    #[test]
    fn delivering_the_torn_id_clears_torn() {
        let mut s = stream(8);
        s.torn = Some(Torn {
            id: Some("42".into()),
            cut: FindingCut {
                class: Some(SseClass::MidValue),
                torn_bytes: Some(10),
                data_line: Some(1),
                ..FindingCut::default()
            },
            raw_offset: 99,
        });
        s.push(Some("42".into()), 1, 1, true, Instant::now());
        assert!(s.torn.is_none());
    }
}
