//! The write queue of one destination of the stream relay: frames (or slices of them) with the
//! earliest time each may leave, frames the relay injects, coalesced flow-control credit, and
//! the end (EOF or a connection cut).
//!
//! Why one queue per destination with several producers: the reader of the other direction
//! injects frames here (`RST_STREAM(CANCEL)` and `WINDOW_UPDATE` to the server when a stream
//! is cut downstream), and they must interleave with the forwarded frames at frame
//! boundaries only; one writer per destination keeps that.
//!
//! Invariants: items leave in the order they were pushed, none before its time; the bytes of
//! forwarded frames held are at most `cap` plus one item (the reader waits for room:
//! backpressure); injected frames are small and bounded in number by the streams cut and the
//! faults; credit is one counter, written as one connection-level `WINDOW_UPDATE` (split at
//! 2^31 - 1) before the next item.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::proxy::Stats;
use crate::vocab::{CutAction, Direction};

/// One queued item.
#[derive(Debug)]
pub(crate) enum Out {
    /// Bytes to write no earlier than `at`; `counted` ones take room in the queue; `release`:
    /// after writing them, the observer hears that `dir`'s bytes before this raw offset left.
    Bytes {
        bytes: Bytes,
        at: Instant,
        counted: bool,
        release: Option<(Direction, u64)>,
    },
    /// Shut the destination's write side down (half-close), no earlier than `at`.
    Eof { at: Instant },
    /// End the connection with `action` once every earlier item is written, no earlier than
    /// `at`.
    Cut { action: CutAction, at: Instant },
    /// Before a cut toward the server: a `PING` ([`DRAIN_PING`]) after every earlier frame, and
    /// a wait (at most [`DRAIN_MAX`]) for its acknowledgement, so that the server has read every
    /// request the relay forwarded before the connection closes.
    Drain,
}

/// The payload of the relay's drain `PING` (see [`Out::Drain`]).
pub(crate) const DRAIN_PING: [u8; 8] = *b"tl-drain";

/// Longest wait for the server's acknowledgement of the drain `PING`.
pub(crate) const DRAIN_MAX: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Debug, Default)]
struct Inner {
    items: VecDeque<Out>,
    counted: usize,
    credit: u64,
    /// A `Cut` or `Eof` was pushed: later pushes are dropped.
    ended: bool,
}

/// One destination's queue.
pub(crate) struct OutQueue<'a> {
    inner: Mutex<Inner>,
    ready: Notify,
    room: Notify,
    cap: usize,
    /// The proxy's stats, whose `bytes_buffered` gauge counts the forwarded bytes held.
    stats: Option<&'a Stats>,
}

/// What the writer takes next.
pub(crate) enum Next {
    /// Write this connection-level credit first.
    Credit(u32),
    /// An item.
    Item(Out),
}

impl<'a> OutQueue<'a> {
    /// An empty queue holding at most `cap` bytes of forwarded frames (plus one item).
    pub(crate) fn new(cap: usize) -> Self {
        OutQueue {
            inner: Mutex::new(Inner::default()),
            ready: Notify::new(),
            room: Notify::new(),
            cap,
            stats: None,
        }
    }

    /// [`OutQueue::new`], counting what it holds in `stats`' `bytes_buffered` gauge.
    pub(crate) fn with_stats(cap: usize, stats: &'a Stats) -> Self {
        let mut q = OutQueue::new(cap);
        q.stats = Some(stats);
        q
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues an item (dropped once the queue has ended); false if it was dropped.
    pub(crate) fn push(&self, out: Out) -> bool {
        let mut q = self.lock();
        if q.ended {
            return false;
        }
        match &out {
            Out::Bytes {
                bytes,
                counted: true,
                ..
            } => {
                q.counted += bytes.len();
                if let Some(s) = self.stats {
                    s.buffer_add(bytes.len());
                }
            }
            Out::Eof { .. } | Out::Cut { .. } => q.ended = true,
            Out::Bytes { .. } | Out::Drain => {}
        }
        q.items.push_back(out);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// Owes the destination `n` more bytes of connection-level flow-control credit.
    pub(crate) fn credit(&self, n: u32) {
        if n == 0 {
            return;
        }
        let mut q = self.lock();
        if q.ended {
            return;
        }
        q.credit += u64::from(n);
        drop(q);
        self.ready.notify_one();
    }

    /// Waits until forwarded bytes held are under the cap.
    pub(crate) async fn room(&self) {
        loop {
            let notified = self.room.notified();
            if self.lock().counted < self.cap {
                return;
            }
            notified.await;
        }
    }

    /// The next thing to write (waits while there is none).
    pub(crate) async fn next(&self) -> Next {
        loop {
            let notified = self.ready.notified();
            if let Some(next) = self.try_next() {
                return next;
            }
            notified.await;
        }
    }

    /// The next thing to write if there is one now.
    pub(crate) fn try_next(&self) -> Option<Next> {
        let mut q = self.lock();
        if q.credit > 0 {
            let n = q.credit.min(0x7fff_ffff) as u32;
            q.credit -= u64::from(n);
            return Some(Next::Credit(n));
        }
        q.items.pop_front().map(Next::Item)
    }

    /// `n` counted bytes were written: room for the reader.
    pub(crate) fn written(&self, n: usize) {
        let mut q = self.lock();
        let n = n.min(q.counted);
        q.counted -= n;
        drop(q);
        if let Some(s) = self.stats {
            s.buffer_sub(n);
        }
        self.room.notify_one();
    }

    /// Forwarded bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.lock().counted
    }
}

impl Drop for OutQueue<'_> {
    /// What was never written leaves the gauge with the connection.
    fn drop(&mut self) {
        let held = self.lock().counted;
        if let Some(s) = self.stats {
            s.buffer_sub(held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(b: &'static [u8], counted: bool) -> Out {
        Out::Bytes {
            bytes: Bytes::from_static(b),
            at: Instant::now(),
            counted,
            release: None,
        }
    }

    #[tokio::test]
    async fn credit_is_coalesced_and_written_before_the_next_item() {
        let q = OutQueue::new(8);
        q.push(bytes(b"abc", true));
        q.credit(10);
        q.credit(5);
        assert!(matches!(q.next().await, Next::Credit(15)));
        assert!(matches!(q.next().await, Next::Item(Out::Bytes { .. })));
    }

    #[tokio::test]
    async fn the_reader_waits_for_room_and_nothing_is_queued_after_the_end() {
        let q = OutQueue::new(4);
        q.push(bytes(b"abcd", true));
        q.push(bytes(b"injected", false));
        assert_eq!(q.held(), 4);
        let mut room = std::pin::pin!(q.room());
        assert!(futures_util::poll!(room.as_mut()).is_pending());
        q.written(4);
        room.await;
        q.push(Out::Cut {
            action: CutAction::Reset,
            at: Instant::now(),
        });
        q.push(bytes(b"late", true));
        q.credit(3);
        let mut seen = 0;
        while let Some(Next::Item(_)) = futures_util::FutureExt::now_or_never(q.next()) {
            seen += 1;
        }
        assert_eq!(seen, 3, "abcd, injected, cut; nothing after the cut");
    }
}
