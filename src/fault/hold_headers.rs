//! `hold_headers`: a buffering HTTP/2 intermediary that does not forward a response's `HEADERS`
//! until the response's first `DATA` frame (or for a fixed time) — the hop that leaves a
//! headers-only SSE response, one whose server waits for its first event, hanging at the client.
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: the header
//! block (HEADERS + CONTINUATION) that starts a response on a matching stream (every stream, or
//! with `only_sse = true`, the default, those whose response is `text/event-stream`) is held
//! back; it leaves, unchanged, immediately before the stream's first `DATA` frame
//! (`until = "first-data"`, default), or `hold_ms` after it arrived (`until = "time"`). A
//! block that ends the stream (`END_STREAM`: no body will follow) is not held. With
//! `until = "first-data"`, `hold_ms` is optional and caps the hold. Frames of the stream that
//! arrive while its header block is held wait behind it (so a server's `RST_STREAM` on a stream
//! that sent no `DATA` waits for the cap, or for the connection's end without one).
//!
//! HPACK: the header blocks of one direction must reach the peer in the order they were encoded
//! (each may change the decoder's dynamic table). So while a block is held, every later header
//! block of that direction waits behind it (trailers and the responses of other streams too),
//! and leaves as soon as every block before it has left; `DATA` of streams whose headers already
//! left keeps flowing. Bytes are never altered or dropped; only their departure moves.
//!
//! Profile keys: `until` (`"first-data"` default, or `"time"`), `hold_ms` (required with
//! `"time"`), `only_sse` (default true), plus `probability` (`direction` may only be
//! `"downstream"`, the default). Whether a response is `text/event-stream` comes from the h2
//! observer's decoding of its header block ([`StreamFacts::response_sse`]).
//!
//! The decision is [`decide`], a pure function of (response facts, clock) → hold or not; the
//! relay carries a hold out and keeps the HPACK order and each stream's frame order behind it.

use std::time::Duration;

use tokio::time::Instant;

use super::ConnRng;
use super::common::Common;
use super::h2::{FrameView, H2Actions, H2Fault, Hold, StreamFacts, Verdict};
use super::h2_kind::{H2KindConfig as KindConfig, downstream_only, h2_conn};
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope};
use crate::vocab::Direction;
use crate::wire::h2::FrameType;
use crate::wire::h2::frame::flags;

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

/// Whether a response header block is held, and until when: `Some` if and only if the block
/// starts a response (no `DATA` of the stream has passed yet), does not end the stream, and is
/// a target (`text/event-stream`, or any response without `only_sse`). `now` is when it arrived.
pub fn decide(
    cfg: &HoldHeadersConfig,
    sse: bool,
    data_seen: bool,
    end_stream: bool,
    now: Instant,
) -> Option<Hold> {
    if data_seen || end_stream || (cfg.only_sse && !sse) {
        return None;
    }
    Some(match cfg.until {
        HoldUntil::FirstData(cap) => Hold::FirstData {
            deadline: cap.map(|c| now + c),
        },
        HoldUntil::Time(h) => Hold::Until(now + h),
    })
}

impl KindConfig for HoldHeadersConfig {
    const KIND: &'static str = "hold_headers";

    fn make(&self, _common: Common, _now: Instant) -> Box<dyn H2Fault> {
        Box::new(HoldHeaders { cfg: *self })
    }
}

/// One connection's `hold_headers`: decides on each response `HEADERS` frame; the relay keeps
/// the HPACK order and releases a first-data hold before the stream's first `DATA`.
#[derive(Debug)]
pub struct HoldHeaders {
    cfg: HoldHeadersConfig,
}

impl H2Fault for HoldHeaders {
    fn kind(&self) -> &'static str {
        HoldHeadersConfig::KIND
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
        if frame.direction != Direction::Downstream
            || h.kind != FrameType::Headers
            || h.stream == 0
            || facts.reset_by_proxy
        {
            return;
        }
        let end_stream = h.has(flags::END_STREAM);
        if let Some(hold) = decide(
            &self.cfg,
            facts.response_sse,
            facts.response_data_seen,
            end_stream,
            now,
        ) {
            actions.verdict = Verdict::Hold(hold);
        }
    }
}

/// `hold_headers` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "hold_headers",
    scope: Scope::Connection,
    summary: "HTTP/2: a response's HEADERS held until its first DATA (or for hold_ms), later header blocks behind it",
    keys: &[
        ("until", "\"first-data\" (default) or \"time\""),
        (
            "hold_ms",
            "hold this long (required with \"time\"; a cap with \"first-data\")",
        ),
        (
            "only_sse",
            "only text/event-stream responses (default true)",
        ),
    ],
    read: |r| {
        h2_conn(r, |r| {
            downstream_only(r, "hold_headers acts on responses")?;
            HoldHeadersConfig::read(r)
        })
    },
    toxic: None,
};

#[cfg(test)]
#[path = "hold_headers_tests.rs"]
mod tests;
