//! `timeout`: a blackhole. Every byte of the direction is dropped; the connection is closed with
//! a FIN `timeout_ms` after it opened, or never when `timeout_ms` is 0.
//!
//! Observable effect: the peer receives nothing in this direction, not even the source's EOF,
//! then (if the timeout is not 0) an orderly close; the other direction is untouched until the
//! close. With `timeout_ms = 0` the EOF is held for as long as the connection lives.
//!
//! Profile keys: `timeout_ms` (required, integer ms; 0 = never close), plus `direction` and
//! `probability`.

use std::time::Duration;

use tokio::time::Instant;

use super::common::Factory;
use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn, toxic_ms};
use super::{Chunk, ConnRng, Deadline, Fault, Plan};
use crate::vocab::CutAction;

/// Configuration of `timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutConfig {
    /// Time from the connection's start to the close; zero means never.
    pub timeout: Duration,
}

impl TimeoutConfig {
    /// Reads `timeout_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let timeout = r
            .millis("timeout_ms")?
            .ok_or_else(|| r.missing("timeout_ms"))?;
        Ok(TimeoutConfig { timeout })
    }
}

impl KindConfig for TimeoutConfig {
    const KIND: &'static str = "timeout";

    fn make(&self, _rng: &mut ConnRng, now: Instant) -> Box<dyn Fault> {
        Box::new(Timeout {
            close_at: (!self.timeout.is_zero()).then(|| now + self.timeout),
        })
    }
}

/// One connection's `timeout`.
#[derive(Debug)]
pub struct Timeout {
    close_at: Option<Instant>,
}

impl Fault for Timeout {
    fn kind(&self) -> &'static str {
        TimeoutConfig::KIND
    }

    fn on_chunk(&mut self, _chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        plan.drop_all();
    }

    fn deadline(&self) -> Option<Deadline> {
        self.close_at.map(|at| Deadline {
            at,
            action: CutAction::Fin,
            by: TimeoutConfig::KIND,
        })
    }

    fn on_eof(&mut self, now: Instant) -> Instant {
        self.close_at.unwrap_or(now + NEVER).max(now)
    }
}

/// "Never" for a held EOF: longer than any run (tokio's own far future is 30 years).
const NEVER: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `timeout` in the registry; Toxiproxy's `timeout` (`timeout` in ms).
pub const KIND: KindInfo = KindInfo {
    name: "timeout",
    scope: Scope::Connection,
    summary: "blackhole: drop every byte, FIN after timeout_ms (0 = never)",
    keys: &[("timeout_ms", "time to the close, 0 = never (required)")],
    read: |r| conn(r, TimeoutConfig::read),
    toxic: Some(Toxic {
        type_: "timeout",
        attributes: &["timeout"],
        read: |r, common| {
            let timeout = toxic_ms(r, "timeout")?;
            Ok(Factory::shared(common, TimeoutConfig { timeout }))
        },
    }),
};
