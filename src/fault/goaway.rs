//! `goaway`: an HTTP/2 gateway that announces the end of a connection with `GOAWAY` — a
//! graceful `NO_ERROR` (an idle timeout, a rolling deploy) followed by the close after a drain
//! time, or an error code followed by the close at once.
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: when the trigger
//! fires (`after_ms` since the connection opened, or right after the `after_streams`-th new
//! stream was forwarded to the server), the proxy writes `GOAWAY(last_stream, code)` to the
//! client (`to = "client"`, default), to the server (`to = "server"`) or to both. The last stream
//! id told to the client is the highest client stream the proxy forwarded to the server (every
//! stream at or below it may complete); the one told to the server is the highest server-pushed
//! stream forwarded to the client (usually 0). After a GOAWAY to the client, a new client stream
//! above that id (opened before the GOAWAY reached the client) is not processed: its header
//! block still reaches the server, as HPACK requires, immediately followed by
//! `RST_STREAM(CANCEL)`, and the client gets `RST_STREAM(REFUSED_STREAM)` for it. With
//! `code = "no_error"` the TCP connection closes `drain_ms` after the GOAWAY (streams in flight
//! may finish meanwhile); with any other code it closes right after the GOAWAY. The fault fires
//! at most once per connection.
//!
//! Never before the server's connection preface: a client must get the server's `SETTINGS` as
//! the first frame of the connection (RFC 9113 §3.4), and every real client (Node, Go, Python
//! `h2`) ends the connection with `PROTOCOL_ERROR` when a `GOAWAY` comes first. A trigger that
//! falls due earlier (`after_streams = 1` fires on the first request, which a client sends
//! before the server's `SETTINGS` can arrive) waits for that `SETTINGS` and fires right after
//! it; the drain counts from then.
//!
//! Profile keys: exactly one of `after_ms` or `after_streams` (>= 1); `to` (`"client"` default,
//! `"server"`, `"both"`); `code` (an error code name of [`ErrorCode::NAMED`], default
//! `"no_error"`); `drain_ms` (default 1000, only with `no_error`); plus `probability`
//! (`direction` may only be `"downstream"`, the default).
//!
//! The decision is [`Goaway`], a pure state machine over (new stream, clock) → actions; the
//! [`H2Fault`] below feeds it the frames that open streams and turns its actions into the
//! relay's (`GOAWAY` injected, the close requested as a FIN at its time).

use std::time::Duration;

use tokio::time::Instant;

use super::ConnRng;
use super::common::Common;
use super::h2::{FrameView, H2Actions, H2Fault, Inject, StreamFacts};
use super::h2_kind::{H2KindConfig as KindConfig, downstream_only, h2_conn, refuse};
use super::keys::{FaultConfigError, KeyReader, quoted};
use super::kind::{KindInfo, Scope};
use crate::vocab::{CutAction, Direction};
use crate::wire::h2::frame::flags;
use crate::wire::h2::{ErrorCode, FrameHeader, FrameType};

/// Who receives the `GOAWAY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoawayTo {
    /// The client (a gateway closing toward its clients).
    Client,
    /// The server (a client-side intermediary going away).
    Server,
    /// Both ends.
    Both,
}

impl GoawayTo {
    fn client(self) -> bool {
        matches!(self, GoawayTo::Client | GoawayTo::Both)
    }

    fn server(self) -> bool {
        matches!(self, GoawayTo::Server | GoawayTo::Both)
    }
}

/// When a `goaway` fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoawayTrigger {
    /// This long after the connection opened.
    After(Duration),
    /// Right after the N-th new client stream was forwarded (N >= 1).
    Streams(u64),
}

/// Configuration of `goaway`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoawayConfig {
    /// Who receives it.
    pub to: GoawayTo,
    /// When it fires.
    pub trigger: GoawayTrigger,
    /// The error code it carries.
    pub code: ErrorCode,
    /// Time between a `NO_ERROR` GOAWAY and the close (zero for an error code).
    pub drain: Duration,
}

/// The default drain time of a graceful GOAWAY.
pub const DEFAULT_DRAIN: Duration = Duration::from_millis(1000);

/// The names `code` accepts.
pub fn code_names() -> Vec<&'static str> {
    ErrorCode::NAMED.iter().map(|(n, _)| *n).collect()
}

/// Reads an error-code key (`code`, …): one of [`ErrorCode::NAMED`]'s names.
pub fn read_code(
    r: &mut KeyReader<'_>,
    key: &'static str,
) -> Result<Option<ErrorCode>, FaultConfigError> {
    let Some((name, param)) = r.str(key)? else {
        return Ok(None);
    };
    ErrorCode::from_name(name).map(Some).ok_or_else(|| {
        FaultConfigError::at_value(
            param,
            format!(
                "{key} must be one of {}, got '{name}'",
                quoted(&code_names())
            ),
        )
    })
}

