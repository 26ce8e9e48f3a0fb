//! The latency histograms the auditor keeps, so users of any client get them from the proxy.
//!
//! All six are measured between observation receipt times (`tokio::time::Instant::now()` when
//! the observer's record reached the auditor), in microseconds, so they include the observer's
//! own delay but no clock of the client or server:
//! - `client-reconnect`: cut of a stream → the client's reconnect for it (resume GET, or the
//!   re-open / re-issue that stands in for one);
//! - `server-replay`: resume request → first event delivered on the replay leg;
//! - `first-event`: request → first event of every SSE response (opening and resume legs);
//! - `final-response`: request → the JSON-RPC response to each of its calls (SSE or JSON);
//! - `response-head`: request → its response head delivered to the client (what a buffering hop
//!   that holds response headers until the first event — `hold_headers` — adds to it, since
//!   observations reach the auditor when their bytes reach the client);
//! - `event-gap`: one delivered SSE event → the next on the same exchange (a flow-control
//!   stall — `flow_stall` — or a server that pauses shows as its maximum).
//!
//! Invariant: values are clamped into the histogram's range (1 µs … 1 h), never dropped.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::Duration;

/// Names of the histograms, in report order.
pub const NAMES: [&str; 6] = [
    "client-reconnect",
    "server-replay",
    "first-event",
    "final-response",
    "response-head",
    "event-gap",
];

const MAX_US: u64 = 3_600_000_000;

/// The auditor's latency histograms.
#[derive(Debug, Clone)]
pub struct Histos {
    map: BTreeMap<&'static str, Histogram<u64>>,
}

impl Default for Histos {
    fn default() -> Self {
        let map = NAMES
            .iter()
            .filter_map(|n| {
                Histogram::new_with_bounds(1, MAX_US, 3)
                    .ok()
                    .map(|h| (*n, h))
            })
            .collect();
        Histos { map }
    }
}

impl Histos {
    /// Records `d` into the histogram `name` (one of [`NAMES`]).
    pub fn record(&mut self, name: &'static str, d: Duration) {
        let us = u64::try_from(d.as_micros())
            .unwrap_or(MAX_US)
            .clamp(1, MAX_US);
        if let Some(h) = self.map.get_mut(name) {
            h.saturating_record(us);
        }
    }

    /// A copy of all histograms.
    pub fn snapshot(&self) -> BTreeMap<&'static str, Histogram<u64>> {
        self.map.clone()
    }

    /// One line per histogram: count, p50, p90, p99, max in milliseconds.
    pub fn summary_lines(&self) -> Vec<String> {
        NAMES
            .iter()
            .filter_map(|n| self.map.get(n).map(|h| (n, h)))
            .map(|(n, h)| {
                let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
                format!(
                    "  {n:<17} n={:<7} p50={:.3}ms p90={:.3}ms p99={:.3}ms max={:.3}ms",
                    h.len(),
                    ms(0.5),
                    ms(0.9),
                    ms(0.99),
                    h.max() as f64 / 1000.0
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_recorded_in_microseconds_and_clamped() {
        let mut h = Histos::default();
        h.record("first-event", Duration::from_millis(3));
        h.record("first-event", Duration::ZERO);
        h.record("first-event", Duration::from_secs(10_000));
        h.record("no-such", Duration::from_millis(1));
        let s = h.snapshot();
        let fe = &s["first-event"];
        assert_eq!(fe.len(), 3);
        assert_eq!(fe.min(), 1);
        assert!(fe.max() >= MAX_US - MAX_US / 1000);
        assert!(fe.equivalent(fe.value_at_quantile(0.5), 3000));
        assert_eq!(s.len(), NAMES.len());
    }
}
