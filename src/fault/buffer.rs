//! `buffer`: an intermediary that buffers and flushes (nginx `proxy_buffering on`, a corporate
//! proxy, a CDN). Bytes are held and released together: the first byte held opens a window of
//! `flush_ms`; every byte that arrives before the window ends leaves with it, at its end.
//!
//! Why: SSE through a buffering hop arrives late and in bursts; events a client should have
//! seen one by one land together, heartbeats stop being heartbeats, and time to first event
//! grows by up to `flush_ms`. Observable effect: bytes and order are untouched; no byte leaves
//! before the end of its window; the EOF is held until the last window has flushed.
//!
//! Profile keys: `flush_ms` (required, integer ms, > 0), plus `direction` and `probability`.

use std::time::Duration;

use tokio::time::Instant;

use super::common::KindConfig;
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope, conn};
use super::{Chunk, ConnRng, Fault, Plan};

/// Configuration of `buffer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferConfig {
    /// Length of a buffering window.
    pub flush: Duration,
}

impl BufferConfig {
    /// Reads `flush_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let flush = r.millis("flush_ms")?.ok_or_else(|| r.missing("flush_ms"))?;
        if flush.is_zero() {
            return Err(FaultConfigError::at_def(
                r.def(),
                Some("flush_ms"),
                "flush_ms must be greater than 0",
            ));
        }
        Ok(BufferConfig { flush })
    }
}

impl KindConfig for BufferConfig {
    const KIND: &'static str = "buffer";

    fn make(&self, _rng: &mut ConnRng, _now: Instant) -> Box<dyn Fault> {
        Box::new(Buffer {
            cfg: *self,
            flush_at: None,
        })
    }
}

/// One connection's `buffer`.
#[derive(Debug)]
pub struct Buffer {
    cfg: BufferConfig,
    /// End of the open window (when its bytes leave).
    flush_at: Option<Instant>,
}

impl Fault for Buffer {
    fn kind(&self) -> &'static str {
        BufferConfig::KIND
    }

    fn on_chunk(&mut self, _chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        for s in plan.slices_mut() {
            // A slice planned after the open window ends starts a new one.
            let flush = match self.flush_at {
                Some(f) if s.at <= f => f,
                _ => s.at + self.cfg.flush,
            };
            s.at = flush;
            self.flush_at = Some(flush);
        }
    }

    fn on_eof(&mut self, now: Instant) -> Instant {
        self.flush_at.map_or(now, |f| f.max(now))
    }
}

/// `buffer` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "buffer",
    scope: Scope::Connection,
    summary: "a buffering intermediary: bytes held and flushed together every flush_ms",
    keys: &[("flush_ms", "length of a buffering window, > 0 (required)")],
    read: |r| conn(r, BufferConfig::read),
    toxic: None,
};
