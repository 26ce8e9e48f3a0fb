//! `reset`: the connection is reset (RST, SO_LINGER 0) at a byte offset or at a time.
//!
//! Observable effect: with `bytes = N`, the peer receives exactly the first N bytes of the
//! direction, then ECONNRESET; with `range = [a, b]`, N is drawn uniformly from `a..=b` (both
//! included) by the connection RNG when the connection opens, and the reset fires on whichever
//! chunk holds byte N, not only the first; with `after_ms = T`, the connection is reset T ms
//! after it opened, whatever has flowed. A connection that ends before its trigger closes
//! normally. With `outage_ms = D` and a byte trigger, the cut also opens a D ms outage of the
//! proxy (new connections refused or held; see `outage`).
//!
//! Profile keys: exactly one of `bytes`, `range`, `after_ms`; `outage_ms` (integer ms, only with
//! `bytes` or `range`); plus `direction` and `probability`.

use std::time::Duration;

use rand::RngExt;
use tokio::time::Instant;

use super::common::Factory;
use super::common::{KindConfig, cut_point};
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, Toxic, conn, toxic_ms};
use super::{Chunk, ConnRng, Cut, Deadline, Fault, Plan, Unseen};
use crate::vocab::CutAction;

/// When a `reset` fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTrigger {
    /// After exactly this many bytes.
    Bytes(u64),
    /// After a byte offset drawn uniformly from `a..=b` per connection.
    Range(u64, u64),
    /// This long after the connection opened.
    After(Duration),
}

/// Configuration of `reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetConfig {
    /// The trigger.
    pub trigger: ResetTrigger,
    /// Outage of the proxy opened by the cut (byte triggers only).
    pub outage: Option<Duration>,
}

impl ResetConfig {
    /// Reads `bytes` | `range` | `after_ms`, and `outage_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let bytes = r.u64("bytes", "bytes")?.map(ResetTrigger::Bytes);
        let range = r.range("range")?.map(|(a, b)| ResetTrigger::Range(a, b));
        let after = r.millis("after_ms")?.map(ResetTrigger::After);
        let outage = r.millis("outage_ms")?;
        let trigger = match (bytes, range, after) {
            (Some(t), None, None) | (None, Some(t), None) | (None, None, Some(t)) => t,
            (None, None, None) => {
                return Err(FaultConfigError::at_def(
                    r.def(),
                    None,
                    "reset needs one of 'bytes', 'range' or 'after_ms'",
                ));
            }
            _ => {
                return Err(second_trigger(
                    r,
                    &["bytes", "range", "after_ms"],
                    "reset takes exactly one of 'bytes', 'range' or 'after_ms'",
                ));
            }
        };
        if matches!(trigger, ResetTrigger::After(_)) && outage.is_some() {
            let p = r.raw("outage_ms");
            let msg = "outage_ms needs a byte trigger ('bytes' or 'range'), not 'after_ms'";
            return Err(match p {
                Some(p) => FaultConfigError::at_value(p, msg),
                None => FaultConfigError::at_def(r.def(), Some("outage_ms"), msg),
            });
        }
        Ok(ResetConfig { trigger, outage })
    }
}

impl KindConfig for ResetConfig {
    const KIND: &'static str = "reset";

    fn make(&self, rng: &mut ConnRng, now: Instant) -> Box<dyn Fault> {
        match self.trigger {
            ResetTrigger::Bytes(n) => {
                Box::new(ByteCut::new(n, CutAction::Reset, self.outage, Self::KIND))
            }
            ResetTrigger::Range(a, b) => {
                let n = rng.random_range(a..=b);
                Box::new(ByteCut::new(n, CutAction::Reset, self.outage, Self::KIND))
            }
            ResetTrigger::After(after) => Box::new(TimedReset { at: now + after }),
        }
    }
}

/// The error for a definition with more than one trigger: at the second one in source order.
pub fn second_trigger(
    r: &mut KeyReader<'_>,
    keys: &[&'static str],
    rule: &str,
) -> FaultConfigError {
    let mut present: Vec<&super::keys::Param> = keys.iter().filter_map(|k| r.raw(k)).collect();
    present.sort_by_key(|p| p.key_span.as_ref().map_or(0, |s| s.start));
    match present.get(1) {
        Some(p) => FaultConfigError {
            key: Some(p.key.clone()),
            span: p.key_span.clone(),
            message: format!("{rule}; '{}' conflicts with '{}'", p.key, present[0].key),
        },
        None => FaultConfigError::at_def(r.def(), None, rule.to_owned()),
    }
}

/// A cut after exactly `at` bytes of the direction (shared by `reset` and `limit_data`).
#[derive(Debug)]
pub struct ByteCut {
    at: u64,
    action: CutAction,
    outage: Option<Duration>,
    by: &'static str,
    fired: bool,
}

impl ByteCut {
    /// A cut after `at` bytes.
    pub fn new(at: u64, action: CutAction, outage: Option<Duration>, by: &'static str) -> Self {
        ByteCut {
            at,
            action,
            outage,
            by,
            fired: false,
        }
    }

    /// The stream offset the cut falls at.
    pub fn offset(&self) -> u64 {
        self.at
    }
}

impl Fault for ByteCut {
    fn kind(&self) -> &'static str {
        self.by
    }

    fn rebase(&mut self, offset: u64) {
        self.at = self.at.saturating_add(offset);
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        if self.fired {
            return;
        }
        if let Some(k) = cut_point(self.at, chunk) {
            self.fired = true;
            plan.cut_at(Cut {
                at: k,
                action: self.action,
                outage: self.outage,
                by: self.by,
            });
        }
    }

    fn unseen(&self) -> Unseen {
        if self.fired {
            Unseen::Always
        } else {
            Unseen::Before(self.at.saturating_sub(1))
        }
    }
}

/// A reset at a fixed time.
#[derive(Debug)]
pub struct TimedReset {
    at: Instant,
}

impl Fault for TimedReset {
    fn kind(&self) -> &'static str {
        ResetConfig::KIND
    }

    fn on_chunk(&mut self, _chunk: &Chunk<'_>, _plan: &mut Plan, _rng: &mut ConnRng) {}

    fn deadline(&self) -> Option<Deadline> {
        Some(Deadline {
            at: self.at,
            action: CutAction::Reset,
            by: ResetConfig::KIND,
        })
    }

    fn unseen(&self) -> Unseen {
        Unseen::Always
    }
}

/// `reset` in the registry; Toxiproxy's `reset_peer` (`timeout` in ms: 0 resets on the first
/// byte, otherwise that long after the connection opened).
pub const KIND: KindInfo = KindInfo {
    name: "reset",
    scope: Scope::Connection,
    summary: "RST after N bytes, at a random byte in a range, or after a time",
    keys: &[
        ("bytes", "reset after exactly this many bytes"),
        (
            "range",
            "[a, b]: reset at a byte drawn uniformly per connection",
        ),
        ("after_ms", "reset this long after the connection opened"),
        (
            "outage_ms",
            "proxy outage opened by the cut (with bytes or range)",
        ),
    ],
    read: |r| conn(r, ResetConfig::read),
    toxic: Some(Toxic {
        type_: "reset_peer",
        attributes: &["timeout"],
        read: |r, common| {
            let t = toxic_ms(r, "timeout")?;
            let trigger = if t.is_zero() {
                ResetTrigger::Bytes(0)
            } else {
                ResetTrigger::After(t)
            };
            let outage = None;
            Ok(Factory::shared(common, ResetConfig { trigger, outage }))
        },
    }),
};
