//! What the stream relay needs from an HTTP/2 wire observer: per frame, the SSE positions of a
//! `DATA` body; per cut, where it fell; and to hear what the relay delivered, dropped and ended.
//!
//! Why a seam here: the relay edits frames, so it cannot hand the byte pump's
//! [`crate::wire::WireObserver`] a chunk and a delivered offset; it shows the observer whole
//! frames as read (raw offsets of the direction, before any edit) and says what became of
//! them. [`Watched`] drives the h2 observer core (`wire::h2`'s two halves) through it;
//! [`Blind`] is the relay without a sink (no positions: positioned faults never fire, h2 faults
//! still do).
//!
//! Invariant: positions returned for a frame are relative to its `DATA` *body* (padding and
//! the pad length byte excluded): cut point `k` = the first `k` body bytes delivered.

use std::sync::Arc;

use crate::vocab::WireProtocol;
use crate::vocab::{Direction, StreamInfo};
use crate::wire::ObservationSink;
use crate::wire::h2::H2Half;
use crate::wire::h2::frame::{HEADER_LEN, data_body};
use crate::wire::h2::{FrameHeader, FrameType};
use crate::wire::llm_routes::LlmRoutes;
use crate::wire::{ChunkPositions, CutPoint};

/// An HTTP/2 observer as the stream relay drives it (both directions of one connection).
pub(crate) trait FrameObserver: Send {
    /// A whole frame read from `dir`, whose first byte is at raw offset `raw` of that
    /// direction.
    fn frame(&mut self, dir: Direction, raw: u64, header: &FrameHeader, payload: &[u8]);

    /// For the last frame shown, if it is a `DATA` frame of an SSE response: the positions of
    /// its body.
    fn positions(&self) -> Option<&ChunkPositions>;

    /// The cut that delivers exactly `delivered` body bytes of the last `DATA` frame observed
    /// on `stream` (the relay sets `h2_stream`, `by` and the connection facts). Every
    /// observation of the bytes before the cut is recorded before this returns, so the cut's
    /// record (made next) follows them.
    fn cut_point(&mut self, stream: u32, delivered: usize) -> CutPoint;

    /// The request facts of `stream`, once its request head was read.
    fn info(&self, stream: u32) -> Option<Arc<StreamInfo>> {
        let _ = stream;
        None
    }

    /// Whether `stream`'s response is `text/event-stream`, once its response header block was
    /// read (already when [`FrameObserver::frame`] was shown that block's `HEADERS` frame).
    fn response_sse(&self, stream: u32) -> bool {
        let _ = stream;
        false
    }

    /// Every frame of `dir` read before raw offset `raw` has been written or dropped.
    fn delivered_through(&mut self, dir: Direction, raw: u64) {
        let _ = (dir, raw);
    }

    /// The relay ended `stream` itself (a stream-scope cut): `clean` if it wrote `END_STREAM`,
    /// else it wrote `RST_STREAM`. Nothing of the stream's later `DATA` reaches the client.
    fn ended_by_proxy(&mut self, stream: u32, clean: bool) {
        let _ = (stream, clean);
    }

    /// Where each SSE stream still open but `except` stands (see `H2Half::stands`): a cut of
    /// the whole connection tears each of them there.
    fn stands(&self, except: u32) -> Vec<CutPoint> {
        let _ = except;
        Vec::new()
    }

    /// `dir`'s source sent EOF.
    fn eof(&mut self, dir: Direction) {
        let _ = dir;
    }
}

/// The relay without an h2 observer: no positions, no facts.
#[derive(Debug, Default)]
pub(crate) struct Blind {
    /// Raw offset of the last frame shown, per direction (`[upstream, downstream]`).
    raw: [u64; 2],
}

impl FrameObserver for Blind {
    fn frame(&mut self, dir: Direction, raw: u64, _header: &FrameHeader, _payload: &[u8]) {
        self.raw[usize::from(dir == Direction::Downstream)] = raw;
    }

