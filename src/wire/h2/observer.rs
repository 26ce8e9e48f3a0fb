//! The h2 observer on the pump's path ([`WireObserver`]), and the observer pairs the proxy
//! installs: h2 known from TLS ALPN ([`observer_pair_h2`]), or sniffed from the first bytes the
//! client sends ([`observer_pair_sniffed`]: the h2 preface → h2c, anything else → HTTP/1.1).
//!
//! Invariants:
//! - `observe` returns cut points only inside `DATA` bodies of SSE streams, each run's
//!   [`crate::wire::StreamSpan`] naming its stream; a cut there is a connection cut
//!   (`h2_stream: None`), described for the stream it fell in (`exchange` = stream id), as
//!   the client's h2 stack sees it: before the frame it fell in (an endpoint hands on nothing
//!   of an incomplete frame). Likewise a delivery that ends inside a frame releases nothing
//!   the frame produced until the frame is whole.
//! - Sniffing holds at most the 24 bytes of a preface prefix; once decided, the chosen
//!   observer sees every byte from raw offset 0, in the same reads, and the delivery reports
//!   made so far — in both directions: the server's bytes that come before the decision (an
//!   h2 server's `SETTINGS`, sent on accept) reach the h2 half as they come, nothing held.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use super::PREFACE;
use super::half::H2Half;
use super::reader::FrameReader;
use super::shared::Shared;
use crate::vocab::{Direction, WireProtocol};
use crate::wire::llm_routes::LlmRoutes;
use crate::wire::{ChunkPositions, CutPoint, ObservationSink, WireObserver};

/// One direction of an h2 connection as the pump sees it: the frame reader and the half.
pub struct H2Observer {
    half: H2Half,
    reader: FrameReader,
}

impl H2Observer {
    /// The half (for tests and the relay's view of the same state).
    pub fn half(&self) -> &H2Half {
        &self.half
    }
}

/// The two observers of h2 connection `conn` (`protocol`: [`WireProtocol::H2`] after ALPN
/// `h2`, [`WireProtocol::H2c`] with prior knowledge): `(upstream, downstream)`.
pub fn observer_pair_h2(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    routes: Arc<LlmRoutes>,
    protocol: WireProtocol,
) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
    let (up, down) = h2_pair(conn, sink, routes, protocol);
    (Box::new(up), Box::new(down))
}

/// The two h2 halves of connection `conn` as concrete types.
pub fn h2_pair(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    routes: Arc<LlmRoutes>,
    protocol: WireProtocol,
) -> (H2Observer, H2Observer) {
    let (up, down) = halves(conn, sink, routes, protocol);
    (
        H2Observer {
            half: up,
            reader: FrameReader::new(true),
        },
        H2Observer {
            half: down,
            reader: FrameReader::new(false),
        },
    )
}

/// The two halves of an h2 connection, sharing their stream table, for the stream relay: it
/// reads the client preface and then whole frames itself, and calls [`H2Half::preface`] and
/// [`H2Half::frame`]. `(upstream, downstream)`.
pub fn halves(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    routes: Arc<LlmRoutes>,
    protocol: WireProtocol,
) -> (H2Half, H2Half) {
    let shared = Arc::new(Shared::default());
    let up = H2Half::new(
        conn,
        Direction::Upstream,
        protocol,
        sink.clone(),
        shared.clone(),
        routes.clone(),
    );
    let down = H2Half::new(conn, Direction::Downstream, protocol, sink, shared, routes);
    (up, down)
}

