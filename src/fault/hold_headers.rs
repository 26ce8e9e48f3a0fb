//! `hold_headers`: a buffering HTTP/2 intermediary that does not forward a response's `HEADERS`
//! until the response's first `DATA` frame (or for a fixed time) — the hop that leaves a
//! headers-only SSE response, one whose server waits for its first event, hanging at the client.
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: the header
//! block (HEADERS + CONTINUATION) that starts a response on a matching stream (every stream, or
//! with `only_sse = true`, the default, those whose response is `text/event-stream`) is held
//! back; it leaves, unchanged, immediately before the stream's first `DATA` frame
//! (`until = "first-data"`, default), or `hold_ms` after it arrived (`until = "time"`), or when
//! the stream ends without data (`END_STREAM` on the headers, or the server's `RST_STREAM`). With
//! `until = "first-data"`, `hold_ms` is optional and caps the hold. `DATA` of a stream whose
//! header block is still held waits behind it.
//!
//! HPACK: the header blocks of one direction must reach the peer in the order they were encoded
//! (each may change the decoder's dynamic table). So while a block is held, every later header
//! block of that direction waits behind it (trailers and the responses of other streams too),
//! and leaves as soon as every block before it has left; `DATA` of streams whose headers already
//! left keeps flowing. Bytes are never altered or dropped; only their departure moves.
//!
//! Profile keys: `until` (`"first-data"` default, or `"time"`), `hold_ms` (required with
//! `"time"`), `only_sse` (default true), plus `probability`.
//!
//! The decision is [`HoldHeaders`], a pure state machine over (header block, DATA, stream end,
//! clock) → which blocks leave, in order.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use super::keys::{FaultConfigError, KeyReader};

/// When a held header block leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldUntil {
    /// Just before the stream's first DATA frame; `Some(cap)` also releases it `cap` after it
    /// arrived, whichever comes first.
    FirstData(Option<Duration>),
    /// This long after it arrived.
    Time(Duration),
}

/// Configuration of `hold_headers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldHeadersConfig {
    /// When a held block leaves.
    pub until: HoldUntil,
    /// Only responses whose content type is `text/event-stream`.
    pub only_sse: bool,
}

impl HoldHeadersConfig {
    /// Reads `until`, `hold_ms` and `only_sse`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let until = r.choice("until", &["first-data", "time"])?;
        let hold = r.millis("hold_ms")?;
        let until = match (until, hold) {
            (Some("time"), Some(h)) => HoldUntil::Time(h),
            (Some("time"), None) => {
                return Err(r.invalid(
                    "hold_ms",
                    "hold_headers with until = \"time\" needs 'hold_ms' (how long each response's headers are held)",
                ));
            }
            (_, h) => HoldUntil::FirstData(h),
        };
        let only_sse = match r.raw("only_sse") {
            None => true,
            Some(p) => match p.value {
                toml::Value::Boolean(b) => b,
                ref v => {
                    return Err(FaultConfigError::at_value(
                        p,
                        format!(
                            "only_sse must be true or false, got {}",
                            super::keys::type_name(v)
                        ),
                    ));
                }
            },
        };
        Ok(HoldHeadersConfig { until, only_sse })
    }
}

/// What happens to a frame the fault was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldVerdict {
    /// It leaves now (after any blocks released by the same event).
    Forward,
    /// It waits: behind the stream's own held header block (a DATA frame or the end of a
    /// stream), or in the queue of header blocks (a header block). It leaves when
    /// [`Released`] names the stream's block.
    Wait,
}

/// A header block the fault released: the relay writes it, then every frame of that stream it
/// made wait behind it, in arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// The stream whose block leaves.
    pub stream: u32,
}

/// Why a queued block waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Only for the blocks before it (HPACK order).
    Order,
    /// Held by the fault until its condition; `deadline` is the time release, if any.
    Held { deadline: Option<Instant> },
    /// Its condition was met; it leaves when it reaches the head of the queue.
    Ready,
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    stream: u32,
    gate: Gate,
}

