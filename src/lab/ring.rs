//! The per-session ring of SSE events, shared by all streams of a session, and the per-stream
//! bookkeeping that decides what a cursor may still be served.
//!
//! Invariants:
//! - The ring holds at most `capacity` events; pushing into a full ring evicts the oldest
//!   event of the session, whichever stream it belongs to.
//! - With a byte budget, a reader detaching from a ring that holds more bytes than the budget
//!   evicts the oldest events until it fits (eviction under memory pressure, as in seed 004:
//!   the server dropped its buffer while the client was away). Nothing is evicted for bytes
//!   while readers stay attached, so a connected client is never starved by the budget.
//! - Events of one stream enter in sequence order, so the evicted events of a stream are a
//!   prefix of it: `first_retained` alone tells which sequence numbers are gone.
//! - The ring never changes an event's bytes; what a client is sent on resume is exactly what
//!   the producer pushed.
//! - At most one reader is attached to a stream (the newest attach wins); its `want` is the
//!   next sequence number it needs, so producers can hold back while a connected reader lags
//!   (`backlog`) and run freely while no reader is attached.
//!
//! The ring does no I/O and never blocks; [`crate::lab::session`] wraps it in a mutex.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;

/// One SSE event as it goes on the wire (all lines, blank line included).
#[derive(Debug, Clone)]
pub struct StoredEvent {
    /// The stream the event belongs to.
    pub stream: u64,
    /// Its position in that stream (0 is the priming event when there is one).
    pub seq: u64,
    /// The resource indicator a token's audience must name to receive it (`None`: anyone).
    pub resource: Option<Arc<str>>,
    /// The encoded event.
    pub bytes: Bytes,
    /// Where its delivery pauses (`blob`'s `hold_ms`/`gate`), if anywhere.
    pub hold: Option<super::hold::Hold>,
}

/// What the ring knows about one stream.
#[derive(Debug, Clone, Default)]
pub struct StreamInfo {
    /// Sequence number the next pushed event gets.
    pub next_seq: u64,
    /// Lowest sequence number still in the ring (== `next_seq` when none is).
    pub first_retained: u64,
    /// Whether the producer pushed the stream's last event.
    pub finished: bool,
}

/// What a reader whose last delivered event is `cursor` gets next.
#[derive(Debug, Clone)]
pub enum Next {
    /// Events after the cursor, in order (at least one).
    Events(Vec<StoredEvent>),
    /// Events after the cursor were evicted: sequence numbers `from..=to` are lost.
    Lost {
        /// First lost sequence number.
        from: u64,
        /// Last lost sequence number.
        to: u64,
    },
    /// Nothing yet; the producer is still running.
    Wait,
    /// The stream is finished and the reader has everything.
    Finished,
    /// No such stream.
    Unknown,
}

/// A session's event ring.
#[derive(Debug)]
pub struct Ring {
    capacity: usize,
    /// Bytes the ring may keep once a reader detaches (`None`: no budget).
    byte_budget: Option<usize>,
    /// Encoded bytes of the events held.
    bytes: usize,
    events: VecDeque<StoredEvent>,
    streams: HashMap<u64, StreamInfo>,
    next_stream: u64,
    /// stream → (reader id, next sequence number the reader needs).
    attached: HashMap<u64, (u64, u64)>,
    next_reader: u64,
}

impl Ring {
    /// An empty ring holding at most `capacity` events (at least one).
    pub fn new(capacity: usize) -> Self {
        Ring::with_budget(capacity, None)
    }

    /// An empty ring of at most `capacity` events that sheds down to `byte_budget` bytes when a
    /// reader detaches (see the module doc).
    pub fn with_budget(capacity: usize, byte_budget: Option<usize>) -> Self {
        Ring {
            capacity: capacity.max(1),
            byte_budget,
            bytes: 0,
            events: VecDeque::new(),
            streams: HashMap::new(),
            next_stream: 1,
            attached: HashMap::new(),
            next_reader: 1,
        }
    }

    /// Opens a new stream and returns its id (unique within the session).
    pub fn open_stream(&mut self) -> u64 {
        let id = self.next_stream;
        self.next_stream += 1;
        self.streams.insert(id, StreamInfo::default());
        id
    }