impl WireObserver for H2Observer {
    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions> {
        let start = self.half.raw;
        self.half.raw += chunk.len() as u64;
        if self.half.is_opaque() {
            return None;
        }
        self.half.begin_view(start, chunk.len());
        let half = &mut self.half;
        if let Err(e) = self.reader.feed(chunk, &mut |ev| half.on_event(start, ev)) {
            half.fail(&e.to_string());
        }
        let p = &self.half.view.positions;
        (!p.runs.is_empty()).then_some(p)
    }

    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        self.cut_at(self.half.view.start + delivered as u64)
    }

    fn cut_at(&mut self, raw: u64) -> CutPoint {
        // A connection cut inside a frame: the client's h2 stack got nothing of that frame.
        self.half.cut_at(self.half.seen_at(raw))
    }

    fn eof(&mut self) {
        self.half.eof();
    }

    fn delivered_through(&mut self, raw: u64) {
        // Part of a frame written hands the client nothing of it yet.
        self.half.delivered_through(self.half.seen_at(raw));
    }

    fn held_bytes(&self) -> usize {
        self.half.held_bytes() + self.reader.held_bytes()
    }

    fn dropped(&mut self, start: u64, end: u64) {
        self.half.dropped(start, end);
    }

    fn is_opaque(&self) -> bool {
        self.half.is_opaque()
    }

    fn passed(&mut self, n: u64) {
        self.half.raw += n;
        let start = self.half.raw - n;
        self.half
            .view
            .restart(start, usize::try_from(n).unwrap_or(usize::MAX));
    }

    fn negotiated(&mut self, protocol: WireProtocol) {
        // An h2 connection over TLS is `H2` whatever else ALPN might have named.
        if protocol == WireProtocol::H2 {
            self.half.announce_as(protocol);
        }
    }
}

/// Decision of a sniffing pair.
const UNDECIDED: u8 = 0;
const HTTP1: u8 = 1;
const H2C: u8 = 2;

/// The observer pair that tells h2c from HTTP/1.1 by the client's first bytes.
pub fn observer_pair_sniffed(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    routes: Arc<LlmRoutes>,
) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
    let (h1_up, h1_down) =
        crate::wire::http1::observer_pair_routed(conn, sink.clone(), routes.clone());
    let (h2_up, h2_down) = observer_pair_h2(conn, sink, routes, WireProtocol::H2c);
    let choice = Arc::new(AtomicU8::new(UNDECIDED));
    (
        Box::new(SniffUp {
            choice: choice.clone(),
            h1: Some(h1_up),
            h2: Some(h2_up),
            held: Vec::new(),
            through: 0,
            chunk_start: 0,
            raw: 0,
        }),
        Box::new(SniffDown {
            choice,
            h1: Some(h1_down),
            h2: Some(h2_down),
            first: ServerFirst::default(),
        }),
    )
}

/// The upstream half of a sniffing pair.
struct SniffUp {
    choice: Arc<AtomicU8>,
    h1: Option<Box<dyn WireObserver>>,
    h2: Option<Box<dyn WireObserver>>,
    /// The bytes read while undecided (a prefix of the preface, at most 23 bytes).
    held: Vec<u8>,
    through: u64,
    /// Raw offset of the last observed chunk's first byte, and after its last.
    chunk_start: u64,
    raw: u64,
}

impl SniffUp {
    fn chosen(&mut self) -> Option<&mut Box<dyn WireObserver>> {
        match self.choice.load(Ordering::Acquire) {
            HTTP1 => self.h1.as_mut(),
            H2C => self.h2.as_mut(),
            _ => None,
        }
    }

    /// Decides on the bytes held plus `chunk`: `Some(h2)` once decided.
    fn decide(&mut self, chunk: &[u8]) -> Option<bool> {
        let n = (PREFACE.len() - self.held.len()).min(chunk.len());
        let so_far = self.held.len();
        if chunk[..n] != PREFACE[so_far..so_far + n] {
            return Some(false);
        }
        (so_far + n == PREFACE.len()).then_some(true)
    }
}