    fn positions(&self) -> Option<&ChunkPositions> {
        None
    }

    fn cut_point(&mut self, stream: u32, delivered: usize) -> CutPoint {
        CutPoint {
            raw_offset: self.raw[1] + delivered as u64,
            h2_stream: Some(u64::from(stream)),
            ..CutPoint::default()
        }
    }
}

/// The relay with the h2 observer core: both halves of `wire::h2`, sharing their stream table.
///
/// The relay records the connection's `Protocol`, its cuts and every frame it writes itself
/// (`StreamReset`, `GoAway` with `by_proxy`), so the halves are asked only to describe a cut
/// and to end the stream it hit, never to record those again.
pub(crate) struct Watched {
    /// `[upstream, downstream]`.
    halves: [H2Half; 2],
    /// The last frame shown had positions (a `DATA` body of an SSE stream).
    positioned: bool,
    /// The stream and the raw offset of the body of the last `DATA` frame shown downstream.
    last_body: Option<(u32, u64)>,
    /// The stream cut last and the raw offset its cut fell at, until the relay says how it
    /// ended the stream.
    cut: Option<(u32, u64)>,
}

impl Watched {
    /// The observer of connection `conn`, reporting to `sink`.
    pub(crate) fn new(
        conn: u64,
        sink: Arc<dyn ObservationSink>,
        routes: Arc<LlmRoutes>,
        protocol: WireProtocol,
    ) -> Watched {
        let (up, down) = crate::wire::h2::halves(conn, sink, routes, protocol);
        Watched {
            halves: [up, down],
            positioned: false,
            last_body: None,
            cut: None,
        }
    }

    fn half(&mut self, dir: Direction) -> &mut H2Half {
        &mut self.halves[usize::from(dir == Direction::Downstream)]
    }
}

impl FrameObserver for Watched {
    fn frame(&mut self, dir: Direction, raw: u64, header: &FrameHeader, payload: &[u8]) {
        if dir == Direction::Downstream && header.kind == FrameType::Data {
            let body = data_body(header, payload).map_or(0, |b| b.start);
            self.last_body = Some((header.stream, raw + (HEADER_LEN + body) as u64));
        }
        self.positioned = self.half(dir).frame(header, payload, raw).is_some();
    }

    fn positions(&self) -> Option<&ChunkPositions> {
        if self.positioned {
            self.halves[1].last_positions()
        } else {
            None
        }
    }

    fn cut_point(&mut self, stream: u32, delivered: usize) -> CutPoint {
        let body = match self.last_body {
            Some((s, at)) if s == stream => at,
            _ => self.halves[1].raw_read(),
        };
        let raw = body + delivered as u64;
        self.cut = Some((stream, raw));
        let point = self.halves[1].describe_stream_cut(stream, raw);
        // The relay describes a cut as it reads the frame, while the bytes before it may still
        // wait in the write queue; their observations (the stream's response head, its events)
        // must reach the sink before the cut's record, as on the wire, or the audit ends a leg
        // it never saw answered and drops what follows. So they are released now.
        self.halves[1].delivered_through(raw);
        point
    }

    fn response_sse(&self, stream: u32) -> bool {
        self.halves[1].response_is_sse(stream)
    }

    fn delivered_through(&mut self, dir: Direction, raw: u64) {
        self.half(dir).delivered_through(raw);
    }

    fn ended_by_proxy(&mut self, stream: u32, clean: bool) {
        // A stream the relay ended without cutting it (an h2 kind's reset): it ends where
        // delivery stands, so nothing read but not yet delivered is released early.
        let raw = match self.cut.take() {
            Some((s, raw)) if s == stream => raw,
            _ => self.halves[1].delivered(),
        };
        self.halves[1].end_stream_by_proxy(stream, raw, clean);
    }

    fn stands(&self, except: u32) -> Vec<CutPoint> {
        self.halves[1].stands(except)
    }

    fn eof(&mut self, dir: Direction) {
        self.half(dir).eof();
    }
}