    /// The bookkeeping of `stream`, if it exists.
    pub fn stream(&self, stream: u64) -> Option<&StreamInfo> {
        self.streams.get(&stream)
    }

    /// The sequence number the next event of `stream` will get.
    pub fn next_seq(&self, stream: u64) -> Option<u64> {
        self.streams.get(&stream).map(|s| s.next_seq)
    }

    /// Appends an event to `stream`, built by `encode` from its sequence number, evicting the
    /// session's oldest event if the ring is full. Returns the sequence number, or `None` for
    /// an unknown stream.
    pub fn push(
        &mut self,
        stream: u64,
        resource: Option<Arc<str>>,
        encode: impl FnOnce(u64) -> Bytes,
    ) -> Option<u64> {
        self.push_held(stream, resource, None, encode)
    }

    /// [`Ring::push`] of an event whose delivery pauses as `hold` says.
    pub fn push_held(
        &mut self,
        stream: u64,
        resource: Option<Arc<str>>,
        hold: Option<super::hold::Hold>,
        encode: impl FnOnce(u64) -> Bytes,
    ) -> Option<u64> {
        let info = self.streams.get_mut(&stream)?;
        let seq = info.next_seq;
        info.next_seq += 1;
        let bytes = encode(seq);
        if self.events.len() >= self.capacity {
            self.evict_oldest();
        }
        self.bytes += bytes.len();
        self.events.push_back(StoredEvent {
            stream,
            seq,
            resource,
            bytes,
            hold,
        });
        Some(seq)
    }

    /// Drops the session's oldest event; returns false when the ring is empty.
    fn evict_oldest(&mut self) -> bool {
        let Some(old) = self.events.pop_front() else {
            return false;
        };
        self.bytes -= old.bytes.len();
        if let Some(s) = self.streams.get_mut(&old.stream) {
            s.first_retained = old.seq + 1;
        }
        true
    }

    /// Evicts the oldest events while the ring holds more bytes than its budget.
    fn shed(&mut self) {
        let Some(budget) = self.byte_budget else {
            return;
        };
        while self.bytes > budget && self.evict_oldest() {}
    }

