//! `latency`: every chunk leaves `latency_ms ± jitter_ms` after it would otherwise have left.
//!
//! Observable effect: the first byte of each chunk reaches the peer that much later; byte order
//! is kept (departure times never decrease, so a chunk whose jitter would overtake the previous
//! one leaves with it); throughput is not capped, because only departure times are set and the
//! pump keeps reading while earlier chunks wait. The EOF is passed on `latency_ms` after it
//! arrived (and never before the last byte).
//!
//! Profile keys: `latency_ms` (required, integer ms), `jitter_ms` (integer ms, default 0; each
//! chunk's delay is drawn uniformly from `[latency - jitter, latency + jitter]`, floored at 0),
//! plus `direction` and `probability`.

use std::time::Duration;

use rand::RngExt;
use tokio::time::Instant;

use super::common::Factory;
use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn, toxic_ms};
use super::{Chunk, ConnRng, Fault, Plan};

/// Configuration of `latency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyConfig {
    /// Added delay.
    pub latency: Duration,
    /// Half-width of the uniform jitter.
    pub jitter: Duration,
}

impl LatencyConfig {
    /// Reads `latency_ms` and `jitter_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let latency = r
            .millis("latency_ms")?
            .ok_or_else(|| r.missing("latency_ms"))?;
        let jitter = r.millis("jitter_ms")?.unwrap_or_default();
        Ok(LatencyConfig { latency, jitter })
    }
}

impl KindConfig for LatencyConfig {
    const KIND: &'static str = "latency";

    fn make(&self, _rng: &mut ConnRng, _now: Instant) -> Box<dyn Fault> {
        Box::new(Latency {
            cfg: *self,
            last: None,
        })
    }
}

/// One connection's `latency`.
#[derive(Debug)]
pub struct Latency {
    cfg: LatencyConfig,
    /// Departure time of the last slice planned, to keep order.
    last: Option<Instant>,
}

impl Latency {
    fn delay(&self, rng: &mut ConnRng) -> Duration {
        if self.cfg.jitter.is_zero() {
            return self.cfg.latency;
        }
        let j = u64::try_from(self.cfg.jitter.as_micros()).unwrap_or(u64::MAX / 4);
        let offset = rng.random_range(0..=2 * j);
        (self.cfg.latency + Duration::from_micros(offset)).saturating_sub(self.cfg.jitter)
    }
}

impl Fault for Latency {
    fn kind(&self) -> &'static str {
        LatencyConfig::KIND
    }

    fn on_chunk(&mut self, _chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        let delay = self.delay(rng);
        for s in plan.slices_mut() {
            let mut at = s.at + delay;
            if let Some(last) = self.last {
                at = at.max(last);
            }
            s.at = at;
            self.last = Some(at);
        }
    }

    fn on_eof(&mut self, now: Instant) -> Instant {
        let at = now + self.cfg.latency;
        self.last.map_or(at, |last| at.max(last))
    }
}

/// `latency` in the registry; Toxiproxy's `latency` (`latency`, `jitter` in ms).
pub const KIND: KindInfo = KindInfo {
    name: "latency",
    scope: Scope::Connection,
    summary: "each chunk leaves latency ± jitter later; order kept, throughput not capped",
    keys: &[
        ("latency_ms", "delay (required)"),
        ("jitter_ms", "± uniform jitter (default 0)"),
    ],
    read: |r| conn(r, LatencyConfig::read),
    toxic: Some(Toxic {
        type_: "latency",
        attributes: &["latency", "jitter"],
        read: |r, common| {
            let latency = toxic_ms(r, "latency")?;
            let jitter = toxic_ms(r, "jitter")?;
            Ok(Factory::shared(common, LatencyConfig { latency, jitter }))
        },
    }),
};
