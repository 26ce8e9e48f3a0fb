//! Read buffers lent to the pumps by their proxy, and given back while a direction waits.
//!
//! Why: a direction needs its read buffer only while bytes pass through it. Holding
//! `buffer_size` per direction for a connection's whole life makes memory follow the number of
//! *open* connections (10,000 SSE streams × 2 directions × 64 KiB ≈ 1.3 GB), although most
//! directions are idle most of the time (a request side after its request) and the machine
//! moves only so many bytes at once. So:
//! - a direction on a TCP socket takes a buffer once its socket is readable and gives it back
//!   after a read that did not fill it (its source is drained for now); an idle connection
//!   holds no read buffer at all;
//! - a buffer is `buffer_size` while few directions hold one, and smaller when many do: its
//!   size is the budget divided by the directions holding one, and only [`MIN_READ`] (or
//!   `buffer_size`, if smaller) when the buffers already lent fill the budget. So the bytes
//!   lent stay within `budget + holders × MIN_READ` (up to one share more for takes that race
//!   on another core). A held buffer more than twice the current share is given back after its
//!   chunk, so the sizes follow the number of busy directions within one read each;
//! - up to [`SPARE`] full-size buffers are kept for reuse, so a request/response connection
//!   that takes and gives a buffer per message costs no allocation and no zeroing (buffers are
//!   read into as spare capacity, never initialised).
//!
//! Invariant: `held` is the number of buffers lent and not given back (every pump gives its
//! buffer back when it is dropped), and a lent buffer belongs to one pump only.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The smallest buffer lent while the budget is shared by many directions.
pub const MIN_READ: usize = 4 * 1024;

/// Full-size buffers kept for reuse.
pub const SPARE: usize = 32;

/// A reading of a proxy's read buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadBufferGauge {
    /// Directions holding a read buffer now.
    pub held: usize,
    /// Their capacity, in bytes.
    pub bytes: usize,
    /// The most bytes lent at once since the proxy started.
    pub peak_bytes: usize,
}

/// One proxy's lender of read buffers.
#[derive(Debug)]
pub(crate) struct ReadBufs {
    /// `buffer_size`: the largest buffer (and the largest chunk the faults see).
    max: usize,
    /// Bytes the lent buffers may add up to before new ones shrink.
    budget: usize,
    held: AtomicUsize,
    /// Capacity lent now, and the most ever lent at once.
    bytes: AtomicUsize,
    peak: AtomicUsize,
    spare: Mutex<Vec<Vec<u8>>>,
}

impl ReadBufs {
    pub(crate) fn new(max: usize, budget: usize) -> Self {
        ReadBufs {
            max: max.max(1),
            budget,
            held: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// The size of a buffer lent while `holders` directions (this one included) hold one.
    fn size_for(&self, holders: usize) -> usize {
        (self.budget / holders.max(1)).clamp(self.floor(), self.max)
    }

    fn floor(&self) -> usize {
        MIN_READ.min(self.max)
    }

    /// Lends an empty buffer (capacity only) of the size the current load allows.
    pub(crate) fn take(&self) -> Vec<u8> {
        let holders = self.held.fetch_add(1, Ordering::Relaxed) + 1;
        let mut size = self.size_for(holders);
        if self.bytes.load(Ordering::Relaxed) + size > self.budget {
            size = self.floor();
        }
        let reused = if size == self.max {
            self.spares().pop()
        } else {
            None
        };
        let buf = reused.unwrap_or_else(|| Vec::with_capacity(size));
        // Counted by capacity, as `give` subtracts it (`with_capacity` may grant more).
        let lent = self.bytes.fetch_add(buf.capacity(), Ordering::Relaxed) + buf.capacity();
        self.peak.fetch_max(lent, Ordering::Relaxed);
        buf
    }

    /// Takes a buffer back; keeps it for reuse if it is full-size and the spares are not full.
    pub(crate) fn give(&self, mut buf: Vec<u8>) {
        self.held.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(buf.capacity(), Ordering::Relaxed);
        if buf.capacity() == self.max {
            buf.clear();
            let mut spare = self.spares();
            if spare.len() < SPARE {
                spare.push(buf);
            }
        }
    }

    /// Whether a held buffer of `capacity` is more than twice what a holder gets now (so it
    /// should be given back and taken again smaller).
    pub(crate) fn oversized(&self, capacity: usize) -> bool {
        capacity > 2 * self.size_for(self.held.load(Ordering::Relaxed))
    }

    /// Buffers lent now, their bytes, and the most bytes lent at once.
    pub(crate) fn gauge(&self) -> ReadBufferGauge {
        ReadBufferGauge {
            held: self.held.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            peak_bytes: self.peak.load(Ordering::Relaxed),
        }
    }

    fn spares(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        self.spare
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_holders_get_full_buffers_and_many_share_the_budget() {
        let bufs = ReadBufs::new(64 * 1024, 1024 * 1024);
        let first = bufs.take();
        assert_eq!(first.capacity(), 64 * 1024);
        let mut lent: Vec<_> = (0..255).map(|_| bufs.take()).collect();
        let g = bufs.gauge();
        assert_eq!(g.held, 256);
        // 1 MiB over 256 holders: 4 KiB each (the floor).
        assert_eq!(lent.last().map(Vec::capacity), Some(4 * 1024));
        assert!(bufs.oversized(first.capacity()));
        // What was lent stays within the budget plus one floor per holder.
        assert!(g.bytes <= 1024 * 1024 + 256 * MIN_READ, "{g:?}");
        for b in lent.drain(..) {
            bufs.give(b);
        }
        assert!(!bufs.oversized(first.capacity()));
        bufs.give(first);
        assert_eq!((bufs.gauge().held, bufs.gauge().bytes), (0, 0));
    }

    #[test]
    fn a_spent_budget_lends_the_floor_until_buffers_come_back() {
        let bufs = ReadBufs::new(64 * 1024, 128 * 1024);
        let a = bufs.take();
        let b = bufs.take();
        assert_eq!((a.capacity(), b.capacity()), (64 * 1024, 64 * 1024));
        // 128 KiB lent: a third holder gets the floor, not its share of 42 KiB.
        let c = bufs.take();
        assert_eq!(c.capacity(), MIN_READ);
        bufs.give(a);
        bufs.give(b);
        bufs.give(c);
        assert_eq!(bufs.gauge().peak_bytes, 128 * 1024 + MIN_READ);
    }

    #[test]
    fn the_floor_never_exceeds_the_configured_buffer_size() {
        let bufs = ReadBufs::new(1024, 0);
        assert_eq!(bufs.take().capacity(), 1024);
    }

    #[test]
    fn given_back_full_size_buffers_are_reused_up_to_the_spare_count() {
        let bufs = ReadBufs::new(8192, 1 << 30);
        let lent: Vec<_> = (0..SPARE + 5).map(|_| bufs.take()).collect();
        let ptrs: Vec<_> = lent.iter().map(|b| b.as_ptr()).collect();
        for b in lent {
            bufs.give(b);
        }
        assert_eq!(bufs.spares().len(), SPARE);
        let again = bufs.take();
        assert!(
            ptrs.contains(&again.as_ptr()),
            "a spare buffer is lent again"
        );
        assert!(again.is_empty());
        bufs.give(again);
    }
}
