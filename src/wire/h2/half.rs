//! One direction of the passive HTTP/2 observer: frames in (from the incremental reader on the
//! pump's path, or whole from the stream relay), HPACK decoded, per stream the facts an
//! HTTP/1.1 exchange has, SSE positions in `DATA` bodies, and observations held until the bytes
//! that produced them are delivered.
//!
//! Why one type for both callers: the pump (`observer`) and the relay (which reads frames one
//! at a time and edits them) must report the same observations with the same positions; only
//! the unit of a "view" differs (a read, or one `DATA` frame's body).
//!
//! Invariants:
//! - Every header block is decoded, on every stream (tracked or not, reset or not, pushed),
//!   in order: the HPACK table follows the endpoint's. A block that fails to decode, a frame
//!   sequence HTTP/2 forbids (a frame other than `CONTINUATION` inside a header block), or a
//!   reader error makes the whole connection opaque (both halves; logged once): bytes pass,
//!   nothing more is reported.
//! - `seq` of every observation is the stream id. A stream's observations are released in
//!   order; a cut of the stream (relay) or of the connection discards those produced past it.
//! - Memory per stream: one request body or non-SSE response body up to `http1::BODY_LIMIT`,
//!   one bounded SSE scanner; per direction one header block up to `reader::BLOCK_LIMIT` and
//!   the HPACK table up to `hpack::TABLE_CAP`.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::frame::{self, FrameHeader, FrameType, flags, setting};
use super::headers::Fields;
use super::hpack;
use super::marks::Marks;
use super::outbox::{CONNECTION, Outbox};
use super::reader::{BLOCK_LIMIT, Event};
use super::shared::Shared;
use super::view::{View, describe};
use super::{ErrorCode, down::Resp, up::ReqBody};
use crate::vocab::{Direction, WireProtocol};
use crate::wire::llm_routes::LlmRoutes;
use crate::wire::{ChunkPositions, CutPoint, Observation, ObservationSink};

/// How the proxy ended a stream it cut (see [`H2Half::cut_stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnding {
    /// It wrote `RST_STREAM` with this code in this half's direction: the stream ends unclean.
    Reset(ErrorCode),
    /// It wrote an empty `DATA` frame with `END_STREAM`: the stream ends clean.
    EndStream,
}

/// A header block in progress (`HEADERS` or `PUSH_PROMISE`, then `CONTINUATION`s).
struct Block {
    stream: u32,
    end_stream: bool,
    push: bool,
    bytes: Vec<u8>,
}

/// One direction of one h2 connection (see the module doc).
pub struct H2Half {
    pub(super) conn: u64,
    pub(super) dir: Direction,
    protocol: WireProtocol,
    pub(super) sink: Arc<dyn ObservationSink>,
    pub(super) shared: Arc<Shared>,
    pub(super) routes: Arc<LlmRoutes>,
    hpack: hpack::Decoder,
    block: Option<Block>,
    /// Upstream: requests whose body is being read.
    pub(super) reqs: FxHashMap<u32, ReqBody>,
    /// Downstream: responses whose body is being read.
    pub(super) resps: FxHashMap<u32, Resp>,
    pub(super) out: Outbox,
    /// The last view (read or frame body) and earlier ones not yet wholly delivered.
    pub(super) view: View,
    pub(super) history: VecDeque<View>,
    resets_seen: u64,
    /// SSE streams whose clean end a drop or cut discarded: they end unclean at the cut.
    lost_ends: Vec<u32>,
    /// Raw offset after the last byte observed (pump) or frame read (relay).
    pub(super) raw: u64,
    ended: bool,
    /// Where the frames of the current read begin (what a connection cut leaves the client).
    marks: Marks,
}

impl H2Half {
    pub(super) fn new(
        conn: u64,
        dir: Direction,
        protocol: WireProtocol,
        sink: Arc<dyn ObservationSink>,
        shared: Arc<Shared>,
        routes: Arc<LlmRoutes>,
    ) -> Self {
        H2Half {
            conn,
            dir,
            protocol,
            sink,
            shared,
            routes,
            hpack: hpack::Decoder::new(),
            block: None,
            reqs: FxHashMap::default(),
            resps: FxHashMap::default(),
            out: Outbox::default(),
            view: View::default(),
            history: VecDeque::new(),
            resets_seen: 0,
            lost_ends: Vec::new(),
            raw: 0,
            ended: false,
            marks: Marks::default(),
        }
    }

    /// Announces the connection as `protocol` (TLS ALPN said `h2`), told before any byte.
    pub(super) fn announce_as(&mut self, protocol: WireProtocol) {
        self.protocol = protocol;
    }

