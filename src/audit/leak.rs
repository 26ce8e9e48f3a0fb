//! Cross-session leakage under per-session ids: a replay that delivers another session's events
//! when both sessions name their events alike (`<stream>-<seq>` counters, which MCP allows to
//! repeat in every session), so the id alone never shows the leak.
//!
//! Evidence (all of it from the wire): the replayed event is byte-identical, id and data, to an
//! event a stream of another session already delivered to its client, and the two streams are
//! known to differ: under some id both delivered, their data differed. A stream of a
//! deterministic tool called alike in two sessions never differs from its twin, so identical
//! content there proves nothing and is never reported; content the home stream itself already
//! delivered (a generic message repeated) proves nothing either.
//!
//! Invariants:
//! - The index maps (id, data hash) of every dispatched, non-empty event with a per-session id
//!   to the last stream that delivered it; an entry is removed when that stream forgets the
//!   event (cap) or is forgotten, so memory follows the streams' own bounds.
//! - A candidate is always re-checked against the live stream (its entry for the id is
//!   dispatched with the same hash), so a stale or colliding key can never produce a finding.

use super::stream::{Stream, StreamKey, is_globally_unique};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

fn id_key(id: &str, hash: u64) -> (u64, u64) {
    (xxhash_rust::xxh3::xxh3_64(id.as_bytes()), hash)
}

/// (per-session id, data hash) → the stream that last delivered that event.
#[derive(Debug, Default)]
pub struct SharedIds {
    by_event: HashMap<(u64, u64), StreamKey>,
}

impl SharedIds {
    /// Notes that `key` delivered `id` with data `hash` (ids that look globally unique are
    /// indexed elsewhere and skipped).
    pub fn add(&mut self, id: &str, hash: u64, key: StreamKey) {
        if !is_globally_unique(id) {
            self.by_event.insert(id_key(id, hash), key);
        }
    }

    /// Forgets that `key` delivered `id` with `hash` (if it is still the one indexed).
    pub fn remove(&mut self, id: &str, hash: u64, key: StreamKey) {
        let k = id_key(id, hash);
        if self.by_event.get(&k) == Some(&key) {
            self.by_event.remove(&k);
        }
    }

    /// Forgets every event of `stream` (keyed `key`).
    pub fn remove_stream(&mut self, key: StreamKey, stream: &Stream) {
        for e in stream.entries() {
            if let Some(id) = &e.id {
                self.remove(id, e.hash, key);
            }
        }
    }

    fn get(&self, id: &str, hash: u64) -> Option<StreamKey> {
        self.by_event.get(&id_key(id, hash)).copied()
    }

    /// Gives back table capacity once most entries are gone.
    pub fn shrink(&mut self) {
        super::gauges::shrink(&mut self.by_event);
    }

    /// Entries held (for tests and memory checks).
    pub fn len(&self) -> usize {
        self.by_event.len()
    }

    /// True if nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_event.is_empty()
    }
}

/// The first id both streams delivered with different data, if any.
fn divergence(home: &Stream, other: &Stream) -> Option<String> {
    home.entries()
        .filter(|e| e.dispatched && e.len > 0)
        .find_map(|e| {
            let id = e.id.as_ref()?;
            other
                .entry_of(id)
                .filter(|o| o.dispatched && o.len > 0 && o.hash != e.hash)
                .map(|_| id.clone())
        })
}

/// Where a leaked event came from, and the id that shows the two streams differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    /// The other session's stream that delivered the event first.
    pub source: StreamKey,
    /// An id both streams delivered with different data.
    pub diverged_at: String,
}

