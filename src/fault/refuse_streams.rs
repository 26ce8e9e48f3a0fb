//! `refuse_streams`: an HTTP/2 server or gateway at its concurrency limit, which refuses new
//! streams with `RST_STREAM(REFUSED_STREAM)` — "not processed, safe to retry".
//!
//! Observable effect on the wire, on an h2 connection the stream relay carries: while
//! `max_concurrent` client streams are open (open or half-closed: not yet ended in both
//! directions nor reset), a new client stream is answered with `RST_STREAM(id, REFUSED_STREAM)`
//! to the client, and the server is told to abandon it: HPACK forbids dropping a header block
//! (the server's decoder table would fall out of step with the client's encoder), so the
//! stream's header block still reaches the server, immediately followed by
//! `RST_STREAM(id, CANCEL)`; the client's later `DATA` on it is dropped (and credited back by
//! the relay), the server's too. A server may have begun the request in that instant, and one
//! that answers before it reads the CANCEL (Go's `net/http` server, at times) has its response
//! HEADERS reach the client after the `REFUSED_STREAM` — they cannot be dropped either, for
//! the client's HPACK table — where a real refusal sends none: Go's `net/http` client then
//! returns that response and fails reading its body with the refusal, instead of retrying the
//! stream itself (`tests/h2/kind_refuse.rs`). Refused streams do not count as open. A stream
//! that closes frees its place for the next one.
//!
//! Never before the server's connection preface: the client must get the server's `SETTINGS`
//! as the first frame of the connection (RFC 9113 §3.4); Node and Go end the connection with
//! `PROTOCOL_ERROR` when an `RST_STREAM` comes first. A client that opens several streams at
//! once does so before the server's `SETTINGS` can arrive, so the refusals of those streams
//! wait for it (the server is told at once) and follow it, in order.
//!
//! Profile keys: `max_concurrent` (required; 0 refuses every stream), plus `probability`
//! (`direction` may only be `"downstream"`, the default).
//!
//! The decision is [`RefuseStreams`], a pure state machine over (new stream, END_STREAM,
//! RST_STREAM) → forward or refuse; the [`H2Fault`] below feeds it the relay's frames.

use tokio::time::Instant;

use super::ConnRng;
use super::common::Common;
use super::h2::{FrameView, H2Actions, H2Fault, StreamFacts, Verdict};
use super::h2_kind::{
    H2KindConfig as KindConfig, abandon_at_server, downstream_only, h2_conn, refused_to_client,
};
use super::keys::{FaultConfigError, KeyReader};
use super::kind::{KindInfo, Scope};
use crate::vocab::Direction;
use crate::wire::h2::FrameType;
use crate::wire::h2::frame::flags;

/// Configuration of `refuse_streams`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefuseStreamsConfig {
    /// Open client streams allowed at once.
    pub max_concurrent: u32,
}

impl RefuseStreamsConfig {
    /// Reads `max_concurrent`.
    pub fn read(r: &mut KeyReader<'_>) -> Result<Self, FaultConfigError> {
        let n = r
            .u64("max_concurrent", "open streams")?
            .ok_or_else(|| r.missing("max_concurrent"))?;
        let max_concurrent = u32::try_from(n).map_err(|_| {
            r.invalid(
                "max_concurrent",
                &format!("max_concurrent must be at most {}, got {n}", u32::MAX),
            )
        })?;
        Ok(RefuseStreamsConfig { max_concurrent })
    }
}

/// What happens to a new client stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It reaches the server.
    Forward,
    /// `RST_STREAM(id, REFUSED_STREAM)` to the client; never started at the server.
    Refuse,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    id: u32,
    /// The client ended its side (END_STREAM upstream).
    client_done: bool,
    /// The server ended its side (END_STREAM downstream).
    server_done: bool,
}

/// One connection's `refuse_streams`. Memory: one entry per open admitted stream, at most
/// `max_concurrent`.
#[derive(Debug)]
pub struct RefuseStreams {
    cfg: RefuseStreamsConfig,
    open: Vec<Open>,
    refused: u64,
}

