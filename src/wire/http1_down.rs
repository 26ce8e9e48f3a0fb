//! The server→client half of the HTTP/1.1 observer: response heads, bodies, and for
//! `text/event-stream` bodies the SSE scanner with the position of every cut point.
//!
//! It exists to annotate each chunk the downstream pump reads with [`ChunkPositions`] and to
//! describe cuts ([`CutPoint`]) and clean ends.
//!
//! Invariants (besides those of `http1`):
//! - Every raw cut point inside an SSE body gets exactly one class, the same under every
//!   chunking: a cut point right after a payload byte gets the payload class (see `sse_class`),
//!   a cut point right after a chunk-framing byte gets `chunk-framing`, and the cut point right
//!   after the response head gets the class of payload point 0 (`boundary`). A payload cut
//!   point whose class waits for the next payload byte is reported by the chunk that brings
//!   that byte, as cut point 0 when it is the chunk's first byte (hence `start` may be 0).
//! - `during-replay`: on a resume response (its request carried `Last-Event-ID`) every cut
//!   point inside an event block that tears the event is `during-replay`
//!   ([`SseClass::on_resume`]); each run keeps the class it would have elsewhere as `base`.
//! - `clean_end` follows `http1_clean` (which needs the `base` class: is the cut at a line
//!   start?).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use super::http1::{BODY_LIMIT, DATA_HEAD, LINE_LIMIT, Outbox, ReqInfo, ReqQueue, data_hash};
use super::http1_body::{BodyDecoder, ChunkSpot, Piece};
use super::http1_clean::{CleanEnd, Spot, clean_end_bytes};
use super::http1_head::{
    Framing, HeadBuf, HeadKind, HeadStatus, ResponseHead, is_event_stream, parse_response,
};
use super::http1_view::{ChunkView, Owner, describe, view_at};
use super::position::SseClass;
use super::rpc_head::is_response_head;
use super::sse::{EventSpan, SseEvent, SseScanner};
use super::{
    ChunkPositions, CutPoint, Observation, ObservationSink, PositionRun, StreamSpan, WireObserver,
};
use crate::vocab::StreamInfo;

#[derive(Debug, Clone, Copy)]
enum DownState {
    Head,
    Body(BodyDecoder),
    Opaque,
}

/// The raw offset of payload offset `p` by the segment map `segs` of an [`SseCtx`]
/// (`raw_base` when the map is empty).
pub(super) fn seg_raw(segs: &VecDeque<(u64, u64)>, raw_base: u64, p: u64) -> u64 {
    let i = segs.partition_point(|s| s.0 <= p).saturating_sub(1);
    segs.get(i).map_or(raw_base, |s| s.1 + (p - s.0))
}

/// Forgets the segments that end at or before payload offset `p` (the last one is kept).
pub(super) fn seg_forget(segs: &mut VecDeque<(u64, u64)>, p: u64) {
    while segs.len() > 1 && segs[1].0 <= p {
        segs.pop_front();
    }
}

pub(super) struct SseCtx {
    pub(super) scanner: SseScanner,
    /// (payload offset, raw connection offset) of payload segments: the one holding the start
    /// of the event block in progress, and the current one (at most two between feeds, so the
    /// map does not grow with the reads an event spans).
    pub(super) segs: VecDeque<(u64, u64)>,
    pub(super) events: u64,
    /// The stream's LLM API, when its request named one.
    pub(super) llm: Option<crate::vocab::LlmApi>,
}

struct Resp {
    seq: u64,
    /// Set for SSE responses.
    stream: Option<Arc<StreamInfo>>,
    req: Option<Arc<ReqInfo>>,
    session: Option<String>,
    sse: Option<Box<SseCtx>>,
    body: Vec<u8>,
    body_over: bool,
    /// Raw offset of the body's first byte.
    body_start: u64,
}

/// The server→client observer.
pub struct Http1Downstream {
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    queue: ReqQueue,
    state: DownState,
    head: HeadBuf,
    resp: Option<Resp>,
    orphans: u64,
    raw: u64,
    /// The last observed chunk.
    view: ChunkView,
    /// Earlier chunks not yet wholly delivered (oldest first); empty on the pump's fast path.
    history: VecDeque<ChunkView>,
    /// (payload point, chunk cut point) that map payload to raw in the current segment.
    map: (u64, usize),
    out: Outbox,
}

