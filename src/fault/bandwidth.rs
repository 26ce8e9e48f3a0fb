//! `bandwidth`: a token bucket that holds the direction to `rate` bytes per second.
//!
//! Observable effect: over any window longer than 10 ms the peer receives at most `rate` bytes
//! per second (plus one slice of burst); bytes are neither dropped nor reordered. Chunks are split
//! into slices of `rate / 100` bytes (10 ms of traffic, at least 1 byte, and at most 4,096 slices
//! per chunk) and each slice leaves when the link has carried the bytes before it, so the flow
//! is smooth at any rate and the work is per slice, never per byte.
//!
//! Profile keys: `rate` (required, bytes per second, > 0), plus `direction` and `probability`.
//! The Toxiproxy attribute `rate` is in KB/s (1 KB = 1,000 bytes).

use std::time::Duration;

use tokio::time::Instant;

use super::common::Factory;
use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn};
use super::{Chunk, ConnRng, Fault, Plan, Slice};

/// Configuration of `bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BandwidthConfig {
    /// Bytes per second, > 0.
    pub rate: u64,
}

impl BandwidthConfig {
    /// Reads `rate`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let rate = r
            .u64("rate", "bytes per second")?
            .ok_or_else(|| r.missing("rate"))?;
        if rate == 0 {
            let p = r.raw("rate");
            return Err(match p {
                Some(p) => {
                    FaultConfigError::at_value(p, "rate must be > 0 bytes per second, got 0")
                }
                None => r.missing("rate"),
            });
        }
        Ok(BandwidthConfig { rate })
    }
}

impl KindConfig for BandwidthConfig {
    const KIND: &'static str = "bandwidth";

    fn make(&self, _rng: &mut ConnRng, _now: Instant) -> Box<dyn Fault> {
        Box::new(Bandwidth {
            rate: self.rate.max(1),
            busy_since: None,
            carried: 0,
            scratch: Vec::new(),
        })
    }
}

/// Most slices one chunk is split into.
const MAX_SLICES: usize = 4096;

/// One connection's `bandwidth`.
#[derive(Debug)]
pub struct Bandwidth {
    rate: u64,
    /// Start of the current busy period of the link.
    busy_since: Option<Instant>,
    /// Bytes carried since `busy_since`.
    carried: u64,
    scratch: Vec<Slice>,
}

impl Bandwidth {
    /// Time the link needs for `bytes` bytes.
    fn transmit(&self, bytes: u64) -> Duration {
        let nanos = u128::from(bytes) * 1_000_000_000 / u128::from(self.rate);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Departure time of a piece of `len` bytes ready at `ready`; advances the bucket.
    fn depart(&mut self, ready: Instant, len: u64) -> Instant {
        let busy_until = self
            .busy_since
            .map(|start| start + self.transmit(self.carried));
        let at = match busy_until {
            Some(until) if until > ready => until,
            _ => {
                // The link was idle: a new busy period starts now.
                self.busy_since = Some(ready);
                self.carried = 0;
                ready
            }
        };
        self.carried += len;
        at
    }
}

impl Fault for Bandwidth {
    fn kind(&self) -> &'static str {
        BandwidthConfig::KIND
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        let per_tick = usize::try_from(self.rate / 100)
            .unwrap_or(usize::MAX)
            .max(1);
        let piece = per_tick.max(chunk.bytes.len().div_ceil(MAX_SLICES));
        self.scratch.clear();
        for s in plan.slices() {
            let mut start = s.start;
            while start < s.end {
                let end = (start + piece).min(s.end);
                let at = self.depart(s.at, (end - start) as u64);
                self.scratch.push(Slice { start, end, at });
                start = end;
            }
        }
        std::mem::swap(plan.slices_mut(), &mut self.scratch);
    }
}

/// `bandwidth` in the registry; Toxiproxy's `bandwidth` (`rate` in KB/s, 1 KB = 1,000 bytes).
pub const KIND: KindInfo = KindInfo {
    name: "bandwidth",
    scope: Scope::Connection,
    summary: "token bucket: at most `rate` bytes per second, smooth",
    keys: &[("rate", "bytes per second, > 0 (required)")],
    read: |r| conn(r, BandwidthConfig::read),
    toxic: Some(Toxic {
        type_: "bandwidth",
        attributes: &["rate"],
        read: |r, common| {
            let kbps = r.u64("rate", "KB/s")?.unwrap_or(0);
            if kbps == 0 {
                return Err(r.invalid("rate", "rate must be > 0 KB/s"));
            }
            let rate = kbps.saturating_mul(1000);
            Ok(Factory::shared(common, BandwidthConfig { rate }))
        },
    }),
};