    /// Marks `stream` finished: readers that have its last event are done.
    pub fn finish(&mut self, stream: u64) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.finished = true;
        }
    }

    /// Whether the event `seq` of `stream` is still in the ring.
    pub fn retains(&self, stream: u64, seq: u64) -> bool {
        self.streams
            .get(&stream)
            .is_some_and(|s| seq >= s.first_retained && seq < s.next_seq)
    }

    /// What a reader of `stream` whose last delivered event is `cursor` (`None`: nothing yet)
    /// gets next; at most `limit` events.
    pub fn next_after(&self, stream: u64, cursor: Option<u64>, limit: usize) -> Next {
        let Some(info) = self.streams.get(&stream) else {
            return Next::Unknown;
        };
        let want = cursor.map_or(0, |c| c + 1);
        if want >= info.next_seq {
            return if info.finished {
                Next::Finished
            } else {
                Next::Wait
            };
        }
        if want < info.first_retained {
            return Next::Lost {
                from: want,
                to: info.first_retained - 1,
            };
        }
        let events: Vec<StoredEvent> = self
            .events
            .iter()
            .filter(|e| e.stream == stream && e.seq >= want)
            .take(limit.max(1))
            .cloned()
            .collect();
        if events.is_empty() {
            // Unreachable by the prefix invariant; treated as a loss rather than trusted.
            Next::Lost {
                from: want,
                to: info.next_seq - 1,
            }
        } else {
            Next::Events(events)
        }
    }

    /// Attaches a reader needing `want` next to `stream`, replacing any previous reader.
    pub fn attach(&mut self, stream: u64, want: u64) -> u64 {
        let reader = self.next_reader;
        self.next_reader += 1;
        self.attached.insert(stream, (reader, want));
        reader
    }

    /// Records that `reader` of `stream` now needs `want` next.
    pub fn advance(&mut self, stream: u64, reader: u64, want: u64) {
        if let Some(a) = self.attached.get_mut(&stream).filter(|a| a.0 == reader) {
            a.1 = want;
        }
    }

    /// Detaches `reader` from `stream` (no-op if another reader replaced it).
    pub fn detach(&mut self, stream: u64, reader: u64) {
        if self.attached.get(&stream).is_some_and(|a| a.0 == reader) {
            self.attached.remove(&stream);
            self.shed();
        }
    }

    /// Whether any stream has an attached reader.
    pub fn has_readers(&self) -> bool {
        !self.attached.is_empty()
    }

    /// Events of `stream` pushed but not yet taken by its attached reader (`None`: no reader).
    pub fn backlog(&self, stream: u64) -> Option<u64> {
        let (_, want) = self.attached.get(&stream)?;
        let next = self.streams.get(&stream)?.next_seq;
        Some(next.saturating_sub(*want))
    }

    /// Number of events in the ring.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the ring holds no event.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(ring: &mut Ring, stream: u64) -> u64 {
        ring.push(stream, None, |seq| Bytes::from(format!("{stream}-{seq}")))
            .unwrap_or(u64::MAX)
    }

    #[test]
    fn full_ring_evicts_oldest_event_of_any_stream() {
        let mut ring = Ring::new(3);
        let a = ring.open_stream();
        let b = ring.open_stream();
        push(&mut ring, a);
        push(&mut ring, b);
        push(&mut ring, a);
        push(&mut ring, b);
        assert_eq!(ring.len(), 3);
        assert!(!ring.retains(a, 0));
        assert!(ring.retains(b, 0));
        assert!(ring.retains(a, 1));
        assert_eq!(ring.stream(a).map(|s| s.first_retained), Some(1));
    }

    #[test]
    fn reader_behind_first_retained_gets_the_lost_range() {
        let mut ring = Ring::new(2);
        let a = ring.open_stream();
        for _ in 0..5 {
            push(&mut ring, a);
        }
        match ring.next_after(a, Some(0), 10) {
            Next::Lost { from, to } => assert_eq!((from, to), (1, 2)),
            other => panic!("expected loss, got {other:?}"),
        }
        match ring.next_after(a, Some(2), 10) {
            Next::Events(ev) => assert_eq!(ev.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]),
            other => panic!("expected events, got {other:?}"),
        }
    }

    #[test]
    fn reader_at_the_end_waits_until_finished() {
        let mut ring = Ring::new(4);
        let a = ring.open_stream();
        push(&mut ring, a);
        assert!(matches!(ring.next_after(a, Some(0), 1), Next::Wait));
        ring.finish(a);
        assert!(matches!(ring.next_after(a, Some(0), 1), Next::Finished));
        assert!(matches!(ring.next_after(99, None, 1), Next::Unknown));
    }

    #[test]
    fn backlog_counts_events_an_attached_reader_has_not_taken() {
        let mut ring = Ring::new(8);
        let a = ring.open_stream();
        assert_eq!(ring.backlog(a), None);
        let r = ring.attach(a, 0);
        push(&mut ring, a);
        push(&mut ring, a);
        assert_eq!(ring.backlog(a), Some(2));
        ring.advance(a, r, 2);
        assert_eq!(ring.backlog(a), Some(0));
        let newer = ring.attach(a, 1);
        ring.detach(a, r);
        assert_eq!(
            ring.backlog(a),
            Some(1),
            "a replaced reader cannot detach the new one"
        );
        ring.detach(a, newer);
        assert_eq!(ring.backlog(a), None);
    }

    #[test]
    fn detaching_sheds_oldest_events_down_to_the_byte_budget() {
        let mut ring = Ring::with_budget(64, Some(10));
        let stream = ring.open_stream();
        for n in [4usize, 4, 8] {
            ring.push(stream, None, |_| Bytes::from(vec![b'x'; n]));
        }
        let reader = ring.attach(stream, 3);
        assert_eq!(ring.len(), 3, "nothing is shed while a reader is attached");
        ring.detach(stream, reader);
        // 16 bytes > 10: the two 4-byte events go, the 8-byte one fits.
        assert_eq!(ring.len(), 1);
        assert!(!ring.retains(stream, 1));
        assert!(ring.retains(stream, 2));
    }
}
