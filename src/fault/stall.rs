//! `stall`: forwarding stops for `duration_ms` at a byte offset or at a time, then resumes.
//!
//! Observable effect: with `at_byte = N`, the peer receives the first N bytes, then nothing for
//! `duration_ms` (measured from when byte N would have left), then the rest, unchanged and in
//! order; with `after_ms = T`, no byte leaves during the window `[open + T, open + T +
//! duration_ms)` of the connection's life, and what would have left in it leaves at the window's
//! end. No byte is dropped. The stall fires at most once per connection.
//!
//! Profile keys: `duration_ms` (required), exactly one of `at_byte` or `after_ms`, plus
//! `direction` and `probability`.

use std::time::Duration;

use tokio::time::Instant;

use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, conn};
use super::{Chunk, ConnRng, Fault, Plan};

/// Where a `stall` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallTrigger {
    /// Before byte N (after N bytes were forwarded).
    AtByte(u64),
    /// This long after the connection opened.
    After(Duration),
}

/// Configuration of `stall`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StallConfig {
    /// Where it starts.
    pub trigger: StallTrigger,
    /// How long nothing leaves.
    pub duration: Duration,
}

impl StallConfig {
    /// Reads `duration_ms` and `at_byte` | `after_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let duration = r
            .millis("duration_ms")?
            .ok_or_else(|| r.missing("duration_ms"))?;
        let at_byte = r.u64("at_byte", "bytes")?.map(StallTrigger::AtByte);
        let after = r.millis("after_ms")?.map(StallTrigger::After);
        let trigger = match (at_byte, after) {
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => {
                return Err(FaultConfigError::at_def(
                    r.def(),
                    None,
                    "stall needs one of 'at_byte' or 'after_ms'",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(super::reset::second_trigger(
                    r,
                    &["at_byte", "after_ms"],
                    "stall takes exactly one of 'at_byte' or 'after_ms'",
                ));
            }
        };
        Ok(StallConfig { trigger, duration })
    }
}

impl KindConfig for StallConfig {
    const KIND: &'static str = "stall";

    fn make(&self, _rng: &mut ConnRng, now: Instant) -> Box<dyn Fault> {
        let window = match self.trigger {
            StallTrigger::AtByte(_) => None,
            StallTrigger::After(after) => Some((now + after, now + after + self.duration)),
        };
        Box::new(Stall {
            cfg: *self,
            window,
            base: 0,
        })
    }
}

/// One connection's `stall`.
#[derive(Debug)]
pub struct Stall {
    cfg: StallConfig,
    /// The window nothing leaves in, once known.
    window: Option<(Instant, Instant)>,
    /// Stream offset the fault first applied at (`at_byte` counts from there).
    base: u64,
}

impl Fault for Stall {
    fn kind(&self) -> &'static str {
        StallConfig::KIND
    }

    fn rebase(&mut self, offset: u64) {
        self.base = offset;
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        if let (StallTrigger::AtByte(n), None) = (self.cfg.trigger, self.window) {
            let n = n.saturating_add(self.base);
            let end = chunk.offset + chunk.bytes.len() as u64;
            if chunk.offset <= n && n < end {
                let k = usize::try_from(n - chunk.offset).unwrap_or(0);
                let from = plan
                    .slices()
                    .iter()
                    .find(|s| s.end > k)
                    .map(|s| s.at)
                    .unwrap_or(chunk.arrived);
                let until = from + self.cfg.duration;
                self.window = Some((from, until));
                plan.delay_from(k, until);
                return;
            }
        }
        if let Some((start, end)) = self.window {
            for s in plan.slices_mut() {
                if start <= s.at && s.at < end {
                    s.at = end;
                }
            }
        }
    }
}

/// `stall` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "stall",
    scope: Scope::Connection,
    summary: "nothing leaves for duration_ms from a byte or a time, then it resumes",
    keys: &[
        ("duration_ms", "length of the stall (required)"),
        ("at_byte", "stall before this byte offset"),
        ("after_ms", "stall this long after the connection opened"),
    ],
    read: |r| conn(r, StallConfig::read),
    toxic: None,
};
