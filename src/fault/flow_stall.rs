//! `flow_stall`: HTTP/2 flow control that stops — a receiver (or an intermediary) that returns
//! no credit for a while, so the sender's window runs dry and its streams stall behind it.
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: the
//! `WINDOW_UPDATE` frames that return credit for the DATA of the fault's direction (`direction =
//! "downstream"`, default: the client's updates for the server's response DATA; `"upstream"`:
//! the server's updates for request bodies) are withheld for `stall_ms`, then the withheld
//! credit leaves summed, as one `WINDOW_UPDATE` per stream (or for the connection). With
//! `target = "stream"` (default) each matching stream (`stream = "sse"`, default: responses
//! that are `text/event-stream`; `"all"`: every stream) stalls once, from the moment
//! `after_bytes` of its DATA (default 0: its first DATA frame) have passed; connection-level
//! updates keep flowing. With `target = "connection"`, the connection-level updates (stream 0)
//! stall once, from the moment `after_bytes` of DATA of the whole connection have passed; every
//! stream of the connection stalls behind it once the connection window is spent. No credit is
//! lost: the sum of the increments that leave equals the sum that arrived (credit of a stream
//! that closed while stalled is dropped with the stream: the sender no longer needs it).
//!
//! Profile keys: `stall_ms` (required, > 0), `target` (`"stream"` default, `"connection"`),
//! `stream` (`"sse"` default, `"all"`; only with `target = "stream"`), `after_bytes` (default
//! 0), plus `direction` and `probability`.
//!
//! The decision is [`FlowStall`], a pure state machine over (DATA, WINDOW_UPDATE, stream end,
//! clock) → forward, withhold, or release summed credit.

use std::time::Duration;

use tokio::time::Instant;

use super::keys::{FaultConfigError, KeyReader};

/// Which windows stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallTarget {
    /// The windows of matching streams (`sse_only`: only `text/event-stream` responses).
    Streams {
        /// Only SSE streams.
        sse_only: bool,
    },
    /// The connection's window (stream 0).
    Connection,
}

/// Configuration of `flow_stall`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowStallConfig {
    /// Which windows.
    pub target: StallTarget,
    /// How long credit is withheld.
    pub stall: Duration,
    /// DATA bytes (of the stream, or of the connection) that pass before the stall starts.
    pub after_bytes: u64,
}

impl FlowStallConfig {
    /// Reads `stall_ms`, `target`, `stream` and `after_bytes`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let stall = r.millis("stall_ms")?.ok_or_else(|| r.missing("stall_ms"))?;
        if stall.is_zero() {
            return Err(r.invalid("stall_ms", "stall_ms must be greater than 0"));
        }
        let connection = r.choice("target", &["stream", "connection"])? == Some("connection");
        let stream = r.choice("stream", &["sse", "all"])?;
        let target = match (connection, stream) {
            (true, Some(_)) => {
                return Err(r.invalid(
                    "stream",
                    "'stream' chooses streams for target = \"stream\"; with target = \"connection\" the connection's window stalls (remove 'stream')",
                ));
            }
            (true, None) => StallTarget::Connection,
            (false, s) => StallTarget::Streams {
                sse_only: s != Some("all"),
            },
        };
        let after_bytes = r.u64("after_bytes", "bytes")?.unwrap_or(0);
        Ok(FlowStallConfig {
            target,
            stall,
            after_bytes,
        })
    }
}

/// What happens to a `WINDOW_UPDATE` the fault was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditVerdict {
    /// It leaves unchanged.
    Forward,
    /// It is withheld; its increment leaves later, summed, in a [`Credit`].
    Withhold,
}

/// Credit the relay writes as one `WINDOW_UPDATE(stream, increment)` (stream 0: the
/// connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credit {
    /// The stream (0 = the connection).
    pub stream: u32,
    /// The increment, 1..=2^31-1.
    pub increment: u32,
}

/// The largest increment one `WINDOW_UPDATE` carries (RFC 9113 §6.9).
pub const MAX_INCREMENT: u64 = 0x7fff_ffff;

