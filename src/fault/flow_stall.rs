//! `flow_stall`: HTTP/2 flow control that stops — a receiver (or an intermediary) that returns
//! no credit for a while, so the sender's window runs dry and its streams stall behind it.
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: the
//! `WINDOW_UPDATE` frames that return credit for the DATA of the fault's direction (`direction =
//! "downstream"`, default: the client's updates for the server's response DATA; `"upstream"`:
//! the server's updates for request bodies) are withheld for `stall_ms`, then leave together,
//! unchanged and in order, when the stall ends: the credit they return is exactly the credit
//! withheld, so nothing is lost and the stream completes. With `target = "stream"` (default)
//! each matching stream (`stream = "sse"`, default: responses that are `text/event-stream`;
//! `"all"`: every stream) stalls once, from the moment `after_bytes` of its DATA (default 0: its
//! first DATA frame) have passed; connection-level updates keep flowing. With `target =
//! "connection"`, the connection-level updates (stream 0) stall once, from the moment
//! `after_bytes` of DATA of the whole connection have passed; every stream stalls behind it once
//! the connection window is spent. The stall shows once the sender has spent the window it had:
//! a receiver that granted a large window sees the stall later, or not at all.
//!
//! A withheld update is a held frame on the relay, which holds the later frames of its stream
//! and direction behind it; stream 0's frames never wait for each other, so with `target =
//! "connection"` the receiver's `PING`s and `SETTINGS` acknowledgements still pass.
//!
//! The credit comes back whole: the held updates are the receiver's own frames, released
//! unchanged at the stall's end (none is dropped or merged), so the sender's window is what it
//! would have been without the stall — a body many times the window completes after it (see
//! the peer tests in `tests/h2/kind_flow.rs`).
//!
//! Profile keys: `stall_ms` (required, > 0), `target` (`"stream"` default, `"connection"`),
//! `stream` (`"sse"` default, `"all"`; only with `target = "stream"`), `after_bytes` (default
//! 0), plus `direction` and `probability`.
//!
//! The decision is [`FlowStall`], a pure state machine over (DATA, WINDOW_UPDATE, stream end,
//! clock) → forward, or hold until the stall's end.

use std::time::Duration;

use tokio::time::Instant;

use super::ConnRng;
use super::common::Common;
use super::h2::{FrameView, H2Actions, H2Fault, Hold, StreamFacts, Verdict};
use super::h2_kind::{H2KindConfig as KindConfig, h2_conn};
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope};
use crate::vocab::Direction;
use crate::wire::h2::FrameType;
use crate::wire::h2::frame::flags;

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

/// One window's stall: bytes counted, and the stall once it started.
#[derive(Debug, Clone, Copy)]
struct Window {
    stream: u32,
    bytes: u64,
    /// `None` until the stall starts; then `[start, end)`.
    stall: Option<(Instant, Instant)>,
}

/// One connection's `flow_stall` (one direction's DATA): which credit is withheld, until when.
/// Memory: one small entry per open matching stream (kept until the stream ends, so that a
/// stream stalls once).
#[derive(Debug)]
pub struct FlowStall {
    cfg: FlowStallConfig,
    windows: Vec<Window>,
}

impl FlowStall {
    /// The fault of one connection.
    pub fn new(cfg: FlowStallConfig) -> Self {
        let windows = match cfg.target {
            StallTarget::Connection => vec![Window {
                stream: 0,
                bytes: 0,
                stall: None,
            }],
            StallTarget::Streams { .. } => Vec::new(),
        };
        FlowStall { cfg, windows }
    }