impl WireObserver for SniffUp {
    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions> {
        self.chunk_start = self.raw;
        self.raw += chunk.len() as u64;
        if self.choice.load(Ordering::Acquire) == UNDECIDED {
            match self.decide(chunk) {
                None => {
                    self.held.extend_from_slice(chunk);
                    return None;
                }
                Some(h2) => {
                    let pick = if h2 { H2C } else { HTTP1 };
                    self.choice.store(pick, Ordering::Release);
                    if h2 {
                        self.h1 = None
                    } else {
                        self.h2 = None
                    }
                    let held = std::mem::take(&mut self.held);
                    let through = self.through;
                    let obs = self.chosen()?;
                    if !held.is_empty() {
                        obs.observe(&held);
                        obs.delivered_through(through);
                    }
                }
            }
        }
        self.chosen()?.observe(chunk)
    }

    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        let raw = self.chunk_start + delivered as u64;
        self.cut_at(raw)
    }

    fn cut_at(&mut self, raw: u64) -> CutPoint {
        match self.chosen() {
            Some(o) => o.cut_at(raw),
            None => CutPoint {
                raw_offset: raw,
                ..CutPoint::default()
            },
        }
    }

    fn eof(&mut self) {
        if let Some(o) = self.chosen() {
            o.eof();
        }
    }

    fn delivered_through(&mut self, raw: u64) {
        self.through = self.through.max(raw);
        if let Some(o) = self.chosen() {
            o.delivered_through(raw);
        }
    }

    fn held_bytes(&self) -> usize {
        self.held.capacity()
            + self.h1.as_ref().map_or(0, |o| o.held_bytes())
            + self.h2.as_ref().map_or(0, |o| o.held_bytes())
    }

    fn dropped(&mut self, start: u64, end: u64) {
        if let Some(o) = self.chosen() {
            o.dropped(start, end);
        }
    }

    fn is_opaque(&self) -> bool {
        match self.choice.load(Ordering::Acquire) {
            HTTP1 => self.h1.as_ref().is_some_and(|o| o.is_opaque()),
            H2C => self.h2.as_ref().is_some_and(|o| o.is_opaque()),
            _ => false,
        }
    }

    fn passed(&mut self, n: u64) {
        self.chunk_start = self.raw;
        self.raw += n;
        if let Some(o) = self.chosen() {
            o.passed(n);
        }
    }

    fn negotiated(&mut self, protocol: WireProtocol) {
        if let Some(h2) = self.h2.as_mut() {
            h2.negotiated(protocol);
        }
    }
}

/// The downstream half of a sniffing pair. An h2 server sends its `SETTINGS` as soon as it
/// accepts, often before the client's preface has reached the proxy: so while undecided, the
/// server's bytes go to the HTTP/1.1 half (as before) *and* to the h2 half as long as they can
/// be an h2 server's preface (a `SETTINGS` frame first). The choice made upstream then finds
/// the h2 half having seen every byte from raw offset 0, with no byte held back.
struct SniffDown {
    choice: Arc<AtomicU8>,
    h1: Option<Box<dyn WireObserver>>,
    h2: Option<Box<dyn WireObserver>>,
    /// The server's first bytes (up to a frame header), judged as they arrive.
    first: ServerFirst,
}

/// The server's first frame header, byte by byte, while the client's protocol is undecided.
#[derive(Default)]
struct ServerFirst {
    head: [u8; super::frame::HEADER_LEN],
    len: usize,
}

impl ServerFirst {
    /// Takes the server's next bytes; false once they cannot start an h2 server's preface (a
    /// `SETTINGS` frame, not an ACK, on stream 0, its length a multiple of 6).
    fn plausible(&mut self, chunk: &[u8]) -> bool {
        let n = (self.head.len() - self.len).min(chunk.len());
        self.head[self.len..self.len + n].copy_from_slice(&chunk[..n]);
        self.len += n;
        let h = &self.head[..self.len];
        let len_ok = h.len() < 3 || u32::from_be_bytes([0, h[0], h[1], h[2]]).is_multiple_of(6);
        let kind_ok = h
            .get(3)
            .is_none_or(|&t| super::FrameType::from_u8(t) == super::FrameType::Settings);
        let flags_ok = h.get(4).is_none_or(|&f| f & super::frame::flags::ACK == 0);
        let stream_ok = h.iter().skip(5).all(|&b| b == 0);
        len_ok && kind_ok && flags_ok && stream_ok
    }
}