impl Http1Downstream {
    /// The response in progress as the owner of a chunk's bytes from its start, if any.
    fn current_owner(&self) -> Option<Owner> {
        self.resp.as_ref().map(|r| Owner {
            from: 0,
            seq: r.seq,
            sse: r.sse.is_some(),
            body_start: r.body_start,
            ended: None,
            req: r.req.clone(),
            session: r.session.clone(),
        })
    }

    /// Empties the view for the next chunk, owned from its start by the response in progress
    /// (with its SSE stream, if any). When the view holds exactly that already (the same
    /// response's previous read) it is kept as it is: a stream's reads then clone and drop no
    /// `Arc` or session string, each a write to a line that other connections' reads evicted.
    fn restart_view(&mut self) {
        let v = &mut self.view;
        let same = match (
            &self.resp,
            v.owners.as_slice(),
            v.positions.streams.as_slice(),
        ) {
            (None, [], []) => true,
            (Some(r), [o], spans) => {
                o.continues(r.seq, r.body_start, r.sse.is_some(), &r.req, &r.session)
                    && match (&r.stream, spans) {
                        (None, []) => true,
                        (Some(s), [span]) => span.from == 0 && Arc::ptr_eq(s, &span.stream),
                        _ => false,
                    }
            }
            _ => false,
        };
        if same {
            v.clear_but_owners();
            return;
        }
        v.clear();
        let owner = self.current_owner();
        self.view.owners.extend(owner);
        let span = self.resp.as_ref().and_then(|r| r.stream.clone());
        if let Some(stream) = span {
            self.view
                .positions
                .streams
                .push(StreamSpan { from: 0, stream });
        }
    }

    pub(super) fn new(conn: u64, sink: Arc<dyn ObservationSink>, queue: ReqQueue) -> Self {
        Http1Downstream {
            conn,
            sink,
            queue,
            state: DownState::Head,
            head: HeadBuf::new(HeadKind::Response),
            resp: None,
            orphans: 0,
            raw: 0,
            view: ChunkView::default(),
            history: VecDeque::new(),
            map: (0, 0),
            out: Outbox::default(),
        }
    }

    fn on_head(&mut self, at: usize) {
        let Some(head) = parse_response(self.head.bytes()) else {
            self.state = DownState::Opaque;
            return;
        };
        self.head.clear();
        let status = head.status;
        let interim = (100..200).contains(&status) && status != 101;
        let req = if interim {
            self.queue.lock().ok().and_then(|q| q.front().cloned())
        } else {
            self.queue.lock().ok().and_then(|mut q| q.pop_front())
        };
        let seq = req.as_ref().map_or_else(
            || {
                self.orphans += 1;
                u64::MAX - self.orphans
            },
            |r| r.seq,
        );
        self.out.hold(
            self.view.start + at as u64,
            Observation::Response {
                conn: self.conn,
                seq,
                status,
                content_type: head.content_type.clone(),
                session: head.session.clone(),
            },
        );
        if interim {
            return;
        }
        let method = req.as_ref().map_or("GET", |r| r.method.as_str());
        if status == 101 || (method == "CONNECT" && (200..300).contains(&status)) {
            // Said once: the state stays opaque for the rest of the connection.
            tracing::info!(
                conn = self.conn,
                status,
                "the connection left HTTP/1.1 ({}): its bytes are relayed untouched and no longer observed",
                if status == 101 {
                    "101 Switching Protocols: an Upgrade such as h2c or WebSocket"
                } else {
                    "a CONNECT tunnel"
                }
            );
            self.state = DownState::Opaque;
            return;
        }
        let no_body = method == "HEAD" || status == 204 || status == 304;
        let raw_offset = self.view.start + at as u64;
        let (session, sse, stream) = response_stream(
            self.conn,
            seq,
            req.as_ref(),
            &head,
            no_body,
            &*self.sink,
            raw_offset,
        );
        let is_sse = sse.is_some();
        self.view.owners.push(Owner {
            from: at,
            seq,
            sse: is_sse,
            body_start: self.view.start + at as u64,
            ended: None,
            req: req.clone(),
            session: session.clone(),
        });
        let decoder = match head.framing {
            _ if no_body => BodyDecoder::length(0),
            Framing::Chunked => BodyDecoder::chunked(),
            Framing::Length(n) => BodyDecoder::length(n),
            Framing::Unspecified | Framing::OtherEncoding => BodyDecoder::Close,
            Framing::Invalid => {
                self.state = DownState::Opaque;
                return;
            }
        };
        if let Some(stream) = &stream {
            self.view.positions.streams.push(StreamSpan {
                from: at,
                stream: stream.clone(),
            });
        }
        self.resp = Some(Resp {
            seq,
            stream,
            req,
            session,
            sse,
            body: Vec::new(),
            body_over: false,
            body_start: self.view.start + at as u64,
        });
        if let Some(spot) = decoder.chunk_spot() {
            self.view.spots.push(Spot::Framing {
                start: at,
                end: at,
                after: Some(spot),
            });
        }
        self.state = DownState::Body(decoder);
        // Payload cut point 0 sits right after the head.
        self.on_data(at, &[]);
        if matches!(decoder, BodyDecoder::Length { left: 0 }) {
            self.end_body(at, true);
        }
    }

