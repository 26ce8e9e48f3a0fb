//! Latency recording without coordinated omission and without contention.
//!
//! Invariants:
//! - Every latency is recorded in microseconds, 3 significant digits, saturating at one hour.
//! - Under an open-loop rate, a call's latencies are measured from its *intended* start (the
//!   [`Pacer`]'s schedule), not from when the client managed to send it: a stall delays every
//!   call scheduled behind it, and those delays are recorded (wrk2's correction). In closed
//!   loop the intended start is the actual start.
//! - Time to first event skips priming events (an `id` with empty `data`, as MCP servers send
//!   before the answer): they say the stream is open, not that the answer started.
//! - Each session task owns its [`Histograms`]; they are merged once at the end, so recording
//!   never takes a lock.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use tokio::time::Instant;

pub use crate::report::names::{
    CALL, FIRST_EVENT, INTER_EVENT, LAST_EVENT, MAX_GAP, NAMES, RECOVERY, RESUME, STREAM_INTERVAL,
    events_per_s,
};

const MAX_US: u64 = 3_600_000_000;

/// A fresh µs histogram (3 significant digits; values are clamped to 1 µs .. 1 h by
/// [`Histograms::record`]). It auto-resizes, so it only takes the memory its largest value
/// needs: a task's four histograms stay small, which matters at thousands of sessions.
pub fn new_histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)]
    Histogram::new(3).expect("3 significant digits are a valid precision")
}

/// The four named histograms of one task (or of a whole run after merging).
#[derive(Debug, Clone)]
pub struct Histograms {
    map: BTreeMap<&'static str, Histogram<u64>>,
    /// Where each sample is also noted by the second it was recorded in, if anywhere.
    series: Option<super::series::Recorder>,
}

impl Default for Histograms {
    fn default() -> Self {
        Histograms {
            map: NAMES.iter().map(|&n| (n, new_histogram())).collect(),
            series: None,
        }
    }
}

impl Histograms {
    /// Histograms of exactly these names (e.g. the LLM metrics, `report::names::LLM_NAMES`).
    pub fn with_names(names: &[&'static str]) -> Self {
        Histograms {
            map: names.iter().map(|&n| (n, new_histogram())).collect(),
            series: None,
        }
    }

    /// Also notes every later sample in `recorder`'s per-second series.
    pub fn attach(&mut self, recorder: super::series::Recorder) {
        self.series = Some(recorder);
    }

    /// Records `d` in histogram `name` (µs, saturating).
    pub fn record(&mut self, name: &'static str, d: Duration) {
        let us = u64::try_from(d.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_US);
        if let Some(h) = self.map.get_mut(name) {
            // `record` grows the auto-resizing histogram; `saturating_record` would clamp.
            if h.record(us).is_err() {
                h.saturating_record(us);
            }
            if let Some(series) = self.series.as_mut() {
                series.record(name, us);
            }
        }
    }

    /// Adds every histogram of `other` into `self`.
    pub fn merge(&mut self, other: &Histograms) {
        for (name, h) in &other.map {
            let mine = self.map.entry(name).or_insert_with(new_histogram);
            // Same bounds on both sides; an error could only come from mismatched bounds.
            if mine.add(h).is_err() {
                for v in h.iter_recorded() {
                    mine.saturating_record_n(v.value_iterated_to(), v.count_at_value());
                }
            }
        }
    }

    /// The histograms by name.
    pub fn into_map(self) -> BTreeMap<&'static str, Histogram<u64>> {
        self.map
    }
}

/// The open-loop schedule of one session: call k is intended at `start + k * interval`.
#[derive(Debug, Clone)]
pub struct Pacer {
    next: Instant,
    interval: Duration,
}

impl Pacer {
    /// A schedule of `rate` calls/s shared by `sessions` sessions; session `index` starts
    /// `index / rate` seconds after `start`, so the sessions interleave evenly.
    pub fn new(start: Instant, rate: f64, sessions: usize, index: usize) -> Pacer {
        let rate = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            1.0
        };
        let interval = Duration::from_secs_f64(sessions.max(1) as f64 / rate);
        let offset = Duration::from_secs_f64(index as f64 / rate);
        Pacer {
            next: start + offset,
            interval,
        }
    }

    /// The intended start of the next call (then advances the schedule by one interval).
    /// The schedule never slips: if the client is late, the intended time stays in the past
    /// and the lateness becomes part of the recorded latency.
    pub fn next_intended(&mut self) -> Instant {
        let t = self.next;
        self.next += self.interval;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One session at 100 calls/s for 10 s; every call takes 1 ms, except that the server
    /// stalls for 250 ms once. Measured from the intended start, the calls queued behind the
    /// stall carry its delay (≈ 25 calls, 2.5 % of 1,000): p99 must reflect it. Measured from
    /// the actual send, only the stalled call itself is slow, so p99 stays at the service time.
    #[test]
    fn stall_under_fixed_rate_raises_corrected_p99() {
        let start = Instant::now();
        let mut pacer = Pacer::new(start, 100.0, 1, 0);
        let mut corrected = Histograms::default();
        let mut uncorrected = Histograms::default();
        let mut now = start;
        for k in 0..1000 {
            let intended = pacer.next_intended();
            let sent = now.max(intended);
            let service = if k == 300 {
                Duration::from_millis(250)
            } else {
                Duration::from_millis(1)
            };
            let done = sent + service;
            corrected.record(CALL, done - intended);
            uncorrected.record(CALL, done - sent);
            now = done;
        }
        let c = corrected.into_map();
        let u = uncorrected.into_map();
        let (c, u) = (&c[CALL], &u[CALL]);
        assert_eq!(c.len(), 1000);
        // Uncorrected: 999 calls at 1 ms, one at 250 ms: p99 is the service time.
        assert!(
            u.value_at_quantile(0.99) < 1_100,
            "uncorrected p99 {}",
            u.value_at_quantile(0.99)
        );
        // Corrected: 25 calls waited 241, 231, …, 1 ms behind the stall: p99 ≈ 20+ ms.
        assert!(
            c.value_at_quantile(0.99) > 20_000,
            "corrected p99 {}",
            c.value_at_quantile(0.99)
        );
        assert_eq!(c.max(), u.max());
        assert!(c.mean() > u.mean());
    }

    #[test]
    fn pacer_interleaves_sessions_at_the_total_rate() {
        let start = Instant::now();
        let mut a = Pacer::new(start, 10.0, 2, 0);
        let mut b = Pacer::new(start, 10.0, 2, 1);
        assert_eq!(a.next_intended() - start, Duration::ZERO);
        assert_eq!(b.next_intended() - start, Duration::from_millis(100));
        assert_eq!(a.next_intended() - start, Duration::from_millis(200));
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Histograms::default();
        let mut b = Histograms::default();
        a.record(RESUME, Duration::from_millis(1));
        b.record(RESUME, Duration::from_millis(2));
        a.merge(&b);
        assert_eq!(a.into_map()[RESUME].len(), 2);
    }
}
