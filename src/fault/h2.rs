//! HTTP/2 faults: pure decisions about the frames of one h2 connection, which the stream relay
//! (`proxy::h2`) carries out.
//!
//! Why a trait of its own: a byte fault ([`super::Fault`]) sees chunks of one direction and can
//! only cut the whole connection; an HTTP/2 fault must act on one stream (hold its response
//! `HEADERS`, refuse it, reset it) or on the connection's control frames (`GOAWAY`,
//! `WINDOW_UPDATE`) while every other stream keeps flowing. Like a byte fault, an h2 fault does
//! no I/O and is not async: it is shown every frame of both directions, in the order the relay
//! read them, with the facts of the frame's stream, and answers with [`H2Actions`].
//!
//! Invariants the relay keeps, whatever a fault asks:
//! - header blocks (`HEADERS`, `PUSH_PROMISE`, `CONTINUATION`) of one direction leave in the
//!   order they arrived, each exactly once (both endpoints' HPACK tables stay in step): a fault
//!   may hold one, never drop one, and a held one holds every later header block of its
//!   direction behind it;
//! - frames of one stream leave in the order they arrived; a held frame holds the later frames
//!   of its stream behind it;
//! - a dropped `DATA` frame is credited back to its sender with a connection-level
//!   `WINDOW_UPDATE`, so the connection window never shrinks.
//!
//! How a kind plugs in: its [`super::FaultFactory`] returns an [`H2FaultFactory`] from
//! [`super::FaultFactory::h2`]; a connection whose faults include one is handed to the relay
//! when it is found to speak h2 (and relayed as bytes by the pump otherwise).

use tokio::time::Instant;

use super::ConnRng;
use crate::vocab::{CutAction, Direction, StreamInfo};
use crate::wire::h2::{ErrorCode, FrameHeader};

/// One whole frame as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct FrameView<'a> {
    /// Where it travels: `Upstream` = sent by the client, `Downstream` = sent by the server.
    pub direction: Direction,
    /// Its parsed header.
    pub header: FrameHeader,
    /// Its payload (padding included, exactly as on the wire).
    pub payload: &'a [u8],
}

/// What the relay knows about the connection and the frame's stream when a fault decides.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamFacts<'a> {
    /// The request facts of the frame's stream, once the observer read its request `HEADERS`
    /// (`None` on stream 0, or without an h2 observer).
    pub info: Option<&'a StreamInfo>,
    /// Streams the client opened that neither side has ended yet (the frame's own included
    /// when it opens one).
    pub open_streams: usize,
    /// The highest stream id the client has opened on the connection (0: none yet).
    pub last_client_stream: u32,
    /// The server already sent `DATA` on the frame's stream.
    pub response_data_seen: bool,
    /// The frame's stream has a `text/event-stream` response: set from the response header
    /// block on (on that block's own `HEADERS` frame already, so `hold_headers` can decide on
    /// it), by the observer that decodes it; false without one.
    pub response_sse: bool,
    /// The relay already reset the frame's stream (its later `DATA` from the server is
    /// dropped and credited).
    pub reset_by_proxy: bool,
}

/// What happens to the frame a fault was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// Forward it (the default).
    #[default]
    Forward,
    /// Do not forward it. Only `DATA`, `WINDOW_UPDATE`, `PRIORITY`, `PING` (not an ACK) and
    /// unknown extension frames may be dropped; the relay forwards any other frame and logs
    /// that the drop was refused. A dropped `DATA` is credited back to its sender.
    Drop,
    /// Hold it until the release comes (see [`Hold`]), then forward it.
    Hold(Hold),
}

/// When a held frame leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// At this time.
    Until(Instant),
    /// Just before the first `DATA` frame of the held frame's stream in the same direction
    /// (a buffering intermediary's response `HEADERS`), or at `deadline`, whichever is first
    /// (`None`: no deadline).
    FirstData { deadline: Option<Instant> },
}

/// A frame the relay writes on a fault's behalf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    /// `RST_STREAM(stream, code)` towards `to` (`Downstream` = to the client). A stream reset
    /// towards the client has its later server `DATA` dropped and credited.
    RstStream {
        to: Direction,
        stream: u32,
        code: ErrorCode,
    },
    /// `GOAWAY(last_stream, code)` towards `to`.
    GoAway {
        to: Direction,
        last_stream: u32,
        code: ErrorCode,
    },
}

/// What one call of a fault asks for; the relay clears it before each call.
#[derive(Debug, Default)]
pub struct H2Actions {
    /// The frame's fate (ignored in [`H2Fault::on_timer`]).
    pub verdict: Verdict,
    /// Frames to write, in this order, after the frame (or in its place when it is dropped or
    /// held).
    pub inject: Vec<Inject>,
    /// Close the whole connection at this time with this action, after every frame queued
    /// before then has been written (the earliest request wins).
    pub close: Option<(Instant, CutAction)>,
}

impl H2Actions {
    /// Empties the actions, keeping their allocation.
    pub fn clear(&mut self) {
        self.verdict = Verdict::Forward;
        self.inject.clear();
        self.close = None;
    }

    /// Asks to close the connection at `at` (the earliest request of a call wins).
    pub fn close_at(&mut self, at: Instant, action: CutAction) {
        if self.close.is_none_or(|(t, _)| at < t) {
            self.close = Some((at, action));
        }
    }
}

/// One HTTP/2 fault instance on one connection (both directions).
pub trait H2Fault: Send {
    /// The kind's name as in profiles (`goaway`, `hold_headers`, …).
    fn kind(&self) -> &'static str;

    /// Decides on one frame. Called for every frame of both directions, in the order the relay
    /// read them, before it is forwarded; `now` is when it was read.
    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        facts: &StreamFacts<'_>,
        now: Instant,
        rng: &mut ConnRng,
        actions: &mut H2Actions,
    );

    /// The next time the fault wants [`H2Fault::on_timer`] called even if no frame arrives.
    fn next_timer(&self) -> Option<Instant> {
        None
    }

    /// Its timer came due at `now` (the verdict is ignored; injections and close apply).
    fn on_timer(&mut self, now: Instant, rng: &mut ConnRng, actions: &mut H2Actions) {
        let _ = (now, rng, actions);
    }
}

/// Makes an [`H2Fault`] for each connection handed to the stream relay.
pub trait H2FaultFactory: Send + Sync {
    /// A new instance for one connection, or `None` when it does not fire there (the
    /// probability draw, from the connection's RNG).
    fn instantiate_h2(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn H2Fault>>;
}

/// The scope of a cut a positioned fault (`sse_cut`) decides on an HTTP/2 connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CutScope {
    /// The stream the cut falls in ends (`RST_STREAM` or `END_STREAM` written by the proxy);
    /// the connection and its other streams live on.
    #[default]
    Stream,
    /// The whole TCP connection ends, as on HTTP/1.1.
    Connection,
}

impl CutScope {
    /// The names `scope` accepts.
    pub const NAMES: [&'static str; 2] = ["stream", "connection"];
}

/// How a positioned byte fault takes part on an HTTP/2 connection carried by the stream relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyCut {
    /// What its cuts end.
    pub scope: CutScope,
    /// The code of the `RST_STREAM` a stream-scope `reset` writes to the client.
    pub client_code: ErrorCode,
}