impl RefuseStreams {
    /// The fault of one connection.
    pub fn new(cfg: RefuseStreamsConfig) -> Self {
        RefuseStreams {
            cfg,
            open: Vec::new(),
            refused: 0,
        }
    }

    /// The client opened stream `id` (its first `HEADERS`); `end_stream` if that block ends
    /// the client's side.
    pub fn on_client_stream(&mut self, id: u32, end_stream: bool) -> Admission {
        if self.open.len() >= self.cfg.max_concurrent as usize {
            self.refused += 1;
            return Admission::Refuse;
        }
        self.open.push(Open {
            id,
            client_done: end_stream,
            server_done: false,
        });
        Admission::Forward
    }

    /// `END_STREAM` on stream `id` travelled in `direction` (Upstream: the client's side ended).
    pub fn on_end_stream(&mut self, id: u32, direction: Direction) {
        if let Some(o) = self.open.iter_mut().find(|o| o.id == id) {
            match direction {
                Direction::Upstream => o.client_done = true,
                Direction::Downstream => o.server_done = true,
            }
        }
        self.open.retain(|o| !(o.client_done && o.server_done));
    }

    /// Stream `id` was reset (by either end or by the proxy).
    pub fn on_reset(&mut self, id: u32) {
        self.open.retain(|o| o.id != id);
    }

    /// Client streams open now.
    pub fn open(&self) -> usize {
        self.open.len()
    }

    /// Streams refused so far on this connection.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

impl KindConfig for RefuseStreamsConfig {
    const KIND: &'static str = "refuse_streams";

    fn make(&self, _common: Common, _now: Instant) -> Box<dyn H2Fault> {
        Box::new(RefuseFault {
            state: RefuseStreams::new(*self),
            seen: 0,
            refused: [0; RECENT],
            next: 0,
            preface: false,
            waiting: Vec::new(),
        })
    }
}

/// Refused stream ids remembered to drop the client's `DATA` still in flight on them.
const RECENT: usize = 16;

/// Refusals kept waiting for the server's preface, at most: past it they go at once (memory
/// never follows a client that opens streams without end before the server speaks).
const WAITING_CAP: usize = 256;

/// `refuse_streams` on the relay.
#[derive(Debug)]
struct RefuseFault {
    state: RefuseStreams,
    /// The highest client stream id seen: a later `HEADERS` at or below it is trailers.
    seen: u32,
    /// The most recently refused stream ids (0: none), a ring.
    refused: [u32; RECENT],
    next: usize,
    /// The server's first `SETTINGS` (its connection preface) reached the client.
    preface: bool,
    /// Streams refused before it, whose `REFUSED_STREAM` waits for it.
    waiting: Vec<u32>,
}

impl H2Fault for RefuseFault {
    fn kind(&self) -> &'static str {
        RefuseStreamsConfig::KIND
    }

    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        _facts: &StreamFacts<'_>,
        _now: Instant,
        _rng: &mut ConnRng,
        actions: &mut H2Actions,
    ) {
        let h = frame.header;
        let id = h.stream;
        let end = h.has(flags::END_STREAM);
        match (h.kind, frame.direction) {
            (FrameType::Headers, Direction::Upstream) if id % 2 == 1 && id > self.seen => {
                self.seen = id;
                if self.state.on_client_stream(id, end) == Admission::Refuse {
                    abandon_at_server(id, actions);
                    if self.preface || self.waiting.len() >= WAITING_CAP {
                        refused_to_client(id, actions);
                    } else {
                        self.waiting.push(id);
                    }
                    self.refused[self.next] = id;
                    self.next = (self.next + 1) % RECENT;
                }
            }
            (FrameType::Data, Direction::Upstream) if id != 0 && self.refused.contains(&id) => {
                actions.verdict = Verdict::Drop;
            }
            (FrameType::Settings, Direction::Downstream) if !self.preface && !h.has(flags::ACK) => {
                self.preface = true;
                for id in self.waiting.drain(..) {
                    refused_to_client(id, actions);
                }
            }
            (FrameType::Data | FrameType::Headers, dir) if end => self.state.on_end_stream(id, dir),
            (FrameType::RstStream, _) => self.state.on_reset(id),
            _ => {}
        }
    }
}