/// One connection's `hold_headers` (response direction): which header blocks wait and when
/// they leave. Memory: one small entry per waiting block (at most one per open stream plus its
/// trailers).
#[derive(Debug)]
pub struct HoldHeaders {
    cfg: HoldHeadersConfig,
    queue: VecDeque<Queued>,
}

impl HoldHeaders {
    /// The fault of one connection.
    pub fn new(cfg: HoldHeadersConfig) -> Self {
        HoldHeaders {
            cfg,
            queue: VecDeque::new(),
        }
    }

    /// A complete response-direction header block on `stream` arrived at `now`. `first` is
    /// true if and only if it starts the stream's response (not trailers); `sse` if its content
    /// type is `text/event-stream`; `end_stream` if it ends the stream (no DATA will follow).
    pub fn on_header_block(
        &mut self,
        stream: u32,
        first: bool,
        sse: bool,
        end_stream: bool,
        now: Instant,
    ) -> HoldVerdict {
        let target = first && !end_stream && (sse || !self.cfg.only_sse);
        let gate = if target {
            let deadline = match self.cfg.until {
                HoldUntil::FirstData(cap) => cap.map(|c| now + c),
                HoldUntil::Time(h) => Some(now + h),
            };
            if deadline.is_some_and(|d| d <= now) {
                Gate::Order
            } else {
                Gate::Held { deadline }
            }
        } else {
            Gate::Order
        };
        if gate == Gate::Order && self.queue.is_empty() {
            return HoldVerdict::Forward;
        }
        self.queue.push_back(Queued { stream, gate });
        HoldVerdict::Wait
    }

    /// A DATA frame of `stream` arrived at `now`: whether it waits, and (in `out`) the blocks
    /// released first, in order.
    pub fn on_data(&mut self, stream: u32, now: Instant, out: &mut Vec<Released>) -> HoldVerdict {
        self.meet(stream, matches!(self.cfg.until, HoldUntil::FirstData(_)));
        self.on_timer(now, out);
        self.verdict(stream)
    }

    /// `stream` ended without (more) DATA: the server's `RST_STREAM` for it arrived. Its held
    /// block is released (a buffering hop flushes at the end of a body); the reset waits if the
    /// block still waits for blocks before it.
    pub fn on_stream_end(
        &mut self,
        stream: u32,
        now: Instant,
        out: &mut Vec<Released>,
    ) -> HoldVerdict {
        self.meet(stream, true);
        self.on_timer(now, out);
        self.verdict(stream)
    }

    /// The next time a held block's deadline passes.
    pub fn next_timer(&self) -> Option<Instant> {
        self.queue
            .iter()
            .filter_map(|q| match q.gate {
                Gate::Held { deadline } => deadline,
                _ => None,
            })
            .min()
    }

    /// The clock reached `now`: releases, in order, every block at the head of the queue that
    /// may leave.
    pub fn on_timer(&mut self, now: Instant, out: &mut Vec<Released>) {
        for q in &mut self.queue {
            if let Gate::Held { deadline: Some(d) } = q.gate
                && d <= now
            {
                q.gate = Gate::Ready;
            }
        }
        while let Some(head) = self.queue.front() {
            if matches!(head.gate, Gate::Held { .. }) {
                break;
            }
            out.push(Released {
                stream: head.stream,
            });
            self.queue.pop_front();
        }
    }

    /// Whether any header block waits.
    pub fn holding(&self) -> bool {
        !self.queue.is_empty()
    }

    fn meet(&mut self, stream: u32, condition: bool) {
        if !condition {
            return;
        }
        for q in self.queue.iter_mut().filter(|q| q.stream == stream) {
            if matches!(q.gate, Gate::Held { .. }) {
                q.gate = Gate::Ready;
            }
        }
    }

    fn verdict(&self, stream: u32) -> HoldVerdict {
        if self.queue.iter().any(|q| q.stream == stream) {
            HoldVerdict::Wait
        } else {
            HoldVerdict::Forward
        }
    }
}

#[cfg(test)]
#[path = "hold_headers_tests.rs"]
mod tests;
