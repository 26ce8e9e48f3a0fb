//! The audit's intake: a bounded queue between the data path and the ledger.
//!
//! It exists so that the relay never waits on the audit. Invariants:
//! - `push` takes one short lock (a queue push) and never blocks on the ledger or on I/O; when
//!   the queue holds `limit` observations the new one is dropped and counted ([`Intake::dropped`]),
//!   never waited for. [`Intake::push_all`] does the same for the observations one delivery
//!   released, under one lock, with one wake.
//! - Each observation keeps its receipt time (taken by the caller of `push`, once per batch for
//!   `push_all`: a batch's observations were delivered by one write), so the ledger's histograms
//!   and `at_ms` do not depend on when the worker runs.
//! - Observations reach the ledger in push order: a drain takes the whole queue while holding
//!   the ledger, so two drains (the worker and a query) cannot interleave.
//! - While `paused`, only queries drain (a slow consumer, as tests and operators make one).
//! - The connection of every dropped observation is counted ([`Intake::take_holes`]): the
//!   audit reports the streams that lost observations as not judged (`holes`), never judges
//!   them from what was left.
//! - A drained batch's storage is reused for the next queue when it holds at most
//!   [`SPARE_CAP`] observations' room (an idle auditor keeps at most that, never a burst's).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use tokio::time::Instant;

use crate::wire::Observation;

/// Observations waiting for the ledger by default (`AuditConfig::queue`'s default); beyond
/// this they are dropped and counted.
pub const QUEUE_LIMIT: usize = 65_536;

/// Capacity of an emptied batch kept for reuse, at most (observations).
pub const SPARE_CAP: usize = 2048;

/// The bounded queue of observations with their receipt times.
#[derive(Debug)]
pub struct Intake {
    queue: Mutex<VecDeque<(Instant, Observation)>>,
    /// An emptied batch kept for the next one (see [`Intake::recycle`]), so that a busy stream's
    /// queue does not regrow from nothing after each drain.
    spare: Mutex<VecDeque<(Instant, Observation)>>,
    limit: usize,
    dropped: AtomicU64,
    /// Connection → observations of it dropped since the last [`Intake::take_holes`].
    holes: Mutex<FxHashMap<u64, u64>>,
    paused: AtomicBool,
    pub(super) wake: Arc<tokio::sync::Notify>,
    pub(super) worker: AtomicBool,
}

impl Intake {
    /// An empty intake holding at most `limit` observations.
    pub fn new(limit: usize) -> Self {
        Intake {
            queue: Mutex::new(VecDeque::new()),
            spare: Mutex::new(VecDeque::new()),
            limit: limit.max(1),
            dropped: AtomicU64::new(0),
            holes: Mutex::new(FxHashMap::default()),
            paused: AtomicBool::new(false),
            wake: Arc::new(tokio::sync::Notify::new()),
            worker: AtomicBool::new(false),
        }
    }

