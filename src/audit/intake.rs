//! The audit's intake: a bounded queue between the data path and the ledger.
//!
//! It exists so that the relay never waits on the audit. Invariants:
//! - `push` takes one short lock (a queue push) and never blocks on the ledger or on I/O; when
//!   the queue holds `limit` observations the new one is dropped and counted ([`Intake::dropped`]),
//!   never waited for.
//! - Each observation keeps its receipt time (taken in `push`), so the ledger's histograms and
//!   `at_ms` do not depend on when the worker runs.
//! - Observations reach the ledger in push order: a drain takes the whole queue while holding
//!   the ledger, so two drains (the worker and a query) cannot interleave.
//! - While `paused`, only queries drain (a slow consumer, as tests and operators make one).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use crate::wire::Observation;

/// Observations waiting for the ledger by default; beyond this they are dropped and counted.
pub const QUEUE_LIMIT: usize = 65_536;

/// The bounded queue of observations with their receipt times.
#[derive(Debug)]
pub struct Intake {
    queue: Mutex<VecDeque<(Instant, Observation)>>,
    limit: usize,
    dropped: AtomicU64,
    paused: AtomicBool,
    pub(super) wake: Arc<tokio::sync::Notify>,
    pub(super) worker: AtomicBool,
}

impl Intake {
    /// An empty intake holding at most `limit` observations.
    pub fn new(limit: usize) -> Self {
        Intake {
            queue: Mutex::new(VecDeque::new()),
            limit: limit.max(1),
            dropped: AtomicU64::new(0),
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

    /// Takes everything queued, in order.
    pub fn take(&self) -> VecDeque<(Instant, Observation)> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()))
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