impl GoawayConfig {
    /// Reads `to`, `after_ms` | `after_streams`, `code` and `drain_ms`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let to = match r.choice("to", &["client", "server", "both"])? {
            Some("server") => GoawayTo::Server,
            Some("both") => GoawayTo::Both,
            _ => GoawayTo::Client,
        };
        let after = r.millis("after_ms")?.map(GoawayTrigger::After);
        let streams = match r.u64("after_streams", "new streams")? {
            Some(0) => {
                return Err(r.invalid(
                    "after_streams",
                    "after_streams must be at least 1 (use after_ms = 0 for a GOAWAY at once)",
                ));
            }
            n => n.map(GoawayTrigger::Streams),
        };
        let trigger = match (after, streams) {
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => {
                return Err(FaultConfigError::at_def(
                    r.def(),
                    None,
                    "goaway needs one of 'after_ms' or 'after_streams'",
                ));
            }
            (Some(_), Some(_)) => {
                return Err(super::reset::second_trigger(
                    r,
                    &["after_ms", "after_streams"],
                    "goaway takes exactly one of 'after_ms' or 'after_streams'",
                ));
            }
        };
        let code = read_code(r, "code")?.unwrap_or(ErrorCode::NO_ERROR);
        let drain = r.millis("drain_ms")?;
        if drain.is_some() && code != ErrorCode::NO_ERROR {
            return Err(r.invalid(
                "drain_ms",
                "drain_ms applies only to code = \"no_error\" (with an error code the connection closes right after the GOAWAY)",
            ));
        }
        let drain = match code {
            ErrorCode::NO_ERROR => drain.unwrap_or(DEFAULT_DRAIN),
            _ => Duration::ZERO,
        };
        Ok(GoawayConfig {
            to,
            trigger,
            code,
            drain,
        })
    }
}

/// What the relay does for a `goaway`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoawayAction {
    /// Write `GOAWAY(last_stream, code)` travelling in `direction` (Downstream = to the
    /// client).
    Send {
        /// Where the frame travels.
        direction: Direction,
        /// Its last stream id.
        last_stream: u32,
        /// Its error code.
        code: ErrorCode,
    },
    /// Close the TCP connection (both sides, with a FIN) at this time, once every frame queued
    /// before it has left; streams still open then are cut.
    CloseAt(Instant),
}

/// Whether a new client stream reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewStream {
    /// Forward it.
    Forward,
    /// Never start it at the server: the client was told (by GOAWAY) it was not processed.
    Unprocessed,
}

/// One connection's `goaway`: a pure function of (new streams, clock) → [`GoawayAction`]s.
#[derive(Debug)]
pub struct Goaway {
    cfg: GoawayConfig,
    opened: Instant,
    /// New client streams forwarded so far.
    streams: u64,
    /// The highest client stream forwarded to the server.
    highest_client: u32,
    /// The highest server-pushed stream forwarded to the client.
    highest_push: u32,
    /// `None` until it fires; then the last stream id told to the client (`Some(None)`: no
    /// GOAWAY went to the client).
    fired: Option<Option<u32>>,
    /// The server's connection preface (its first `SETTINGS`) was forwarded to the client.
    preface: bool,
    /// The trigger fell due before the server's preface: it fires right after it.
    due: bool,
}

impl Goaway {
    /// The fault of a connection opened at `opened`.
    pub fn new(cfg: GoawayConfig, opened: Instant) -> Self {
        Goaway {
            cfg,
            opened,
            streams: 0,
            highest_client: 0,
            highest_push: 0,
            fired: None,
            preface: false,
            due: false,
        }
    }

    /// The server's `SETTINGS` (not an ACK) was forwarded to the client at `now`: the first
    /// one is its connection preface, after which the fault may speak; a trigger already due
    /// fires now (its actions in `out` come right after that `SETTINGS`).
    pub fn on_server_settings(&mut self, now: Instant, out: &mut Vec<GoawayAction>) {
        if self.preface {
            return;
        }
        self.preface = true;
        if self.due {
            self.fire(now, out);
        }
    }

    /// The client opened stream `id` (its first `HEADERS`) at `now`: whether it reaches the
    /// server, and (in `out`) the actions its arrival triggers, which come after the stream's
    /// header block is forwarded.
    pub fn on_client_stream(
        &mut self,
        id: u32,
        now: Instant,
        out: &mut Vec<GoawayAction>,
    ) -> NewStream {
        if let Some(Some(last)) = self.fired
            && id > last
        {
            return NewStream::Unprocessed;
        }
        self.highest_client = self.highest_client.max(id);
        self.streams += 1;
        if matches!(self.cfg.trigger, GoawayTrigger::Streams(n) if self.streams >= n) {
            self.trigger(now, out);
        }
        NewStream::Forward
    }

    /// The server promised stream `id` (a `PUSH_PROMISE` forwarded to the client).
    pub fn on_push_stream(&mut self, id: u32) {
        self.highest_push = self.highest_push.max(id);
    }

    /// The next time [`Goaway::on_timer`] has something to do.
    pub fn next_timer(&self) -> Option<Instant> {
        match (self.fired, self.due, self.cfg.trigger) {
            (None, false, GoawayTrigger::After(after)) => Some(self.opened + after),
            _ => None,
        }
    }