    /// Queues `obs` received at `now`; false (and counted) when the queue is full.
    pub fn push(&self, now: Instant, obs: Observation) -> bool {
        let was_empty = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.len() >= self.limit {
                drop(q);
                self.dropped.fetch_add(1, Ordering::Relaxed);
                self.note_holes([obs.conn()]);
                return false;
            }
            q.push_back((now, obs));
            q.len() == 1
        };
        if was_empty && !self.paused.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
        true
    }

    /// Queues every observation of `batch` (one delivery's, in order), all received at `now`,
    /// under one lock and with at most one wake; those beyond the limit are dropped and counted.
    /// Takes every item. Returns how many were queued.
    pub fn push_all(&self, now: Instant, batch: &mut dyn Iterator<Item = Observation>) -> usize {
        let (queued, was_empty, dropped) = {
            let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            let was_empty = q.is_empty();
            let room = self.limit.saturating_sub(q.len());
            // A plain loop, not `extend`: a batch is one or two observations, and `extend`
            // asks the (dynamic) iterator chain for its size before each of them.
            let mut queued = 0;
            while queued < room {
                let Some(obs) = batch.next() else {
                    break;
                };
                q.push_back((now, obs));
                queued += 1;
            }
            drop(q);
            // The rest of the batch, beyond the limit: taken and counted (with its
            // connections), outside the lock.
            let mut dropped = 0;
            let rest = batch.map(|obs| {
                dropped += 1;
                obs.conn()
            });
            self.note_holes(rest);
            (queued, was_empty, dropped)
        };
        if dropped > 0 {
            self.dropped.fetch_add(dropped as u64, Ordering::Relaxed);
        }
        if was_empty && queued > 0 && !self.paused.load(Ordering::Relaxed) {
            self.wake.notify_one();
        }
        queued
    }

    /// Takes everything queued, in order (the queue goes on in the recycled spare, if any).
    pub fn take(&self) -> VecDeque<(Instant, Observation)> {
        let spare = std::mem::take(&mut *self.spare.lock().unwrap_or_else(|p| p.into_inner()));
        std::mem::replace(
            &mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()),
            spare,
        )
    }

    /// Hands back a batch from [`Intake::take`] once applied: emptied, it becomes the next
    /// queue's storage when its capacity is at most [`SPARE_CAP`] (a burst's larger one is
    /// freed, so an idle auditor keeps at most that much).
    pub fn recycle(&self, mut batch: VecDeque<(Instant, Observation)>) {
        if batch.capacity() <= SPARE_CAP {
            batch.clear();
            *self.spare.lock().unwrap_or_else(|p| p.into_inner()) = batch;
        }
    }

    /// Counts the connections of dropped observations (one lock for all of them; none taken
    /// when `conns` is empty).
    fn note_holes(&self, conns: impl IntoIterator<Item = u64>) {
        let mut conns = conns.into_iter().peekable();
        if conns.peek().is_none() {
            return;
        }
        let mut holes = self.holes.lock().unwrap_or_else(|p| p.into_inner());
        for conn in conns {
            *holes.entry(conn).or_insert(0) += 1;
        }
    }

    /// Takes the dropped observations' counts by connection since the last call.
    pub fn take_holes(&self) -> FxHashMap<u64, u64> {
        std::mem::take(&mut *self.holes.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Observations dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Observations waiting.
    pub fn len(&self) -> usize {
        self.queue.lock().map(|q| q.len()).unwrap_or(0)
    }

    /// True if and only if nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops (or resumes) the worker's draining.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
        if !paused {
            self.wake.notify_one();
        }
    }

    /// True while the worker must not drain.
    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end(seq: u64) -> Observation {
        Observation::StreamEnd {
            conn: 1,
            seq,
            clean: true,
        }
    }

    fn seqs(q: &VecDeque<(Instant, Observation)>) -> Vec<u64> {
        q.iter()
            .filter_map(|(_, o)| match o {
                Observation::StreamEnd { seq, .. } => Some(*seq),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_recycled_batch_carries_the_next_queue_in_order() {
        let i = Intake::new(QUEUE_LIMIT);
        let now = Instant::now();
        for s in 0..100 {
            assert!(i.push(now, end(s)));
        }
        let first = i.take();
        assert_eq!(seqs(&first), (0..100).collect::<Vec<_>>());
        i.recycle(first);
        // The queue drained after the recycle starts on the recycled storage.
        assert!(i.take().is_empty());
        for s in 100..103 {
            assert!(i.push(now, end(s)));
        }
        let next = i.take();
        assert_eq!(seqs(&next), [100, 101, 102]);
        assert!(next.capacity() >= 100, "capacity {}", next.capacity());
    }

    #[test]
    fn a_delivery_batch_is_queued_in_order_and_its_excess_taken_and_counted() {
        let i = Intake::new(4);
        let t0 = Instant::now();
        assert!(i.push(t0, end(0)));
        let t1 = t0 + std::time::Duration::from_millis(3);
        let mut taken = 0;
        let mut batch = (1..6).map(end).inspect(|_| taken += 1);
        assert_eq!(i.push_all(t1, &mut batch), 3);
        drop(batch);
        assert_eq!(taken, 5, "every item of the batch is taken");
        assert_eq!(i.dropped(), 2);
        let q = i.take();
        assert_eq!(seqs(&q), [0, 1, 2, 3]);
        let times: Vec<Instant> = q.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, [t0, t1, t1, t1]);
        assert_eq!(i.push_all(t1, &mut std::iter::empty()), 0);
        assert!(i.is_empty());
    }

    #[test]
    fn a_burst_batch_is_freed_not_kept() {
        let i = Intake::new(QUEUE_LIMIT);
        let now = Instant::now();
        for s in 0..(SPARE_CAP as u64 + 1) {
            assert!(i.push(now, end(s)));
        }
        let burst = i.take();
        assert!(burst.capacity() > SPARE_CAP);
        i.recycle(burst);
        assert!(i.take().is_empty());
        assert!(i.push(now, end(0)));
        let next = i.take();
        assert!(next.capacity() <= SPARE_CAP, "capacity {}", next.capacity());
        assert_eq!(seqs(&next), [0]);
    }
}
