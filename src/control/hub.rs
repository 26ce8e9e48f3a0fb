//! The narrow seams the control API drives: the proxy runtime ([`ProxyHub`]), the fault
//! catalogue ([`FaultCatalog`]) and the read-only sources behind `/cuts`, `/findings` and
//! `/metrics` ([`CutsSource`], [`FindingsSource`]).
//!
//! The API owns the Toxiproxy bookkeeping (names, toxics, conflicts, defaults); a hub only runs
//! relays. Invariants a hub keeps: `start` relays on exactly the listener it is handed; `stop`
//! closes that listener and every connection of the proxy; `set_faults` replaces the API's
//! faults (both directions; a proxy's profile faults, if any, stay before them) and live
//! connections pick them up without losing or reordering a byte.
//! Counters in [`ProxyStats`] never decrease while the proxy exists, across stop and start.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::fault::FaultFactory;
use crate::fault::outage::OutageSchedule;
use crate::vocab::Direction;

/// Why the hub could not carry out a change.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The upstream address cannot be used.
    #[error("invalid upstream address '{address}': {reason}")]
    Upstream {
        /// The address as given.
        address: String,
        /// Why it was refused.
        reason: String,
    },
    /// The proxy is not known to the hub.
    #[error("proxy '{0}' is not running")]
    NotRunning(String),
    /// The runtime cannot do this.
    #[error("this proxy runtime does not support {0}")]
    Unsupported(&'static str),
    /// Any other runtime failure.
    #[error("proxy runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Resolves when a stopped proxy's listener is closed.
pub type Stopped = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The proxy runtime as the control API sees it.
pub trait ProxyHub: Send + Sync {
    /// Starts relaying connections accepted on `listener` to `upstream` through `faults`.
    /// A proxy of the same name that is still running is stopped first.
    fn start(
        &self,
        name: &str,
        listener: tokio::net::TcpListener,
        upstream: &str,
        faults: Vec<Arc<dyn FaultFactory>>,
    ) -> Result<(), HubError>;

    /// Closes the proxy's listener and all its connections; a no-op when it is not running.
    /// The returned future resolves once the listener is closed (new connects are refused).
    fn stop(&self, name: &str) -> Stopped;

    /// Sends new connections of a running proxy to `upstream`; open connections keep theirs.
    fn set_upstream(&self, name: &str, upstream: &str) -> Result<(), HubError>;

    /// Replaces the API's faults of a running proxy (both directions, in order); the profile's
    /// faults, if any, stay in force before them.
    fn set_faults(&self, name: &str, faults: Vec<Arc<dyn FaultFactory>>) -> Result<(), HubError>;

    /// The profile's faults now in force on a proxy (the current phase's, with phases), in
    /// chain order; none for a proxy the API made, or after [`ProxyHub::detach_profile`].
    fn profile_faults(&self, name: &str) -> Vec<Arc<dyn FaultFactory>> {
        let _ = name;
        Vec::new()
    }

    /// Removes a proxy's profile faults and stops its profile timeline (phase steps, outage
    /// windows) until the profile is reloaded: the API's `/reset`.
    fn detach_profile(&self, name: &str) {
        let _ = name;
    }

    /// True once [`ProxyHub::detach_profile`] ran on the proxy and no reload brought the profile
    /// back.
    fn profile_detached(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Sets the outage schedules of a running proxy, by toxic name. A schedule whose name and
    /// value are unchanged keeps running; a new or changed one starts its clock now; a missing
    /// one stops. Stopping the proxy stops them all.
    fn set_outages(
        &self,
        name: &str,
        outages: Vec<(String, OutageSchedule)>,
    ) -> Result<(), HubError> {
        let _ = name;
        if outages.is_empty() {
            Ok(())
        } else {
            Err(HubError::Unsupported("outage toxics"))
        }
    }

    /// Forgets a stopped proxy (its counters disappear from `/metrics`).
    fn remove(&self, name: &str);

    /// Counters of every proxy the hub knows (running or stopped).
    fn stats(&self) -> Vec<ProxyStats>;
}

/// Why a toxic could not be turned into a fault.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The type is not in the catalogue.
    #[error("invalid toxic type: '{type_}'; known: {known}")]
    UnknownType {
        /// The type as given.
        type_: String,
        /// Comma-separated known types.
        known: String,
    },
    /// The attributes do not fit the type.
    #[error("{0}")]
    Invalid(String),
}

/// Turns a Toxiproxy toxic (type, attributes, stream, toxicity) into a fault factory.
pub trait FaultCatalog: Send + Sync {
    /// Builds the factory; `toxicity` is the per-connection probability (0..=1).
    fn build(
        &self,
        type_: &str,
        attributes: &serde_json::Value,
        stream: Direction,
        toxicity: f64,
    ) -> Result<Arc<dyn FaultFactory>, CatalogError>;

    /// Builds a proxy-wide outage schedule when `type_` is a proxy-wide kind (`outage`);
    /// `None` when it is not one.
    fn build_outage(
        &self,
        type_: &str,
        attributes: &serde_json::Value,
    ) -> Option<Result<OutageSchedule, CatalogError>> {
        let _ = (type_, attributes);
        None
    }

    /// Every type `build` and `build_outage` accept, sorted.
    fn known_types(&self) -> Vec<String>;
}

/// Cut records for `GET /cuts` and the cut counters of `/metrics`.
pub trait CutsSource: Send + Sync {
    /// Every cut record so far, as JSON (an array).
    fn cuts(&self) -> serde_json::Value;
    /// Cuts counted by SSE position class and action.
    fn counts(&self) -> Vec<CutCount>;
}

/// Audit findings for `GET /findings` and the finding counters of `/metrics`.
pub trait FindingsSource: Send + Sync {
    /// Every finding so far, as JSON (an array).
    fn findings(&self) -> serde_json::Value;
    /// Findings counted by kind (`torn-cut`, `cursor-ahead`, …).
    fn counts(&self) -> Vec<(String, u64)>;
    /// Observations the audit dropped because its intake queue was full.
    fn dropped(&self) -> u64 {
        0
    }
    /// Entries held per audit store (`streams`, `sessions`, `exchanges`, …), after forgetting
    /// what is past the grace period; empty when the source keeps no such state.
    fn tracked(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// Ended streams the audit forgot before their grace because of its cap (0 without one).
    fn evicted(&self) -> u64 {
        0
    }
}

/// Number of cuts at one SSE position class with one action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutCount {
    /// The position class (`mid-value`, `boundary`, …; `none` outside SSE).
    pub class: String,
    /// `reset`, `fin`, `clean-end`.
    pub action: String,
    /// How many.
    pub count: u64,
}

/// Counters of one proxy, read at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyStats {
    /// The proxy's name.
    pub name: String,
    /// Bytes forwarded client → server.
    pub bytes_upstream: u64,
    /// Bytes forwarded server → client.
    pub bytes_downstream: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// Connections accepted since the proxy was created.
    pub connections_total: u64,
    /// Connections refused at once (proxy disabled, outage window, upstream unreachable, over
    /// a limit).
    pub connections_refused: u64,
    /// Of those, connections refused over `max_connections` or the open-file limit.
    pub connections_over_limit: u64,
    /// Bytes read from the client, before faults (Toxiproxy's `received`, upstream).
    pub received_upstream: u64,
    /// Bytes read from the server, before faults (Toxiproxy's `received`, downstream).
    pub received_downstream: u64,
    /// The address the proxy listens on now (empty when stopped): Toxiproxy's `listener` label.
    pub listen: String,
    /// The upstream address: Toxiproxy's `upstream` label.
    pub upstream: String,
    /// Cuts by action (`reset`, `fin`, `clean-end`).
    pub cuts_by_action: Vec<(String, u64)>,
    /// Fault activations by fault kind.
    pub fault_activations: Vec<(String, u64)>,
    /// How long bytes stayed inside the proxy when no fault delayed them.
    pub residence: HistogramSnapshot,
}