    /// The clock reached `now`: the actions due.
    pub fn on_timer(&mut self, now: Instant, out: &mut Vec<GoawayAction>) {
        if self.next_timer().is_some_and(|t| now >= t) {
            self.trigger(now, out);
        }
    }

    /// The trigger fell due at `now`: fire, or wait for the server's preface.
    fn trigger(&mut self, now: Instant, out: &mut Vec<GoawayAction>) {
        if self.fired.is_some() {
            return;
        }
        if self.preface {
            self.fire(now, out);
        } else {
            self.due = true;
        }
    }

    /// Whether the fault has fired (the GOAWAY went out).
    pub fn fired(&self) -> bool {
        self.fired.is_some()
    }

    fn fire(&mut self, now: Instant, out: &mut Vec<GoawayAction>) {
        let code = self.cfg.code;
        let mut last = None;
        if self.cfg.to.client() {
            last = Some(self.highest_client);
            out.push(GoawayAction::Send {
                direction: Direction::Downstream,
                last_stream: self.highest_client,
                code,
            });
        }
        if self.cfg.to.server() {
            out.push(GoawayAction::Send {
                direction: Direction::Upstream,
                last_stream: self.highest_push,
                code,
            });
        }
        self.fired = Some(last);
        out.push(GoawayAction::CloseAt(now + self.cfg.drain));
    }
}

impl KindConfig for GoawayConfig {
    const KIND: &'static str = "goaway";

    fn make(&self, _common: Common, now: Instant) -> Box<dyn H2Fault> {
        Box::new(GoawayFault {
            state: Goaway::new(*self, now),
            seen: 0,
            out: Vec::new(),
        })
    }
}

/// `goaway` on the stream relay: [`Goaway`] fed the frames that open streams.
#[derive(Debug)]
struct GoawayFault {
    state: Goaway,
    /// The highest client stream id seen (forwarded or not): a later `HEADERS` at or below it
    /// is trailers, not a new stream.
    seen: u32,
    out: Vec<GoawayAction>,
}

impl GoawayFault {
    fn apply(&mut self, actions: &mut H2Actions) {
        for a in self.out.drain(..) {
            match a {
                GoawayAction::Send {
                    direction,
                    last_stream,
                    code,
                } => actions.inject.push(Inject::GoAway {
                    to: direction,
                    last_stream,
                    code,
                }),
                GoawayAction::CloseAt(at) => actions.close_at(at, CutAction::Fin),
            }
        }
    }
}

impl H2Fault for GoawayFault {
    fn kind(&self) -> &'static str {
        "goaway"
    }

    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        _facts: &StreamFacts<'_>,
        now: Instant,
        _rng: &mut ConnRng,
        actions: &mut H2Actions,
    ) {
        let h = frame.header;
        match (frame.direction, h.kind) {
            (Direction::Upstream, FrameType::Headers) if opens_client_stream(h.stream) => {
                if h.stream <= self.seen {
                    return;
                }
                self.seen = h.stream;
                let verdict = self.state.on_client_stream(h.stream, now, &mut self.out);
                if verdict == NewStream::Unprocessed {
                    refuse(h.stream, actions);
                }
            }
            (Direction::Downstream, FrameType::Settings) if !h.has(flags::ACK) => {
                self.state.on_server_settings(now, &mut self.out);
            }
            (Direction::Downstream, FrameType::PushPromise) => {
                if let Some(id) = promised_stream(&h, frame.payload) {
                    self.state.on_push_stream(id);
                }
            }
            _ => {}
        }
        self.apply(actions);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.state.next_timer()
    }

    fn on_timer(&mut self, now: Instant, _rng: &mut ConnRng, actions: &mut H2Actions) {
        self.state.on_timer(now, &mut self.out);
        self.apply(actions);
    }
}

/// Whether `id` is a client-initiated stream (odd, not 0).
fn opens_client_stream(id: u32) -> bool {
    id % 2 == 1
}

/// The promised stream id of a `PUSH_PROMISE` payload (after its pad length, if padded).
fn promised_stream(h: &FrameHeader, p: &[u8]) -> Option<u32> {
    let at = usize::from(h.has(flags::PADDED));
    let b: [u8; 4] = p.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_be_bytes(b) & 0x7fff_ffff)
}

/// `goaway` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "goaway",
    scope: Scope::Connection,
    summary: "HTTP/2: GOAWAY to the client/server after a time or N streams, then the close (drained for no_error)",
    keys: &[
        ("after_ms", "GOAWAY this long after the connection opened"),
        ("after_streams", "GOAWAY right after the N-th new stream"),
        ("to", "\"client\" (default), \"server\" or \"both\""),
        ("code", "error code name (default \"no_error\": graceful)"),
        (
            "drain_ms",
            "no_error only: close this long after the GOAWAY (default 1000)",
        ),
    ],
    read: |r| {
        h2_conn(r, |r| {
            downstream_only(
                r,
                "goaway acts on the whole connection; choose its receiver with 'to'",
            )?;
            GoawayConfig::read(r)
        })
    },
    toxic: None,
};

#[cfg(test)]
#[path = "goaway_tests.rs"]
mod tests;