/// `refuse_streams` in the registry (no Toxiproxy counterpart).
pub const KIND: KindInfo = KindInfo {
    name: "refuse_streams",
    scope: Scope::Connection,
    summary: "HTTP/2: new streams past max_concurrent open ones get RST_STREAM(REFUSED_STREAM)",
    keys: &[(
        "max_concurrent",
        "client streams open at once; more are refused (required)",
    )],
    read: |r| {
        h2_conn(r, |r| {
            downstream_only(r, "refuse_streams acts on the client's new streams")?;
            RefuseStreamsConfig::read(r)
        })
    },
    toxic: None,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::keys::FaultDef;

    fn read(v: Option<toml::Value>) -> Result<RefuseStreamsConfig, FaultConfigError> {
        let def = FaultDef::from_pairs(v.map(|v| ("max_concurrent", v)));
        let mut r = KeyReader::new(&def, "refuse_streams");
        RefuseStreamsConfig::read(&mut r)
    }

    #[test]
    fn max_concurrent_is_required_and_a_non_negative_integer() {
        assert_eq!(
            read(Some(toml::Value::Integer(2))).expect("valid"),
            RefuseStreamsConfig { max_concurrent: 2 }
        );
        let e = read(None).expect_err("missing");
        assert!(
            e.message.contains("missing required key 'max_concurrent'"),
            "{e:?}"
        );
        let e = read(Some(toml::Value::Integer(-1))).expect_err("negative");
        assert!(e.message.contains("non-negative integer"), "{e:?}");
        let e = read(Some(toml::Value::Integer(1 << 40))).expect_err("too big");
        assert!(e.message.contains("at most"), "{e:?}");
    }

    #[test]
    fn the_stream_past_the_limit_is_refused_and_a_closed_one_frees_its_place() {
        let mut f = RefuseStreams::new(RefuseStreamsConfig { max_concurrent: 2 });
        assert_eq!(f.on_client_stream(1, true), Admission::Forward);
        assert_eq!(f.on_client_stream(3, false), Admission::Forward);
        assert_eq!(f.on_client_stream(5, true), Admission::Refuse);
        assert_eq!(f.open(), 2, "a refused stream does not count");
        f.on_end_stream(1, Direction::Downstream);
        assert_eq!(f.open(), 1, "stream 1 ended both ways");
        assert_eq!(f.on_client_stream(7, true), Admission::Forward);
        assert_eq!(f.on_client_stream(9, true), Admission::Refuse);
        f.on_end_stream(3, Direction::Downstream);
        assert_eq!(
            f.on_client_stream(11, true),
            Admission::Refuse,
            "half-closed (the client has not ended stream 3) still counts"
        );
        f.on_reset(3);
        assert_eq!(f.on_client_stream(13, true), Admission::Forward);
        assert_eq!(f.refused(), 3);
    }

    fn frame(kind: FrameType, flags: u8, stream: u32) -> FrameView<'static> {
        FrameView {
            direction: Direction::Upstream,
            header: crate::wire::h2::FrameHeader {
                len: 1,
                kind,
                flags,
                stream,
            },
            payload: &[0x82],
        }
    }

    #[test]
    fn on_the_relay_the_refused_stream_gets_refused_stream_and_its_data_is_dropped() {
        let t = Instant::now();
        let mut f = RefuseStreamsConfig { max_concurrent: 1 }.make(Common::default(), t);
        let mut rng = crate::fault::conn_rng(1, "p", 0);
        let mut a = H2Actions::default();
        let facts = StreamFacts::default();
        let headers = flags::END_HEADERS;
        let mut settings = frame(FrameType::Settings, 0, 0);
        settings.direction = Direction::Downstream;
        f.on_frame(&settings, &facts, t, &mut rng, &mut a);
        f.on_frame(
            &frame(FrameType::Headers, headers, 1),
            &facts,
            t,
            &mut rng,
            &mut a,
        );
        assert!(a.inject.is_empty() && a.verdict == Verdict::Forward);
        f.on_frame(
            &frame(FrameType::Headers, headers, 3),
            &facts,
            t,
            &mut rng,
            &mut a,
        );
        assert_eq!(
            a.verdict,
            Verdict::Forward,
            "a header block is never dropped"
        );
        assert_eq!(
            a.inject,
            [
                crate::fault::h2::Inject::RstStream {
                    to: Direction::Upstream,
                    stream: 3,
                    code: crate::wire::h2::ErrorCode::CANCEL
                },
                crate::fault::h2::Inject::RstStream {
                    to: Direction::Downstream,
                    stream: 3,
                    code: crate::wire::h2::ErrorCode::REFUSED_STREAM
                }
            ]
        );
        a.clear();
        f.on_frame(
            &frame(FrameType::Data, flags::END_STREAM, 3),
            &facts,
            t,
            &mut rng,
            &mut a,
        );
        assert_eq!(a.verdict, Verdict::Drop, "the refused stream's body");
        a.clear();
        f.on_frame(&frame(FrameType::Data, 0, 1), &facts, t, &mut rng, &mut a);
        assert_eq!(a.verdict, Verdict::Forward, "the admitted stream's body");
        f.on_frame(
            &frame(FrameType::RstStream, 0, 1),
            &facts,
            t,
            &mut rng,
            &mut a,
        );
        f.on_frame(
            &frame(FrameType::Headers, headers, 5),
            &facts,
            t,
            &mut rng,
            &mut a,
        );
        assert!(a.inject.is_empty(), "stream 1's reset freed its place");
    }

    #[test]
    fn a_refusal_before_the_servers_settings_reaches_the_client_right_after_them() {
        let t = Instant::now();
        let mut f = RefuseStreamsConfig { max_concurrent: 1 }.make(Common::default(), t);
        let mut rng = crate::fault::conn_rng(1, "p", 0);
        let mut a = H2Actions::default();
        let facts = StreamFacts::default();
        let rst = |to, code| crate::fault::h2::Inject::RstStream {
            to,
            stream: 3,
            code,
        };
        for id in [1, 3] {
            f.on_frame(
                &frame(FrameType::Headers, flags::END_HEADERS, id),
                &facts,
                t,
                &mut rng,
                &mut a,
            );
        }
        assert_eq!(
            a.inject,
            [rst(Direction::Upstream, crate::wire::h2::ErrorCode::CANCEL)],
            "the server is told at once, the client not before the server's preface"
        );
        a.clear();
        let mut ack = frame(FrameType::Settings, flags::ACK, 0);
        ack.direction = Direction::Downstream;
        f.on_frame(&ack, &facts, t, &mut rng, &mut a);
        assert!(a.inject.is_empty(), "an ACK is not the preface");
        let mut settings = frame(FrameType::Settings, 0, 0);
        settings.direction = Direction::Downstream;
        f.on_frame(&settings, &facts, t, &mut rng, &mut a);
        assert_eq!(
            a.inject,
            [rst(
                Direction::Downstream,
                crate::wire::h2::ErrorCode::REFUSED_STREAM
            )],
            "right after the server's SETTINGS"
        );
        a.clear();
        f.on_frame(&settings, &facts, t, &mut rng, &mut a);
        assert!(a.inject.is_empty(), "once");
    }

    #[test]
    fn zero_refuses_every_stream() {
        let mut f = RefuseStreams::new(RefuseStreamsConfig { max_concurrent: 0 });
        assert_eq!(f.on_client_stream(1, true), Admission::Refuse);
        assert_eq!(f.open(), 0);
    }
}