    /// Payload bytes `bytes` starting at chunk offset `at`.
    fn on_data(&mut self, at: usize, bytes: &[u8]) {
        let Some(resp) = self.resp.as_mut() else {
            return;
        };
        let Some(sse) = resp.sse.as_mut() else {
            if resp.body.len() + bytes.len() <= BODY_LIMIT {
                resp.body.extend_from_slice(bytes);
            } else {
                resp.body_over = true;
            }
            return;
        };
        let SseCtx {
            scanner,
            segs,
            events,
            llm,
        } = &mut **sse;
        let llm = *llm;
        let p_base = scanner.payload_offset();
        let raw_base = self.view.start + at as u64;
        // A later event's raw start is looked up at its block's start, which is at or after
        // the block in progress's start: only the segment holding that start (the last one
        // beginning at or before it) is ever looked up again, besides the new one.
        let block = scanner.event_block_start();
        seg_forget(segs, block);
        segs.truncate(1);
        segs.push_back((p_base, raw_base));
        self.map = (p_base, at);
        let before = self.view.classified.runs.len();
        let (conn, seq) = (self.conn, resp.seq);
        let rpc_id = resp
            .req
            .as_ref()
            .and_then(|r| r.rpc_id.get().cloned().flatten());
        let out = &mut self.out;
        let mut on_event = |e: &SseEvent<'_>, span: EventSpan| {
            let raw_start = seg_raw(segs, raw_base, span.start);
            let raw_end = raw_base + (span.end - p_base);
            seg_forget(segs, span.end);
            let index = *events;
            *events += 1;
            let is_final = rpc_id
                .as_deref()
                .is_some_and(|id| is_response_head(e.data, id));
            let (event, llm_event) =
                event_observations(conn, seq, index, llm, e, raw_start, raw_end);
            out.hold(raw_end, event);
            if let Some(l) = llm_event {
                out.hold(raw_end, l);
            }
            is_final
        };
        let was_following = !scanner.gave_up();
        scanner.feed_classified(bytes, &mut on_event, &mut self.view.classified);
        if was_following && scanner.gave_up() {
            let raw_offset = raw_base + bytes.len() as u64;
            tracing::warn!(
                conn,
                raw_offset,
                "line too long: observer gives up on this SSE stream, bytes still relayed"
            );
            self.sink.record(Observation::ObserverGaveUp {
                conn,
                seq,
                raw_offset,
                reason: format!(
                    "line too long (over {LINE_LIMIT} bytes): observer gives up on this stream, \
                     bytes still relayed"
                ),
            });
        }
        self.take_runs(before);
    }

    /// Converts payload runs `classified.runs[from..]` to chunk runs with the current map.
    fn take_runs(&mut self, from: usize) {
        let (p_base, r_base) = self.map;
        let resume = self
            .resp
            .as_ref()
            .and_then(|r| r.req.as_ref())
            .is_some_and(|q| q.resume);
        for i in from..self.view.classified.runs.len() {
            let r = self.view.classified.runs[i];
            let start = r_base + r.start.saturating_sub(p_base) as usize;
            let end = r_base + r.end.saturating_sub(p_base) as usize;
            self.push_run(
                PositionRun {
                    start,
                    end,
                    class: if resume { r.class.on_resume() } else { r.class },
                    base: r.class,
                    llm: r.llm,
                    event_index: r.event_index,
                    payload_offset: r.start,
                },
                r.facts,
            );
        }
    }

    fn push_run(&mut self, run: PositionRun, facts: u32) {
        if let Some(last) = self.view.positions.runs.last_mut()
            && last.end == run.start
            && last.class == SseClass::ChunkFraming
            && run.class == SseClass::ChunkFraming
            && last.event_index == run.event_index
            && last.payload_offset == run.payload_offset
        {
            last.end = run.end;
            return;
        }
        self.view.positions.runs.push(run);
        self.view.run_facts.push(facts);
    }

    /// Chunk framing bytes `at..at + n`.
    fn on_framing(&mut self, at: usize, n: usize) {
        let Some(sse) = self.resp.as_mut().and_then(|r| r.sse.as_mut()) else {
            return;
        };
        let before = self.view.classified.runs.len();
        let facts = sse.scanner.framing_facts(&mut self.view.classified);
        let run = PositionRun {
            start: at + 1,
            end: at + n + 1,
            class: SseClass::ChunkFraming,
            base: SseClass::ChunkFraming,
            llm: sse.scanner.llm_mark(),
            event_index: sse.scanner.events_dispatched(),
            payload_offset: sse.scanner.payload_offset(),
        };
        self.take_runs(before);
        if n > 0 {
            self.push_run(run, facts);
        }
    }

    fn end_body(&mut self, at: usize, clean: bool) {
        self.state = DownState::Head;
        let Some(mut resp) = self.resp.take() else {
            return;
        };
        let obs = match resp.sse.as_mut() {
            Some(sse) => {
                let before = self.view.classified.runs.len();
                sse.scanner.flush_pending(&mut self.view.classified);
                sse.scanner.finish(&mut |_| {});
                self.take_runs(before);
                Observation::StreamEnd {
                    conn: self.conn,
                    seq: resp.seq,
                    clean,
                }
            }
            None => Observation::ResponseBody {
                conn: self.conn,
                seq: resp.seq,
                body: (!resp.body_over).then(|| bytes::Bytes::from(std::mem::take(&mut resp.body))),
            },
        };
        let raw = self.view.start + at as u64;
        if let Some(owner) = self.view.owners.last_mut() {
            owner.ended = Some(raw);
        }
        self.out.hold(raw, obs);
    }

    fn step_body(&mut self, chunk: &[u8], i: &mut usize, mut dec: BodyDecoder) {
        let piece = dec.step(&chunk[*i..]);
        self.state = DownState::Body(dec);
        match piece {
            // A decoder always consumes from a non-empty input; stop following if not.
            Piece::Data(0) | Piece::Framing(0) => self.state = DownState::Opaque,
            Piece::Data(n) => {
                let left = match dec.chunk_spot() {
                    Some(ChunkSpot::InData(l)) => Some(l),
                    Some(_) => Some(0),
                    None => None,
                };
                self.view.spots.push(Spot::Data {
                    start: *i,
                    end: *i + n,
                    left,
                });
                self.on_data(*i, &chunk[*i..*i + n]);
                *i += n;
                if matches!(dec, BodyDecoder::Length { left: 0 }) {
                    self.end_body(*i, true);
                }
            }
            Piece::Framing(n) => {
                let start = *i;
                self.view.spots.push(Spot::Framing {
                    start,
                    end: start + n,
                    after: dec.chunk_spot(),
                });
                *i += n;
                // The framing pieces that follow at once (a chunk's CR and LF, the next size
                // line) each keep their spot, for clean ends, but are classified as one run: a
                // run per piece would merge into the same one (`push_run`), after as many
                // passes of the framing bookkeeping (pending point, facts, runs).
                while *i < chunk.len() {
                    let mut next = dec;
                    let Piece::Framing(m @ 1..) = next.step(&chunk[*i..]) else {
                        break;
                    };
                    dec = next;
                    self.state = DownState::Body(dec);
                    self.view.spots.push(Spot::Framing {
                        start: *i,
                        end: *i + m,
                        after: dec.chunk_spot(),
                    });
                    *i += m;
                }
                self.on_framing(start, *i - start);
            }
            Piece::End(n) => {
                self.on_framing(*i, n);
                *i += n;
                self.end_body(*i, true);
            }
            Piece::Invalid => {
                self.end_body(*i, false);
                self.state = DownState::Opaque;
            }
        }
    }

    /// Forgets chunk views wholly before the delivered-through offset (keeping one that ends
    /// exactly there: a cut at the next chunk's start may need it).
    fn trim_history(&mut self) {
        let through = self.out.through();
        while self.history.front().is_some_and(|v| v.end() < through) {
            self.history.pop_front();
        }
    }
}