    /// True once the connection is opaque (an error) or this direction ended (a cut).
    pub fn is_opaque(&self) -> bool {
        self.ended || self.shared.is_opaque()
    }

    /// Makes the connection opaque for good, saying why once.
    pub(super) fn fail(&mut self, why: &str) {
        if self.shared.make_opaque() {
            tracing::warn!(
                conn = self.conn,
                direction = ?self.dir,
                "HTTP/2 observer stops following this connection ({why}); bytes are still relayed"
            );
        }
        self.reqs.clear();
        self.resps.clear();
        self.block = None;
    }

    /// Starts a new view at raw offset `start` covering `len` bytes, keeping the last one if
    /// its bytes are not all delivered yet (a cut may still fall in it).
    pub(super) fn begin_view(&mut self, start: u64, len: usize) {
        if self.view.len > 0 && self.out.through() < self.view.end() {
            let old = std::mem::take(&mut self.view);
            self.history.push_back(old);
        }
        self.view.restart(start, len);
        self.marks.begin();
        if start == 0 && self.dir == Direction::Downstream {
            // The server's first frame begins the direction (the client's follows its preface).
            self.marks.frame_at(0);
        }
        self.catch_up_resets();
    }

    /// Forgets the streams the other half (or the proxy) reset since the last look.
    fn catch_up_resets(&mut self) {
        let Some(ids) = self.shared.resets_since(&mut self.resets_seen) else {
            // More resets than remembered: keep what is still live (responses) or own.
            let shared = &self.shared;
            let gone: Vec<u32> = self
                .resps
                .keys()
                .copied()
                .filter(|id| !shared.is_live(*id))
                .collect();
            for id in gone {
                self.end_response_unclean(id, self.raw);
            }
            return;
        };
        for id in ids {
            self.reqs.remove(&id);
            self.end_response_unclean(id, self.raw);
        }
    }

    /// Reads one reader event; `base` is the raw offset its chunk offsets count from.
    pub(super) fn on_event(&mut self, base: u64, ev: Event<'_>) {
        if self.shared.is_opaque() {
            return;
        }
        match &ev {
            Event::Preface { end } | Event::Frame { end, .. } => {
                self.marks.frame_at(base + *end as u64);
            }
            Event::DataStart { header, at } => {
                let body = base + *at as u64;
                let pad = u64::from(header.has(flags::PADDED));
                let start = body.saturating_sub(frame::HEADER_LEN as u64 + pad);
                self.marks.body_at(start, body);
            }
            Event::Data { .. } | Event::DataEnd { .. } => {}
        }
        match ev {
            Event::Preface { end } => {
                self.out.hold(
                    base + end as u64,
                    CONNECTION,
                    Observation::Protocol {
                        conn: self.conn,
                        protocol: self.protocol,
                    },
                );
            }
            Event::DataStart { header, at } => {
                if self.block.is_some() {
                    return self.fail("DATA inside a header block");
                }
                self.data_start(header.stream, at);
            }
            Event::Data { header, body, at } => self.data(header.stream, body, at),
            Event::DataEnd { header, at } => self.data_end(header.stream, at),
            Event::Frame {
                header,
                payload,
                end,
            } => self.frame_end(&header, payload, base + end as u64),
        }
    }

    fn data_start(&mut self, stream: u32, at: usize) {
        if self.dir == Direction::Downstream {
            self.down_data_start(stream, at);
        }
    }

    fn data(&mut self, stream: u32, body: &[u8], at: usize) {
        match self.dir {
            Direction::Upstream => self.up_data(stream, body),
            Direction::Downstream => self.down_data(stream, body, at),
        }
    }

    fn data_end(&mut self, stream: u32, at: usize) {
        if self.dir == Direction::Downstream {
            self.down_data_end(stream, at);
        }
    }

