//! Counters of one proxy, for logs and `/metrics`.
//!
//! Counters are relaxed atomics updated at most once per chunk; the residence-time histogram is
//! fed in batches (a pump buffers up to [`ResidenceBatch::CAP`] samples or one second, then takes
//! the lock once), so the data path never contends on a lock per chunk. `bytes_buffered` is a
//! gauge of bytes the proxy holds (read buffers in flight, timed queues, and the pipes of the
//! zero-copy path); it returns to 0 when no data is in flight.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

use crate::vocab::CutAction;
use crate::vocab::Direction;

/// Largest residence time the histogram resolves (µs); larger samples saturate.
const RESIDENCE_MAX_US: u64 = 60_000_000;

/// Live counters of one proxy.
#[derive(Debug)]
pub struct Stats {
    bytes_upstream: AtomicU64,
    bytes_downstream: AtomicU64,
    connections_open: AtomicU64,
    connections_total: AtomicU64,
    connections_refused: AtomicU64,
    connections_over_limit: AtomicU64,
    received_upstream: AtomicU64,
    received_downstream: AtomicU64,
    bytes_buffered: AtomicU64,
    bytes_spliced: AtomicU64,
    cuts: [AtomicU64; 3],
    activations: Mutex<BTreeMap<&'static str, u64>>,
    residence: Mutex<Histogram<u64>>,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone)]
pub struct StatsSnapshot {
    /// Bytes delivered client→server.
    pub bytes_upstream: u64,
    /// Bytes delivered server→client.
    pub bytes_downstream: u64,
    /// Connections being served now.
    pub connections_open: u64,
    /// Connections accepted and served since start.
    pub connections_total: u64,
    /// Connections closed at once (disabled, outage, upstream unreachable, over a limit).
    pub connections_refused: u64,
    /// Of those, connections refused because the proxy served `max_connections` already or the
    /// process ran out of file descriptors.
    pub connections_over_limit: u64,
    /// Bytes read from the client (before faults), Toxiproxy's `received` upstream.
    pub received_upstream: u64,
    /// Bytes read from the server (before faults), Toxiproxy's `received` downstream.
    pub received_downstream: u64,
    /// Bytes held in user space now.
    pub bytes_buffered: u64,
    /// Bytes (both directions) relayed zero-copy with splice(2), a subset of the delivered ones.
    pub bytes_spliced: u64,
    /// Cuts by action (`reset`, `fin`, `clean-end`).
    pub cuts: Vec<(CutAction, u64)>,
    /// Fault instances that fired, by kind.
    pub activations: BTreeMap<&'static str, u64>,
    /// Residence time (µs) of bytes no fault delayed.
    pub residence_us: Histogram<u64>,
}

