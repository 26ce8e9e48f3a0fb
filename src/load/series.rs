//! Latency over time: every recorded latency also lands in the histogram of the second of the
//! run in which it was recorded, so reports can log one interval per second (`report.hlog`)
//! and several agents' logs merge into one timeline.
//!
//! Invariants:
//! - A sample recorded at `t` (time since the run's start) lands in second `floor(t)`; for each
//!   histogram name, the per-second histograms add up to exactly the run's total histogram
//!   (same samples, same precision).
//! - Recording never takes a lock per sample: each session task buffers samples in its
//!   [`Recorder`] and moves them into the shared [`Series`] in batches (and when the recorder is
//!   dropped, so no sample is lost at the end of a task).
//! - Memory grows with the run's length in seconds, not with the number of sessions.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use hdrhistogram::Histogram;
use tokio::time::Instant;

/// Samples a recorder buffers before moving them into the shared series.
const BATCH: usize = 256;

/// Histograms by name for each second of the run (`second → name → histogram`, µs).
pub type PerSecond = BTreeMap<u64, BTreeMap<&'static str, Histogram<u64>>>;

/// An auto-resizing µs histogram (3 significant digits) that only grows as far as its largest
/// value: a second of short calls stays small.
fn small_histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)]
    Histogram::new(3).expect("3 significant digits are a valid precision")
}

/// The shared per-second histograms of one run.
#[derive(Debug, Clone)]
pub struct Series {
    start: Instant,
    seconds: Arc<Mutex<PerSecond>>,
}

impl Series {
    /// An empty series whose second 0 begins at `start`.
    pub fn new(start: Instant) -> Series {
        Series {
            start,
            seconds: Arc::new(Mutex::new(BTreeMap::new())),
        }
    }

    /// A recorder for one task.
    pub fn recorder(&self) -> Recorder {
        Recorder {
            series: self.clone(),
            buffer: Vec::with_capacity(BATCH),
        }
    }

    fn absorb(&self, samples: &mut Vec<(u64, &'static str, u64)>) {
        if samples.is_empty() {
            return;
        }
        let mut seconds = self.seconds.lock().unwrap_or_else(PoisonError::into_inner);
        for (second, name, us) in samples.drain(..) {
            let h = seconds
                .entry(second)
                .or_default()
                .entry(name)
                .or_insert_with(small_histogram);
            // `record` grows the histogram; `saturating_record` would clamp to its current top.
            if h.record(us).is_err() {
                h.saturating_record(us);
            }
        }
    }

    /// The per-second histograms recorded so far (recorders still alive keep their buffers).
    pub fn snapshot(&self) -> PerSecond {
        self.seconds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One task's buffered view of a [`Series`].
#[derive(Debug)]
pub struct Recorder {
    series: Series,
    buffer: Vec<(u64, &'static str, u64)>,
}

impl Clone for Recorder {
    /// A recorder into the same series with an empty buffer.
    fn clone(&self) -> Recorder {
        self.series.recorder()
    }
}

impl Recorder {
    /// Notes `us` in histogram `name` for the current second.
    pub fn record(&mut self, name: &'static str, us: u64) {
        let second = Instant::now()
            .saturating_duration_since(self.series.start)
            .as_secs();
        self.buffer.push((second, name, us));
        if self.buffer.len() >= BATCH {
            self.flush();
        }
    }

    /// Moves the buffered samples into the series.
    pub fn flush(&mut self) {
        self.series.absorb(&mut self.buffer);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn samples_land_in_the_second_they_were_recorded_and_sum_to_the_total() {
        let series = Series::new(Instant::now());
        let mut a = series.recorder();
        let mut b = series.recorder();
        a.record("call", 10);
        a.record("call", 2_000_000);
        tokio::time::advance(Duration::from_millis(1_500)).await;
        b.record("call", 20);
        b.record("resume", 30);
        tokio::time::advance(Duration::from_secs(2)).await;
        a.record("call", 40);
        assert!(series.snapshot().is_empty(), "buffered until a flush");
        drop(a);
        drop(b);
        let s = series.snapshot();
        let counts: Vec<(u64, &str, u64)> = s
            .iter()
            .flat_map(|(sec, m)| m.iter().map(move |(n, h)| (*sec, *n, h.len())))
            .collect();
        assert!(
            s[&0]["call"].max() >= 1_990_000,
            "large values grow the histogram, not clamp"
        );
        assert_eq!(
            counts,
            [
                (0, "call", 2),
                (1, "call", 1),
                (1, "resume", 1),
                (3, "call", 1)
            ]
        );
    }
}