impl SniffDown {
    /// The observer that speaks for this direction under `choice` (loaded once per call, so
    /// a choice made meanwhile upstream never makes one call feed a half twice).
    fn pick(&mut self, choice: u8) -> &mut Box<dyn WireObserver> {
        match choice {
            // A server that spoke first with anything but SETTINGS lost its h2 half.
            H2C if self.h2.is_some() => self.h1 = None,
            UNDECIDED => {}
            _ => self.h2 = None,
        }
        match (&mut self.h1, &mut self.h2) {
            (Some(o), _) | (None, Some(o)) => o,
            // Unreachable by construction; a byte-mode observer keeps the pump correct.
            (h1, None) => h1.insert(Box::new(crate::wire::observe::NoObserver::default())),
        }
    }

    fn obs(&mut self) -> &mut Box<dyn WireObserver> {
        let choice = self.choice.load(Ordering::Acquire);
        self.pick(choice)
    }

    /// Calls `f` on the observer that speaks, and while undecided also on the h2 half (which
    /// then sees every byte the HTTP/1.1 half sees; what it says is used only if the client's
    /// preface chooses it).
    fn each<R>(&mut self, mut f: impl FnMut(&mut Box<dyn WireObserver>) -> R) -> R {
        let choice = self.choice.load(Ordering::Acquire);
        if choice == UNDECIDED
            && let Some(h2) = self.h2.as_mut()
        {
            f(h2);
        }
        f(self.pick(choice))
    }
}

impl WireObserver for SniffDown {
    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions> {
        let choice = self.choice.load(Ordering::Acquire);
        if choice == UNDECIDED && self.h2.is_some() {
            if self.first.plausible(chunk) {
                if let Some(h2) = self.h2.as_mut() {
                    h2.observe(chunk);
                }
            } else {
                self.h2 = None;
            }
        }
        self.pick(choice).observe(chunk)
    }
    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        self.obs().cut_point(delivered)
    }
    fn cut_at(&mut self, raw: u64) -> CutPoint {
        self.obs().cut_at(raw)
    }
    fn eof(&mut self) {
        self.each(|o| o.eof())
    }
    fn delivered_through(&mut self, raw: u64) {
        self.each(|o| o.delivered_through(raw))
    }
    fn held_bytes(&self) -> usize {
        self.h1.as_ref().map_or(0, |o| o.held_bytes())
            + self.h2.as_ref().map_or(0, |o| o.held_bytes())
    }
    fn dropped(&mut self, start: u64, end: u64) {
        self.each(|o| o.dropped(start, end))
    }
    fn is_opaque(&self) -> bool {
        // Undecided: not opaque (the client's first bytes may still make it h2c).
        match self.choice.load(Ordering::Acquire) {
            UNDECIDED => false,
            H2C if self.h2.is_some() => self.h2.as_ref().is_some_and(|o| o.is_opaque()),
            _ => self.h1.as_ref().is_some_and(|o| o.is_opaque()),
        }
    }
    fn passed(&mut self, n: u64) {
        self.each(|o| o.passed(n))
    }
    fn clean_end(&mut self, delivered: usize) -> crate::wire::CleanEnd {
        self.obs().clean_end(delivered)
    }
    fn clean_end_at(&mut self, raw: u64) -> crate::wire::CleanEnd {
        self.obs().clean_end_at(raw)
    }
    fn negotiated(&mut self, protocol: WireProtocol) {
        if let Some(h2) = self.h2.as_mut() {
            h2.negotiated(protocol);
        }
    }
}
