//! `outage`: a proxy-level window during which the service is gone, then back.
//!
//! Observable effect, for each window: connections open when it starts are reset; new
//! connections during it are refused with RST (`mode = "refuse"`) or accepted but not served
//! until it ends (`mode = "hold"`); after it, service resumes. An outage is not per connection:
//! it has no `direction` or `probability`. The proxy runtime drives the schedule with a timer
//! ([`OutageSchedule::windows`]); this module only computes the windows, so it does no I/O.
//!
//! Profile keys: `duration_ms` (required, > 0), `start_ms` (since the proxy started, default 0),
//! `every_ms` (repeat period, ≥ `duration_ms`; absent = once), `count` (number of windows when
//! repeating, ≥ 1; absent = forever), `mode` (`"refuse"` default, or `"hold"`).
//!
//! Related: `outage_ms` on `reset` (and `sse_cut`) opens one window right after that cut.

use std::time::Duration;

use super::keys::{FaultConfigError, KeyReader};
use super::kind::{Built, KindInfo, Scope};
use crate::vocab::OutageMode;

/// When a proxy is out: one window, or a periodic series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutageSchedule {
    /// Start of the first window, since the proxy started.
    pub start: Duration,
    /// Length of each window (> 0).
    pub duration: Duration,
    /// Period between window starts (≥ `duration`); `None` = a single window.
    pub every: Option<Duration>,
    /// Number of windows when periodic (≥ 1); `None` = unbounded.
    pub count: Option<u32>,
    /// Refuse or hold new connections.
    pub mode: OutageMode,
}

impl OutageSchedule {
    /// Reads the `outage` keys.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let duration = r
            .millis("duration_ms")?
            .ok_or_else(|| r.missing("duration_ms"))?;
        let start = r.millis("start_ms")?.unwrap_or_default();
        let every = r.millis("every_ms")?;
        let count = r.u64("count", "windows")?;
        let mode = match r.choice("mode", &["refuse", "hold"])? {
            Some("hold") => OutageMode::Hold,
            _ => OutageMode::Refuse,
        };
        if duration.is_zero() {
            return Err(value_error(
                r,
                "duration_ms",
                "duration_ms must be > 0, got 0".into(),
            ));
        }
        if let Some(e) = every
            && e < duration
        {
            return Err(value_error(
                r,
                "every_ms",
                format!(
                    "every_ms must be at least duration_ms ({}), got {}",
                    duration.as_millis(),
                    e.as_millis()
                ),
            ));
        }
        let count = match count {
            Some(0) => {
                return Err(value_error(
                    r,
                    "count",
                    "count must be at least 1, got 0".into(),
                ));
            }
            Some(_) if every.is_none() => {
                return Err(value_error(
                    r,
                    "count",
                    "count needs every_ms (a single window has no count)".into(),
                ));
            }
            Some(c) => Some(u32::try_from(c).unwrap_or(u32::MAX)),
            None => None,
        };
        Ok(OutageSchedule {
            start,
            duration,
            every,
            count,
            mode,
        })
    }

    /// The windows as `(start since proxy start, length)`, in increasing order.
    pub fn windows(&self) -> impl Iterator<Item = (Duration, Duration)> + use<> {
        let s = *self;
        let n = match (s.every, s.count) {
            (None, _) => 1,
            (Some(_), Some(c)) => u64::from(c),
            (Some(_), None) => u64::MAX,
        };
        (0..n).map_while(move |k| {
            let offset = match s.every {
                Some(e) => e.checked_mul(u32::try_from(k).ok()?)?,
                None => Duration::ZERO,
            };
            Some((s.start.checked_add(offset)?, s.duration))
        })
    }
}

fn value_error(r: &mut KeyReader<'_>, key: &'static str, message: String) -> FaultConfigError {
    match r.raw(key) {
        Some(p) => FaultConfigError::at_value(p, message),
        None => FaultConfigError::at_def(r.def(), Some(key), message),
    }
}

/// `outage` in the registry: a proxy-wide schedule (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "outage",
    scope: Scope::Proxy,
    summary: "proxy-level window: open connections reset, new ones refused or held",
    keys: &[
        ("duration_ms", "window length, > 0 (required)"),
        (
            "start_ms",
            "first window, since the proxy started (default 0)",
        ),
        ("every_ms", "repeat period (default: once)"),
        (
            "count",
            "number of windows when repeating (default: forever)",
        ),
        ("mode", "\"refuse\" (default) or \"hold\""),
    ],
    read: |r| Ok(Built::Outage(OutageSchedule::read(r)?)),
    toxic: None,
};
