//! `slow_close`: the EOF (FIN) of the source is passed on `delay_ms` after it arrived.
//!
//! Observable effect: data is untouched; the peer sees the close `delay_ms` late (a server that
//! lingers before closing, or a proxy that holds the half-close).
//!
//! Profile keys: `delay_ms` (required, integer ms), plus `direction` and `probability`.

use std::time::Duration;

use tokio::time::Instant;

use super::common::Factory;
use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn, toxic_ms};
use super::{Chunk, ConnRng, Fault, Plan, Unseen};

/// Configuration of `slow_close`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowCloseConfig {
    /// How long the EOF is held.
    pub delay: Duration,
}

impl SlowCloseConfig {
    /// Reads `delay_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let delay = r.millis("delay_ms")?.ok_or_else(|| r.missing("delay_ms"))?;
        Ok(SlowCloseConfig { delay })
    }
}

impl KindConfig for SlowCloseConfig {
    const KIND: &'static str = "slow_close";

    fn make(&self, _rng: &mut ConnRng, _now: Instant) -> Box<dyn Fault> {
        Box::new(SlowClose { cfg: *self })
    }
}

/// One connection's `slow_close`.
#[derive(Debug)]
pub struct SlowClose {
    cfg: SlowCloseConfig,
}

impl Fault for SlowClose {
    fn kind(&self) -> &'static str {
        SlowCloseConfig::KIND
    }

    fn on_chunk(&mut self, _chunk: &Chunk<'_>, _plan: &mut Plan, _rng: &mut ConnRng) {}

    fn on_eof(&mut self, now: Instant) -> Instant {
        now + self.cfg.delay
    }

    fn unseen(&self) -> Unseen {
        Unseen::Always
    }
}

/// `slow_close` in the registry; Toxiproxy's `slow_close` (`delay` in ms).
pub const KIND: KindInfo = KindInfo {
    name: "slow_close",
    scope: Scope::Connection,
    summary: "the EOF is passed on delay_ms late",
    keys: &[("delay_ms", "hold of the EOF (required)")],
    read: |r| conn(r, SlowCloseConfig::read),
    toxic: Some(Toxic {
        type_: "slow_close",
        attributes: &["delay"],
        read: |r, common| {
            let delay = toxic_ms(r, "delay")?;
            Ok(Factory::shared(common, SlowCloseConfig { delay }))
        },
    }),
};