impl WireObserver for Http1Downstream {
    fn delivered_through(&mut self, raw: u64) {
        self.out.release(raw, &*self.sink);
        self.trim_history();
    }

    fn dropped(&mut self, start: u64, _end: u64) {
        self.out.end_at(start);
    }

    fn held_bytes(&self) -> usize {
        let resp = self.resp.as_ref().map_or(0, |r| {
            r.body.capacity()
                + r.sse.as_ref().map_or(0, |s| {
                    s.scanner.held_bytes() + s.segs.capacity() * std::mem::size_of::<(u64, u64)>()
                })
        });
        let views = self.history.len() + 1;
        self.head.held() + resp + self.out.held_bytes() + views * std::mem::size_of::<ChunkView>()
    }

    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions> {
        if self.view.len > 0 && self.out.through() < self.view.end() {
            // The last chunk still waits (queued): keep its view for a cut inside it.
            let old = std::mem::take(&mut self.view);
            self.history.push_back(old);
        }
        self.restart_view();
        self.view.start = self.raw;
        self.view.len = chunk.len();
        self.raw += chunk.len() as u64;
        if let Some(sse) = self.resp.as_ref().and_then(|r| r.sse.as_ref()) {
            self.map = (sse.scanner.payload_offset(), 0);
        }
        self.view.spot_at_start = match self.state {
            DownState::Body(d) => d.chunk_spot(),
            _ => None,
        };
        let mut i = 0;
        while i < chunk.len() {
            match self.state {
                DownState::Opaque => break,
                DownState::Head => match self.head.push(&chunk[i..]) {
                    HeadStatus::Partial => break,
                    HeadStatus::Invalid => self.state = DownState::Opaque,
                    HeadStatus::Complete(n) => {
                        i += n;
                        self.on_head(i);
                    }
                },
                DownState::Body(dec) => self.step_body(chunk, &mut i, dec),
            }
        }
        (!self.view.positions.runs.is_empty()).then_some(&self.view.positions)
    }

    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        self.cut_at(self.view.start + delivered as u64)
    }

    fn cut_at(&mut self, raw: u64) -> CutPoint {
        self.out.release(raw, &*self.sink);
        self.out.end_at(raw);
        let (point, owner) = describe(&self.view, &self.history, raw);
        // The stream the cut fell in ends unclean, unless its body had ended by then.
        if let Some(o) = owner.filter(|o| o.sse && o.ended.is_none_or(|e| e > raw)) {
            self.sink.record(Observation::StreamEnd {
                conn: self.conn,
                seq: o.seq,
                clean: false,
            });
        }
        self.resp = None;
        self.state = DownState::Opaque;
        self.history.clear();
        point
    }

    fn eof(&mut self) {
        if let DownState::Body(dec) = self.state {
            let clean = matches!(dec, BodyDecoder::Close);
            self.end_body(self.view.len, clean);
        }
        self.out.release_delivered(&*self.sink);
        self.state = DownState::Opaque;
    }

    fn clean_end(&mut self, delivered: usize) -> CleanEnd {
        self.clean_end_at(self.view.start + delivered as u64)
    }

    fn clean_end_at(&mut self, raw: u64) -> CleanEnd {
        let Some((v, k)) = view_at(&self.view, &self.history, raw) else {
            return CleanEnd::default();
        };
        let runs = &v.positions.runs;
        let class = runs
            .get(runs.partition_point(|r| r.end <= k))
            .filter(|r| r.start <= k)
            .map(|r| r.base);
        // Cut points whose class says the payload stands at the start of a line.
        let line_start = matches!(
            class,
            Some(
                SseClass::Boundary
                    | SseClass::BeforeDispatch
                    | SseClass::AfterId
                    | SseClass::CrLf
                    | SseClass::DispatchCrLf
            )
        );
        clean_end_bytes(&v.spots, v.spot_at_start, k, line_start)
    }

    fn is_opaque(&self) -> bool {
        matches!(self.state, DownState::Opaque)
    }

    fn passed(&mut self, n: u64) {
        // As `observe` of an opaque chunk that was delivered whole: no positions, the response
        // (if any) owns it.
        self.restart_view();
        self.view.start = self.raw;
        self.view.len = usize::try_from(n).unwrap_or(usize::MAX);
        self.raw += n;
    }
}