    /// A DATA frame of `len` bytes (its flow-controlled length: the whole payload, padding
    /// included) on `stream` passed at `now`; `sse` if the stream's response is
    /// `text/event-stream`.
    pub fn on_data(&mut self, stream: u32, len: u32, sse: bool, now: Instant) {
        let key = match self.cfg.target {
            StallTarget::Connection => 0,
            StallTarget::Streams { sse_only } if sse || !sse_only => stream,
            StallTarget::Streams { .. } => return,
        };
        let i = match self.windows.iter().position(|w| w.stream == key) {
            Some(i) => i,
            None => {
                self.windows.push(Window {
                    stream: key,
                    bytes: 0,
                    stall: None,
                });
                self.windows.len() - 1
            }
        };
        let w = &mut self.windows[i];
        w.bytes = w.bytes.saturating_add(u64::from(len));
        if w.stall.is_none() && w.bytes >= self.cfg.after_bytes {
            w.stall = Some((now, now + self.cfg.stall));
        }
    }

    /// A `WINDOW_UPDATE` for `stream` (0: the connection) arrived at `now`: `Some(end)` if it
    /// is withheld until `end`, `None` if it leaves now.
    pub fn on_window_update(&self, stream: u32, now: Instant) -> Option<Instant> {
        let w = self.windows.iter().find(|w| w.stream == stream)?;
        match w.stall {
            Some((start, end)) if start <= now && now < end => Some(end),
            _ => None,
        }
    }

    /// `stream` ended (its DATA ended, or it was reset): its entry goes (the connection's
    /// stays).
    pub fn on_stream_end(&mut self, stream: u32) {
        if stream != 0 {
            self.windows.retain(|w| w.stream != stream);
        }
    }

    /// Entries kept (for the memory bound).
    pub fn tracked(&self) -> usize {
        self.windows.len()
    }
}

impl KindConfig for FlowStallConfig {
    const KIND: &'static str = "flow_stall";

    fn make(&self, common: Common, _now: Instant) -> Box<dyn H2Fault> {
        Box::new(FlowStallFault {
            state: FlowStall::new(*self),
            data: common.direction,
        })
    }
}

/// `flow_stall` on the relay: [`FlowStall`] fed the DATA of its direction and the
/// `WINDOW_UPDATE`s that travel the other way.
#[derive(Debug)]
struct FlowStallFault {
    state: FlowStall,
    /// The direction of the DATA whose credit is withheld.
    data: Direction,
}

impl H2Fault for FlowStallFault {
    fn kind(&self) -> &'static str {
        FlowStallConfig::KIND
    }

    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        facts: &StreamFacts<'_>,
        now: Instant,
        _rng: &mut ConnRng,
        actions: &mut H2Actions,
    ) {
        let h = frame.header;
        let ours = frame.direction == self.data;
        match h.kind {
            FrameType::Data if ours => {
                let sse = self.data == Direction::Downstream && facts.response_sse;
                self.state.on_data(h.stream, h.len, sse, now);
                if h.has(flags::END_STREAM) {
                    self.state.on_stream_end(h.stream);
                }
            }
            FrameType::Headers if ours && h.has(flags::END_STREAM) => {
                self.state.on_stream_end(h.stream);
            }
            FrameType::RstStream => self.state.on_stream_end(h.stream),
            FrameType::WindowUpdate if !ours => {
                if let Some(end) = self.state.on_window_update(h.stream, now) {
                    actions.verdict = Verdict::Hold(Hold::Until(end));
                }
            }
            _ => {}
        }
    }
}

/// `flow_stall` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "flow_stall",
    scope: Scope::Connection,
    summary: "HTTP/2: WINDOW_UPDATEs for the direction's DATA withheld for stall_ms, then released",
    keys: &[
        ("stall_ms", "how long credit is withheld (required)"),
        (
            "target",
            "\"stream\" (default: each matching stream once) or \"connection\"",
        ),
        (
            "stream",
            "\"sse\" (default) or \"all\"; only with target = \"stream\"",
        ),
        (
            "after_bytes",
            "DATA bytes of the stream (or connection) before the stall (default 0)",
        ),
    ],
    read: |r| h2_conn(r, FlowStallConfig::read),
    toxic: None,
};

#[cfg(test)]
#[path = "flow_stall_tests.rs"]
mod tests;