/// Session-less evidence that stream `key` replays stream `other`'s event (`id`, `hash`):
/// `other` delivered it with that data and the two streams are known to differ (an id both
/// delivered with different data). Twins (a broadcast feed) never qualify.
pub fn differing_twin(
    streams: &FxHashMap<StreamKey, Stream>,
    (key, other): (StreamKey, StreamKey),
    id: &str,
    hash: u64,
    len: u64,
) -> bool {
    if len == 0 {
        return false;
    }
    let (Some(home), Some(o)) = (streams.get(&key), streams.get(&other)) else {
        return false;
    };
    if home.has_hash(hash) {
        return false;
    }
    o.entry_of(id)
        .is_some_and(|e| e.dispatched && e.hash == hash)
        && divergence(home, o).is_some()
}

/// The stream of another session whose event (`id`, `hash`) stream `key` is replaying, if
/// the evidence of the module doc holds.
pub fn leak_source(
    streams: &FxHashMap<StreamKey, Stream>,
    shared: &SharedIds,
    key: StreamKey,
    (id, hash, len): (&str, u64, u64),
) -> Option<Leak> {
    if len == 0 || is_globally_unique(id) {
        return None;
    }
    let home = streams.get(&key)?;
    if home.has_hash(hash) {
        return None;
    }
    let source = shared.get(id, hash).filter(|k| *k != key)?;
    let other = streams.get(&source)?;
    if other.session == home.session {
        return None;
    }
    other
        .entry_of(id)
        .filter(|e| e.dispatched && e.hash == hash)?;
    let diverged_at = divergence(home, other)?;
    Some(Leak {
        source,
        diverged_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditConfig;
    use crate::audit::finding::StreamRef;
    use crate::audit::ledger::Ledger;
    use crate::audit::stream::Origin;
    use tokio::time::Instant;

    /// A ledger with one stream per session, each delivering `(id, hash)` in order.
    fn ledger(streams: &[(&str, &[(&str, u64)])]) -> (Ledger, Vec<StreamKey>) {
        let now = Instant::now();
        let mut l = Ledger::new(AuditConfig::default(), now);
        let mut keys = Vec::new();
        for (session, events) in streams {
            let s = Stream::new(
                Some((*session).to_owned()),
                StreamRef::default(),
                Origin::Post,
                None,
                now,
                64,
            );
            let key = l.add_stream(s, now);
            for (id, hash) in *events {
                l.push_event(key, Some((*id).to_owned()), *hash, 10, true, Instant::now());
            }
            keys.push(key);
        }
        (l, keys)
    }

    #[test]
    fn another_sessions_event_is_a_leak_only_when_the_streams_differ() {
        let a: &[(&str, u64)] = &[("1-1", 11), ("1-2", 12), ("1-3", 13)];
        // B's own events differ from A's under the same ids (another `total`).
        let (l, k) = ledger(&[("a", a), ("b", &[("1-1", 21), ("1-2", 22)])]);
        let leak = l.leak_source(k[1], "1-3", 13, 10);
        assert_eq!(
            leak,
            Some(Leak {
                source: k[0],
                diverged_at: "1-1".into()
            })
        );
        assert_eq!(l.leak_source(k[1], "1-3", 23, 10), None, "its own event");
        assert_eq!(l.leak_source(k[1], "1-3", 13, 0), None, "no data");
        // Twins (a deterministic tool called alike in two sessions) prove nothing.
        let (l, k) = ledger(&[("a", a), ("b", &[("1-1", 11), ("1-2", 12)])]);
        assert_eq!(l.leak_source(k[1], "1-3", 13, 10), None);
        // The same session's other stream is not a session leak.
        let (l, k) = ledger(&[("a", a), ("a", &[("1-1", 21)])]);
        assert_eq!(l.leak_source(k[1], "1-3", 13, 10), None);
    }

    #[test]
    fn the_index_forgets_events_with_their_stream() {
        let a: &[(&str, u64)] = &[("1-1", 11), ("1-2", 12)];
        let (mut l, k) = ledger(&[("a", a), ("b", &[("1-1", 21)])]);
        assert_eq!(l.shared_ids.len(), 3);
        for key in k {
            l.remove_stream(key);
        }
        assert!(l.shared_ids.is_empty());
    }
}