/// What a final response head makes of its stream, for the HTTP/1.1 and HTTP/2 observers
/// alike: its session (the response's, else the request's), and for a `text/event-stream`
/// body the SSE scanner (with the LLM reader on an LLM route) and the stream's facts. An
/// encoded event stream is declared unobservable (`ObserverGaveUp`, recorded now) and gets
/// no scanner; an SSE answer to a POST on no known LLM route is noted once per path.
pub(super) fn response_stream(
    conn: u64,
    seq: u64,
    req: Option<&Arc<ReqInfo>>,
    head: &ResponseHead,
    no_body: bool,
    sink: &dyn ObservationSink,
    raw_offset: u64,
) -> (Option<String>, Option<Box<SseCtx>>, Option<Arc<StreamInfo>>) {
    let method = req.map_or("GET", |r| r.method.as_str());
    let session = head
        .session
        .clone()
        .or_else(|| req.and_then(|r| r.session.clone()));
    let event_stream = !no_body && is_event_stream(head.content_type.as_deref());
    // An encoded (gzip, br, deflate, …) event stream is not scanned as plain text: the
    // observer declares it unobservable and relays it as an opaque body.
    let is_sse = event_stream && head.content_encoding.is_none();
    if let Some(encoding) = head.content_encoding.as_deref().filter(|_| event_stream) {
        sink.record(Observation::ObserverGaveUp {
            conn,
            seq,
            raw_offset,
            reason: format!(
                "content-encoding {encoding}: the SSE body is compressed and not observed \
                 (no events, positions or SSE cuts for this stream; bytes still relayed)"
            ),
        });
    }
    // An LLM stream is recognised by its request path (and its SSE content type), never
    // by its bytes.
    let llm = req.and_then(|r| r.llm);
    if let Some(r) = req.filter(|r| {
        is_sse && llm.is_none() && r.method == "POST" && r.rpc_id.get().is_none_or(Option::is_none)
    }) && r.routes.first_notice(&r.path)
    {
        tracing::info!(
            conn,
            path = %super::redact::target(&r.path),
            "POST answered with text/event-stream on a path that names no known LLM API; \
             if it is one, declare it ([[llm_route]] path = \"…\", api = \"chat-completions\" \
             in the profile, or --llm-route PATH=API) to get LLM positions and verdicts"
        );
    }
    let sse = is_sse.then(|| {
        let mut scanner = SseScanner::bounded(DATA_HEAD, LINE_LIMIT);
        if let Some(api) = llm {
            scanner.set_llm(api);
        }
        Box::new(SseCtx {
            scanner,
            segs: VecDeque::new(),
            events: 0,
            llm,
        })
    });
    let stream = sse.is_some().then(|| {
        Arc::new(StreamInfo {
            seq,
            method: method.to_string(),
            path: req.map_or_else(String::new, |r| r.path.clone()),
            session: session.clone(),
            resume: req.is_some_and(|r| r.resume),
        })
    });
    (session, sse, stream)
}