/// One window's stall: bytes counted, the window, the credit withheld.
#[derive(Debug, Clone, Copy)]
struct Window {
    stream: u32,
    bytes: u64,
    /// `None` until the stall starts; then `[start, end)`.
    stall: Option<(Instant, Instant)>,
    /// Whether the stall is over (it happens once).
    done: bool,
    withheld: u64,
}

impl Window {
    fn new(stream: u32) -> Self {
        Window {
            stream,
            bytes: 0,
            stall: None,
            done: false,
            withheld: 0,
        }
    }
}

/// One connection's `flow_stall` (one direction's DATA): which credit is withheld and when it
/// is released. Memory: one small entry per open matching stream (kept until the stream closes,
/// so that a stream stalls once).
#[derive(Debug)]
pub struct FlowStall {
    cfg: FlowStallConfig,
    windows: Vec<Window>,
}

impl FlowStall {
    /// The fault of one connection.
    pub fn new(cfg: FlowStallConfig) -> Self {
        let windows = match cfg.target {
            StallTarget::Connection => vec![Window::new(0)],
            StallTarget::Streams { .. } => Vec::new(),
        };
        FlowStall { cfg, windows }
    }

    /// A DATA frame of `len` bytes (flow-controlled length, padding included) on `stream`
    /// passed at `now`; `sse` if the stream's response is `text/event-stream`.
    pub fn on_data(&mut self, stream: u32, len: u32, sse: bool, now: Instant) {
        let key = match self.cfg.target {
            StallTarget::Connection => 0,
            StallTarget::Streams { sse_only } if sse || !sse_only => stream,
            StallTarget::Streams { .. } => return,
        };
        let i = match self.windows.iter().position(|w| w.stream == key) {
            Some(i) => i,
            None => {
                self.windows.push(Window::new(key));
                self.windows.len() - 1
            }
        };
        let w = &mut self.windows[i];
        w.bytes = w.bytes.saturating_add(u64::from(len));
        if w.stall.is_none() && !w.done && w.bytes >= self.cfg.after_bytes {
            w.stall = Some((now, now + self.cfg.stall));
        }
    }

    /// A `WINDOW_UPDATE(stream, increment)` for the fault's DATA arrived at `now`.
    pub fn on_window_update(&mut self, stream: u32, increment: u32, now: Instant) -> CreditVerdict {
        let Some(w) = self.windows.iter_mut().find(|w| w.stream == stream) else {
            return CreditVerdict::Forward;
        };
        match w.stall {
            Some((start, end)) if !w.done && start <= now && now < end => {
                w.withheld += u64::from(increment);
                CreditVerdict::Withhold
            }
            _ => CreditVerdict::Forward,
        }
    }

    /// `stream` closed (both ends done, or reset): its state and any credit withheld for it are
    /// dropped (the connection's window is separate and unaffected).
    pub fn on_stream_closed(&mut self, stream: u32) {
        if stream != 0 {
            self.windows.retain(|w| w.stream != stream);
        }
    }

    /// The next time a stall ends.
    pub fn next_timer(&self) -> Option<Instant> {
        self.windows
            .iter()
            .filter(|w| !w.done)
            .filter_map(|w| w.stall.map(|(_, end)| end))
            .min()
    }

    /// The clock reached `now`: every stall that ended releases its withheld credit (split
    /// into increments of at most [`MAX_INCREMENT`]).
    pub fn on_timer(&mut self, now: Instant, out: &mut Vec<Credit>) {
        for w in &mut self.windows {
            let Some((_, end)) = w.stall else { continue };
            if w.done || now < end {
                continue;
            }
            w.done = true;
            while w.withheld > 0 {
                let inc = w.withheld.min(MAX_INCREMENT);
                w.withheld -= inc;
                out.push(Credit {
                    stream: w.stream,
                    increment: u32::try_from(inc).unwrap_or(u32::MAX >> 1),
                });
            }
        }
    }
}

#[cfg(test)]
#[path = "flow_stall_tests.rs"]
mod tests;
