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
//! above that id is never started at the server: the client was told it was not processed. With
//! `code = "no_error"` the TCP connection closes `drain_ms` after the GOAWAY (streams in flight
//! may finish meanwhile); with any other code it closes right after the GOAWAY. The fault fires
//! at most once per connection.
//!
//! Profile keys: exactly one of `after_ms` or `after_streams` (>= 1); `to` (`"client"` default,
//! `"server"`, `"both"`); `code` (an error code name of [`ErrorCode::NAMED`], default
//! `"no_error"`); `drain_ms` (default 1000, only with `no_error`); plus `probability`.
//!
//! The decision is [`Goaway`], a pure state machine over (new stream, clock) → actions.

use std::time::Duration;

use tokio::time::Instant;

use super::keys::{FaultConfigError, KeyReader, quoted};
use crate::vocab::Direction;
use crate::wire::h2::ErrorCode;

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
    /// Close the TCP connection (both sides; streams still open are cut).
    Close,
}

/// Whether a new client stream reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewStream {
    /// Forward it.
    Forward,
    /// Never start it at the server: the client was told (by GOAWAY) it was not processed.
    Unprocessed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for the trigger.
    Armed,
    /// GOAWAY sent; the connection closes at `close_at`. `last` is the last stream id told to
    /// the client (`None`: no GOAWAY went to the client).
    Draining {
        close_at: Instant,
        last: Option<u32>,
    },
    /// Closed (or told to close).
    Done { last: Option<u32> },
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
    state: State,
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
            state: State::Armed,
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
        if let State::Draining { last: Some(l), .. } | State::Done { last: Some(l) } = self.state
            && id > l
        {
            return NewStream::Unprocessed;
        }
        self.highest_client = self.highest_client.max(id);
        self.streams += 1;
        if self.state == State::Armed
            && matches!(self.cfg.trigger, GoawayTrigger::Streams(n) if self.streams >= n)
        {
            self.fire(now, out);
        }
        NewStream::Forward
    }

    /// The server pushed stream `id` (a `PUSH_PROMISE` forwarded to the client).
    pub fn on_push_stream(&mut self, id: u32) {
        self.highest_push = self.highest_push.max(id);
    }

    /// The next time [`Goaway::on_timer`] has something to do.
    pub fn next_timer(&self) -> Option<Instant> {
        match (self.state, self.cfg.trigger) {
            (State::Armed, GoawayTrigger::After(after)) => Some(self.opened + after),
            (State::Draining { close_at, .. }, _) => Some(close_at),
            _ => None,
        }
    }

    /// The clock reached `now`: the actions due.
    pub fn on_timer(&mut self, now: Instant, out: &mut Vec<GoawayAction>) {
        if let (State::Armed, GoawayTrigger::After(after)) = (self.state, self.cfg.trigger)
            && now >= self.opened + after
        {
            self.fire(now, out);
        }
        if let State::Draining { close_at, last } = self.state
            && now >= close_at
        {
            self.state = State::Done { last };
            out.push(GoawayAction::Close);
        }
    }

    /// Whether the fault has fired (the GOAWAY went out).
    pub fn fired(&self) -> bool {
        self.state != State::Armed
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
        if code == ErrorCode::NO_ERROR {
            self.state = State::Draining {
                close_at: now + self.cfg.drain,
                last,
            };
        } else {
            self.state = State::Done { last };
            out.push(GoawayAction::Close);
        }
    }
}

#[cfg(test)]
#[path = "goaway_tests.rs"]
mod tests;