    /// A whole frame ended at raw offset `end` (for `DATA`: its body was reported already).
    fn frame_end(&mut self, h: &FrameHeader, payload: &[u8], end: u64) {
        if self.block.is_some() && h.kind != FrameType::Continuation {
            return self.fail("a frame other than CONTINUATION inside a header block");
        }
        match h.kind {
            FrameType::Data if h.has(flags::END_STREAM) => self.end_stream(h.stream, end),
            FrameType::Data => {}
            FrameType::Headers => {
                let Some(r) = frame::headers_block(h, payload) else {
                    return self.fail("HEADERS padding longer than its payload");
                };
                self.begin_block(h, false, &payload[r], end);
            }
            FrameType::PushPromise => {
                let Some(r) = push_promise_block(h, payload) else {
                    return self.fail("PUSH_PROMISE shorter than its fields");
                };
                self.begin_block(h, true, &payload[r], end);
            }
            FrameType::Continuation => {
                let Some(b) = self.block.as_mut().filter(|b| b.stream == h.stream) else {
                    return self.fail("CONTINUATION outside a header block of its stream");
                };
                if b.bytes.len() + payload.len() > BLOCK_LIMIT {
                    return self.fail("a header block over 64 KiB");
                }
                b.bytes.extend_from_slice(payload);
                if h.has(flags::END_HEADERS) {
                    self.decode_block(end);
                }
            }
            FrameType::Settings if !h.has(flags::ACK) => {
                for (id, v) in frame::settings(payload) {
                    if id == setting::HEADER_TABLE_SIZE {
                        // The sender decodes the other direction's blocks.
                        self.shared.allow_table(opposite(self.dir), v);
                    }
                }
            }
            FrameType::RstStream => {
                let code = frame::rst_code(payload).unwrap_or(ErrorCode::NO_ERROR);
                self.out.hold(
                    end,
                    h.stream,
                    Observation::StreamReset {
                        conn: self.conn,
                        seq: u64::from(h.stream),
                        direction: self.dir,
                        code: code.0,
                        by_proxy: false,
                    },
                );
                self.reset(h.stream, end);
            }
            FrameType::GoAway => {
                if let Some((last, code)) = frame::goaway_fields(payload) {
                    self.out.hold(
                        end,
                        CONNECTION,
                        Observation::GoAway {
                            conn: self.conn,
                            direction: self.dir,
                            last_stream: u64::from(last),
                            code: code.0,
                            by_proxy: false,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    fn begin_block(&mut self, h: &FrameHeader, push: bool, fragment: &[u8], end: u64) {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(fragment);
        self.block = Some(Block {
            stream: h.stream,
            end_stream: !push && h.has(flags::END_STREAM),
            push,
            bytes,
        });
        if h.has(flags::END_HEADERS) {
            self.decode_block(end);
        }
    }

    fn decode_block(&mut self, end: u64) {
        let Some(block) = self.block.take() else {
            return;
        };
        let allowed = self.shared.allowed_table(self.dir);
        if allowed > 0 {
            self.hpack.allow_max_size(allowed);
        }
        let mut fields = Fields::default();
        if let Err(e) = self
            .hpack
            .decode(&block.bytes, &mut |n, v| fields.field(n, v))
        {
            return self.fail(&format!("HPACK, stream {}: {e}", block.stream));
        }
        if block.push {
            return;
        }
        match self.dir {
            Direction::Upstream => self.up_headers(block.stream, fields, end),
            Direction::Downstream => self.down_headers(block.stream, fields, end),
        }
        if block.end_stream {
            self.end_stream(block.stream, end);
        }
    }

    /// `END_STREAM` on `stream` in this direction, the frame ending at raw offset `end`.
    fn end_stream(&mut self, stream: u32, end: u64) {
        match self.dir {
            Direction::Upstream => self.finish_request(stream, end),
            Direction::Downstream => self.end_response(stream, end, true),
        }
    }

    /// `stream` was reset (by an endpoint or the proxy) at raw offset `at`.
    fn reset(&mut self, stream: u32, at: u64) {
        self.reqs.remove(&stream);
        self.end_response_unclean(stream, at);
        self.shared.reset(stream);
    }

    // ---- The relay's API -----------------------------------------------------------------

    /// The relay read the client preface (upstream), its last byte before raw offset `end`:
    /// announces the protocol once it is delivered.
    pub fn preface(&mut self, end: u64) {
        self.raw = self.raw.max(end);
        self.on_event(0, Event::Preface { end: end as usize });
    }

    /// Reads one whole frame the relay read, its header's first byte at raw offset `raw` of
    /// this direction (bytes read from the source). For a `DATA` frame of an SSE stream,
    /// returns the positions of its body: cut point `k` means "the first `k` body bytes
    /// (padding excluded) are delivered"; the one [`StreamSpan`](crate::wire::StreamSpan)
    /// names the stream. Call for every frame read, in order, whether or not it is forwarded
    /// (header blocks keep the HPACK table in step).
    pub fn frame(
        &mut self,
        header: &FrameHeader,
        payload: &[u8],
        raw: u64,
    ) -> Option<&ChunkPositions> {
        let end = raw + header.frame_len() as u64;
        self.raw = self.raw.max(end);
        if self.is_opaque() {
            return None;
        }
        if header.kind != FrameType::Data {
            self.catch_up_resets();
            self.on_event(
                raw,
                Event::Frame {
                    header: *header,
                    payload,
                    end: header.frame_len(),
                },
            );
            return None;
        }
        let Some(body) = frame::data_body(header, payload) else {
            self.fail("DATA padding longer than its payload");
            return None;
        };
        let body_raw = raw + (frame::HEADER_LEN + body.start) as u64;
        self.begin_view(body_raw, body.len());
        let rel_end = (end - body_raw) as usize;
        let body = &payload[body];
        let h = *header;
        self.on_event(body_raw, Event::DataStart { header: h, at: 0 });
        if !body.is_empty() {
            self.on_event(
                body_raw,
                Event::Data {
                    header: h,
                    body,
                    at: 0,
                },
            );
        }
        self.on_event(
            body_raw,
            Event::DataEnd {
                header: h,
                at: body.len(),
            },
        );
        self.on_event(
            body_raw,
            Event::Frame {
                header: h,
                payload: &[],
                end: rel_end,
            },
        );
        (!self.view.positions.runs.is_empty()).then_some(&self.view.positions)
    }

    /// Every byte before raw offset `raw` was written to the destination.
    pub fn delivered_through(&mut self, raw: u64) {
        self.out.release(raw, &*self.sink);
        let through = self.out.through();
        while self.history.front().is_some_and(|v| v.end() < through) {
            self.history.pop_front();
        }
    }

    /// Bytes `[start, end)` were read but will never be written (connection level).
    pub fn dropped(&mut self, start: u64, _end: u64) {
        self.out.end_at(start, &mut self.lost_ends);
    }

    /// The proxy cut stream `stream` after exactly the bytes before raw offset `raw` were
    /// delivered (a point inside one of its `DATA` bodies, as [`H2Half::frame`] positioned it)
    /// and then ended it as `how` says, in this half's direction. Call after every byte before
    /// `raw` was written. Returns the cut's description (`h2_stream: Some(stream)`); the
    /// stream's observations produced past `raw` are discarded, its `StreamEnd` (clean for
    /// [`StreamEnding::EndStream`]) and, for a reset, the proxy's `StreamReset` are recorded;
    /// the stream's later frames are read for HPACK only. The other streams flow on.
    pub fn cut_stream(&mut self, stream: u32, raw: u64, how: StreamEnding) -> CutPoint {
        let point = self.describe_stream_cut(stream, raw);
        self.end_stream_by_proxy(stream, raw, how == StreamEnding::EndStream);
        if let StreamEnding::Reset(code) = how {
            self.proxy_reset(stream, code);
        }
        point
    }

    /// Describes a cut of `stream` after exactly the bytes before raw offset `raw` (inside one
    /// of its `DATA` bodies, as [`H2Half::frame`] positioned it), without ending anything: for
    /// a relay that records the cut and the resets it writes itself, then calls
    /// [`H2Half::end_stream_by_proxy`].
    pub fn describe_stream_cut(&self, stream: u32, raw: u64) -> CutPoint {
        let mut point = describe(&self.view, &self.history, raw);
        point.h2_stream = Some(u64::from(stream));
        // Outside this stream's body, keep only what is certain: the stream.
        point.exchange = Some(u64::from(stream));
        point
    }

    /// The proxy ended `stream` after the bytes before raw offset `raw` (`clean`: with
    /// `END_STREAM`; else with `RST_STREAM`, recorded by the caller): the stream's
    /// observations produced past `raw` are discarded, its `StreamEnd` is recorded, its later
    /// frames are read for HPACK only. The other streams flow on.
    pub fn end_stream_by_proxy(&mut self, stream: u32, raw: u64, clean: bool) {
        self.delivered_through(raw);
        self.out.end_stream_at(stream, raw);
        if clean {
            self.end_response(stream, raw, true);
        } else {
            self.end_response_unclean(stream, raw);
        }
        self.reqs.remove(&stream);
        self.out.release(self.out.through(), &*self.sink);
    }

    /// Where bytes written through raw offset `raw` of the pump's reads leave the peer's h2
    /// stack: `raw` at a frame boundary, else before the frame it falls in (the start of its
    /// body, for a `DATA` frame): an endpoint hands on nothing of a frame until it is whole.
    /// (The relay writes whole frames, edited ones included: its offsets need no such care.)
    pub fn seen_at(&self, raw: u64) -> u64 {
        self.marks.seen_at(raw)
    }

    /// Every byte before this raw offset was delivered (as the relay last said).
    pub fn delivered(&self) -> u64 {
        self.out.through()
    }

    /// Raw offset after the last byte this half has read.
    pub fn raw_read(&self) -> u64 {
        self.raw
    }

    /// The positions [`H2Half::frame`] returned for the last frame it read, if any.
    pub fn last_positions(&self) -> Option<&ChunkPositions> {
        (!self.view.positions.runs.is_empty()).then_some(&self.view.positions)
    }

    /// Whether `stream`'s response (read by this, the downstream, half) is an SSE stream.
    pub fn response_is_sse(&self, stream: u32) -> bool {
        self.resps.get(&stream).is_some_and(|r| r.is_sse())
    }

    /// The proxy wrote `RST_STREAM(code)` on `stream` in this half's direction: records the
    /// `StreamReset` (by the proxy) and ends the stream for both halves.
    pub fn proxy_reset(&mut self, stream: u32, code: ErrorCode) {
        self.sink.record(Observation::StreamReset {
            conn: self.conn,
            seq: u64::from(stream),
            direction: self.dir,
            code: code.0,
            by_proxy: true,
        });
        let raw = self.out.through();
        self.reset(stream, raw);
        self.out.release(raw, &*self.sink);
    }

    /// The proxy wrote `GOAWAY(last_stream, code)` in this half's direction.
    pub fn proxy_goaway(&mut self, last_stream: u32, code: ErrorCode) {
        self.sink.record(Observation::GoAway {
            conn: self.conn,
            direction: self.dir,
            last_stream: u64::from(last_stream),
            code: code.0,
            by_proxy: true,
        });
    }

    /// The whole connection was cut after exactly the bytes before raw offset `raw` were
    /// delivered (`h2_stream: None`): describes the cut (the stream it fell in, if any), and
    /// every SSE stream still open whose response head was delivered ends unclean — the one
    /// cut first (a stream whose head was not delivered never began for the client: it gets no
    /// `StreamEnd`, as its `Response` was discarded). No call follows.
    pub fn cut_at(&mut self, raw: u64) -> CutPoint {
        self.out.release(raw, &*self.sink);
        self.out.end_at(raw, &mut self.lost_ends);
        let point = describe(&self.view, &self.history, raw);
        let hit = point.exchange.and_then(|s| u32::try_from(s).ok());
        let mut open = std::mem::take(&mut self.lost_ends);
        open.extend(
            self.resps
                .iter()
                .filter(|(_, r)| r.is_sse() && r.head_before(raw))
                .map(|(id, _)| *id),
        );
        open.sort_unstable_by_key(|id| (Some(*id) != hit, *id));
        open.dedup();
        for id in open {
            self.sink.record(Observation::StreamEnd {
                conn: self.conn,
                seq: u64::from(id),
                clean: false,
            });
        }
        self.resps.clear();
        self.reqs.clear();
        self.history.clear();
        self.ended = true;
        point
    }

    /// The source sent EOF: open SSE streams end unclean (no `END_STREAM` came).
    pub fn eof(&mut self) {
        let open: Vec<u32> = self.resps.keys().copied().collect();
        for id in open {
            self.end_response_unclean(id, self.raw);
        }
        for id in std::mem::take(&mut self.lost_ends) {
            self.sink.record(Observation::StreamEnd {
                conn: self.conn,
                seq: u64::from(id),
                clean: false,
            });
        }
        self.out.release(self.out.through(), &*self.sink);
        self.ended = true;
    }

    /// Bytes held now (buffers, tables, held observations).
    pub fn held_bytes(&self) -> usize {
        let resps: usize = self.resps.values().map(Resp::held_bytes).sum();
        let reqs: usize = self.reqs.values().map(ReqBody::held_bytes).sum();
        let views = (self.history.len() + 1) * std::mem::size_of::<View>();
        self.hpack.held_bytes()
            + self.block.as_ref().map_or(0, |b| b.bytes.capacity())
            + resps
            + reqs
            + views
            + self.out.held_bytes()
    }

    /// Streams this half follows now.
    pub fn streams(&self) -> usize {
        self.reqs.len() + self.resps.len()
    }
}

/// The header block fragment of a `PUSH_PROMISE` payload (after padding and the promised id).
fn push_promise_block(h: &FrameHeader, p: &[u8]) -> Option<std::ops::Range<usize>> {
    let (mut start, mut end) = (0, p.len());
    if h.has(flags::PADDED) {
        start = 1;
        end = end.checked_sub(*p.first()? as usize)?;
    }
    start += 4;
    (start <= end).then_some(start..end)
}

pub(super) fn opposite(d: Direction) -> Direction {
    match d {
        Direction::Upstream => Direction::Downstream,
        Direction::Downstream => Direction::Upstream,
    }
}