fn cut_index(action: CutAction) -> usize {
    match action {
        CutAction::Reset => 0,
        CutAction::Fin => 1,
        CutAction::CleanEnd => 2,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// Zeroed counters.
    pub fn new() -> Self {
        // Constant, valid bounds: construction cannot fail.
        let residence = Histogram::new_with_bounds(1, RESIDENCE_MAX_US, 3)
            .expect("constant histogram bounds are valid");
        Stats {
            bytes_upstream: AtomicU64::new(0),
            bytes_downstream: AtomicU64::new(0),
            connections_open: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            connections_refused: AtomicU64::new(0),
            connections_over_limit: AtomicU64::new(0),
            received_upstream: AtomicU64::new(0),
            received_downstream: AtomicU64::new(0),
            bytes_buffered: AtomicU64::new(0),
            bytes_spliced: AtomicU64::new(0),
            cuts: Default::default(),
            activations: Mutex::new(BTreeMap::new()),
            residence: Mutex::new(residence),
        }
    }

    /// Bytes held in user space now (the gauge the slow-reader bound is stated on).
    pub fn bytes_buffered(&self) -> u64 {
        self.bytes_buffered.load(Ordering::Relaxed)
    }

    /// Bytes relayed zero-copy (splice) so far, both directions.
    pub fn bytes_spliced(&self) -> u64 {
        self.bytes_spliced.load(Ordering::Relaxed)
    }

    /// Connections being served now.
    pub fn connections_open(&self) -> u64 {
        self.connections_open.load(Ordering::Relaxed)
    }

    /// A consistent-enough copy of every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            bytes_upstream: self.bytes_upstream.load(Ordering::Relaxed),
            bytes_downstream: self.bytes_downstream.load(Ordering::Relaxed),
            connections_open: self.connections_open.load(Ordering::Relaxed),
            connections_total: self.connections_total.load(Ordering::Relaxed),
            connections_refused: self.connections_refused.load(Ordering::Relaxed),
            connections_over_limit: self.connections_over_limit.load(Ordering::Relaxed),
            received_upstream: self.received_upstream.load(Ordering::Relaxed),
            received_downstream: self.received_downstream.load(Ordering::Relaxed),
            bytes_buffered: self.bytes_buffered.load(Ordering::Relaxed),
            bytes_spliced: self.bytes_spliced.load(Ordering::Relaxed),
            cuts: [CutAction::Reset, CutAction::Fin, CutAction::CleanEnd]
                .into_iter()
                .map(|a| (a, self.cuts[cut_index(a)].load(Ordering::Relaxed)))
                .collect(),
            activations: lock(&self.activations).clone(),
            residence_us: lock(&self.residence).clone(),
        }
    }

    pub(crate) fn delivered(&self, dir: Direction, n: usize) {
        let c = match dir {
            Direction::Upstream => &self.bytes_upstream,
            Direction::Downstream => &self.bytes_downstream,
        };
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes read from the source of `dir`, before any fault (one add per chunk).
    pub(crate) fn received(&self, dir: Direction, n: u64) {
        let c = match dir {
            Direction::Upstream => &self.received_upstream,
            Direction::Downstream => &self.received_downstream,
        };
        c.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn spliced(&self, n: usize) {
        self.bytes_spliced.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn buffer_add(&self, n: usize) {
        self.bytes_buffered.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn buffer_sub(&self, n: usize) {
        self.bytes_buffered.fetch_sub(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn conn_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        self.connections_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn conn_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection refused over a limit (also counted as refused); returns how many so far.
    pub(crate) fn over_limit(&self) -> u64 {
        self.refused();
        self.connections_over_limit.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn cut(&self, action: CutAction) {
        self.cuts[cut_index(action)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn activated(&self, kind: &'static str) {
        *lock(&self.activations).entry(kind).or_insert(0) += 1;
    }

    fn merge_residence(&self, samples: &[u32]) {
        let mut h = lock(&self.residence);
        for &s in samples {
            h.saturating_record(u64::from(s).max(1));
        }
    }
}

/// A pump's pending residence samples, flushed to [`Stats`] in batches.
#[derive(Debug)]
pub(crate) struct ResidenceBatch {
    samples: Vec<u32>,
    since: Option<Instant>,
}

impl ResidenceBatch {
    /// Samples buffered before one lock is taken.
    pub(crate) const CAP: usize = 64;

    pub(crate) fn new() -> Self {
        ResidenceBatch {
            samples: Vec::with_capacity(Self::CAP),
            since: None,
        }
    }

    /// Records one residence time; flushes when full or a second old.
    pub(crate) fn record(&mut self, stats: &Stats, took: Duration, now: Instant) {
        let us = u32::try_from(took.as_micros()).unwrap_or(u32::MAX);
        self.samples.push(us);
        let since = *self.since.get_or_insert(now);
        if self.samples.len() >= Self::CAP || now.duration_since(since) >= Duration::from_secs(1) {
            self.flush(stats);
        }
    }

    pub(crate) fn flush(&mut self, stats: &Stats) {
        if !self.samples.is_empty() {
            stats.merge_residence(&self.samples);
            self.samples.clear();
        }
        self.since = None;
    }
}