impl ProxyStats {
    /// Bytes forwarded in one direction.
    pub fn bytes(&self, direction: Direction) -> u64 {
        match direction {
            Direction::Upstream => self.bytes_upstream,
            Direction::Downstream => self.bytes_downstream,
        }
    }
}

/// A histogram in Prometheus terms: cumulative counts at upper bounds (seconds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// `(upper bound in seconds, observations ≤ bound)`, bounds increasing, counts
    /// non-decreasing; the `+Inf` bucket is implied by `count`.
    pub buckets: Vec<(f64, u64)>,
    /// Sum of all observations, seconds.
    pub sum_seconds: f64,
    /// Number of observations.
    pub count: u64,
}

/// Default residence-time bucket bounds, seconds (10 µs … 1 s).
pub const RESIDENCE_BOUNDS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0,
];

impl HistogramSnapshot {
    /// Buckets an HDR histogram whose values are in units of `unit_seconds` (1e-9 for ns).
    pub fn from_hdr(h: &hdrhistogram::Histogram<u64>, unit_seconds: f64, bounds: &[f64]) -> Self {
        let count = h.len();
        let mut sum = 0.0;
        for v in h.iter_recorded() {
            sum += v.value_iterated_to() as f64 * v.count_at_value() as f64;
        }
        let buckets = bounds
            .iter()
            .map(|&b| {
                let units = (b / unit_seconds).floor();
                let in_bucket = if units >= h.max() as f64 {
                    count
                } else {
                    h.count_between(0, units as u64)
                };
                (b, in_bucket)
            })
            .collect();
        HistogramSnapshot {
            buckets,
            sum_seconds: sum * unit_seconds,
            count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hdr_histogram_becomes_cumulative_buckets_in_seconds() {
        let Ok(mut h) = hdrhistogram::Histogram::<u64>::new(3) else {
            return;
        };
        // Nanoseconds: 5 µs, 20 µs, 20 µs, 2 ms.
        for v in [5_000u64, 20_000, 20_000, 2_000_000] {
            let _ = h.record(v);
        }
        let s = HistogramSnapshot::from_hdr(&h, 1e-9, &[0.00001, 0.001, 0.01]);
        assert_eq!(s.count, 4);
        assert_eq!(s.buckets, vec![(0.00001, 1), (0.001, 3), (0.01, 4)]);
        assert!(
            (s.sum_seconds - 0.002045).abs() < 0.00001,
            "{}",
            s.sum_seconds
        );
    }
}