/// The `SseEvent` (and, on an LLM stream, `LlmEvent`) observations of event `index` of the
/// stream `seq`, dispatched by the byte before raw offset `raw_end`; shared by the HTTP/1.1
/// and HTTP/2 observers.
#[allow(clippy::too_many_arguments)]
pub(super) fn event_observations(
    conn: u64,
    seq: u64,
    index: u64,
    llm: Option<crate::vocab::LlmApi>,
    e: &SseEvent<'_>,
    raw_start: u64,
    raw_end: u64,
) -> (Observation, Option<Observation>) {
    // The whole data when short, else the head of its JSON-RPC facts (`sse_data`). An LLM
    // stream's data is a provider's JSON, read by the LLM reader as it streamed: no JSON-RPC
    // to read, so no copy per token.
    let data = llm.is_none().then(|| bytes::Bytes::copy_from_slice(e.data));
    let event = Observation::SseEvent {
        conn,
        seq,
        index,
        id: e.id.map(str::to_string),
        last_event_id: (!e.last_event_id.is_empty()).then(|| e.last_event_id.to_string()),
        event_type: Some(match e.event_type {
            "message" => Cow::Borrowed("message"),
            other => Cow::Owned(other.to_owned()),
        }),
        data_hash: e.data_hash.unwrap_or_else(|| data_hash(e.data)),
        data_len: e.data_len,
        data,
        data_lines: e.data_lines,
        raw_start,
        raw_end,
    };
    let llm = match (llm, e.llm.filter(|f| !f.is_empty())) {
        (Some(api), Some(facts)) => Some(Observation::LlmEvent(super::LlmEventSeen {
            conn,
            seq,
            index,
            api,
            facts: facts.clone(),
            raw_end,
        })),
        _ => None,
    };
    (event, llm)
}
