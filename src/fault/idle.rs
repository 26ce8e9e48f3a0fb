//! `idle`: a gateway's idle timeout. When nothing has flowed in the direction for `idle_ms`
//! (since the connection opened or since its last chunk), the connection is ended with a FIN
//! (`action = "fin"`, default) or an RST (`action = "reset"`).
//!
//! Why: load balancers and API gateways (nginx `proxy_read_timeout`, cloud load balancers'
//! idle timeouts) end SSE streams that stay quiet between events; a client must resume them.
//! Observable effect: a stream whose gaps stay below `idle_ms` is untouched; the first gap
//! that reaches it ends the connection `idle_ms` after the last chunk arrived.
//!
//! Profile keys: `idle_ms` (required, integer ms, > 0), `action` (`"fin"` default or
//! `"reset"`), plus `direction` and `probability`.

use std::time::Duration;

use tokio::time::Instant;

use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, conn};
use super::{Chunk, ConnRng, Deadline, Fault, Plan};
use crate::vocab::CutAction;

/// Configuration of `idle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleConfig {
    /// The quiet time that ends the connection.
    pub idle: Duration,
    /// How it ends.
    pub action: CutAction,
}

impl IdleConfig {
    /// Reads `idle_ms` and `action`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let idle = r.millis("idle_ms")?.ok_or_else(|| r.missing("idle_ms"))?;
        if idle.is_zero() {
            return Err(FaultConfigError::at_def(
                r.def(),
                Some("idle_ms"),
                "idle_ms must be greater than 0",
            ));
        }
        let action = match r.choice("action", &["fin", "reset"])? {
            Some("reset") => CutAction::Reset,
            _ => CutAction::Fin,
        };
        Ok(IdleConfig { idle, action })
    }
}

impl KindConfig for IdleConfig {
    const KIND: &'static str = "idle";

    fn make(&self, _rng: &mut ConnRng, now: Instant) -> Box<dyn Fault> {
        Box::new(Idle {
            cfg: *self,
            last: now,
        })
    }
}

/// One connection's `idle`.
#[derive(Debug)]
pub struct Idle {
    cfg: IdleConfig,
    /// When the last chunk of the direction arrived (or the connection opened).
    last: Instant,
}

impl Fault for Idle {
    fn kind(&self) -> &'static str {
        IdleConfig::KIND
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, _plan: &mut Plan, _rng: &mut ConnRng) {
        self.last = self.last.max(chunk.arrived);
    }

    /// The last activity: an edited `idle_ms` counts from it, not from the edit.
    fn hand_over(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        Some(Box::new(self.last))
    }

    fn take_over(&mut self, state: Box<dyn std::any::Any + Send>) {
        if let Ok(last) = state.downcast::<Instant>() {
            self.last = self.last.max(*last);
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        Some(Deadline {
            at: self.last + self.cfg.idle,
            action: self.cfg.action,
            by: IdleConfig::KIND,
        })
    }
}

/// `idle` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "idle",
    scope: Scope::Connection,
    summary: "a gateway's idle timeout: FIN (or RST) once nothing flowed for idle_ms",
    keys: &[
        (
            "idle_ms",
            "quiet time that ends the connection, > 0 (required)",
        ),
        ("action", "\"fin\" (default) or \"reset\""),
    ],
    read: |r| conn(r, IdleConfig::read),
    toxic: None,
};
