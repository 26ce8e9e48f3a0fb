//! The server→client side of the h2 observer: response heads, bodies, and for
//! `text/event-stream` responses the SSE scanner over the stream's `DATA` bodies with the
//! position of every cut point — the same scanner, classifier and observations the HTTP/1.1
//! observer drives (`http1_down::response_stream`, `event_observations`).
//!
//! Invariants (besides those of `half`):
//! - Every payload cut point of an SSE stream gets exactly one class, the same under every
//!   chunking, placed inside that stream's `DATA` bodies: a point whose class waits for the
//!   next payload byte is resolved by that byte within the same frame body, and at the end of
//!   a body it is classified as not followed by a line end (as HTTP/1.1 chunk framing does).
//!   So no cut point lies in a frame header, padding or another frame.
//! - On a resume stream (its request carried `Last-Event-ID`) classes map through
//!   `SseClass::on_resume`, the structural class kept as `base`.
//! - A response ends clean at `END_STREAM`, unclean at a reset (by either endpoint or the
//!   proxy), at the connection's cut and at EOF.

use std::sync::Arc;

use super::half::H2Half;
use super::headers::Fields;
use super::view::{Exchange, Piece};
use crate::vocab::StreamInfo;
use crate::wire::http1::{BODY_LIMIT, LINE_LIMIT};
use crate::wire::http1_down::{SseCtx, event_observations, response_stream, seg_forget, seg_raw};
use crate::wire::rpc_head::is_response_head;
use crate::wire::sse::{EventSpan, SseEvent};
use crate::wire::{Observation, PositionRun, StreamSpan};

/// A response whose body is being read.
pub(super) struct Resp {
    ex: Arc<Exchange>,
    stream: Option<Arc<StreamInfo>>,
    sse: Option<Box<SseCtx>>,
    body: Vec<u8>,
    over: bool,
    body_len: u64,
    /// (payload offset, view offset) of the current body piece's first byte.
    map: (u64, usize),
    /// SSE only: where the stream stands at the end of its last `DATA` body, so a cut of the
    /// whole connection can say what it tore on this stream too (see [`H2Half::stands`]).
    tail: Option<Tail>,
    /// Raw offset just after the response head's frame: a connection cut before it leaves
    /// the client without this response (no stream began, none ends).
    head_end: u64,
}

/// The class and facts of the cut point at the end of a stream's last `DATA` body (all
/// `Copy`: kept per frame without allocating; the ids are read from the scanner when asked).
#[derive(Debug, Clone, Copy)]
struct Tail {
    raw: u64,
    payload: u64,
    class: crate::wire::SseClass,
    event_index: u64,
    block_start: u64,
    data_line: u32,
}

impl Resp {
    pub(super) fn is_sse(&self) -> bool {
        self.sse.is_some()
    }

    /// Whether the response head had reached the client once the bytes before raw `raw` were
    /// delivered.
    pub(super) fn head_before(&self, raw: u64) -> bool {
        self.head_end <= raw
    }

    pub(super) fn held_bytes(&self) -> usize {
        self.body.capacity()
            + self.sse.as_ref().map_or(0, |s| {
                s.scanner.held_bytes() + s.segs.capacity() * std::mem::size_of::<(u64, u64)>()
            })
    }
}

impl H2Half {
    /// A decoded response head (or trailers) on `stream`, its frame ending at raw `end`.
    pub(super) fn down_headers(&mut self, stream: u32, fields: Fields, end: u64) {
        if self.resps.contains_key(&stream) {
            return; // trailers: only their END_STREAM matters
        }
        let Some(head) = fields.response() else {
            return;
        };
        let Some(req) = self.shared.get(stream) else {
            return; // not tracked (over the cap, pushed, or already reset)
        };
        let (conn, seq) = (self.conn, u64::from(stream));
        self.out.hold(
            end,
            stream,
            Observation::Response {
                conn,
                seq,
                status: head.status,
                content_type: head.content_type.clone(),
                session: head.session.clone(),
            },
        );
        if (100..200).contains(&head.status) {
            return;
        }
        let no_body = req.method == "HEAD" || head.status == 204 || head.status == 304;
        let (session, sse, info) =
            response_stream(conn, seq, Some(&req), &head, no_body, &*self.sink, end);
        let ex = Arc::new(Exchange {
            stream,
            req,
            session,
            sse: sse.is_some(),
        });
        self.resps.insert(
            stream,
            Resp {
                ex,
                stream: info,
                sse,
                body: Vec::new(),
                over: false,
                body_len: 0,
                map: (0, 0),
                tail: None,
                head_end: end,
            },
        );
    }

    /// A `DATA` frame of `stream` starts; its body begins at view offset `at`.
    pub(super) fn down_data_start(&mut self, stream: u32, at: usize) {
        if let Some(r) = self.resps.get_mut(&stream) {
            r.map = (r.sse.as_ref().map_or(0, |s| s.scanner.payload_offset()), at);
        }
    }

    /// Body bytes of `stream` at view offset `at`.
    pub(super) fn down_data(&mut self, stream: u32, bytes: &[u8], at: usize) {
        let Some(resp) = self.resps.get_mut(&stream) else {
            return;
        };
        let view = &mut self.view;
        view.pieces.push(Piece {
            from: at,
            to: at + bytes.len(),
            body_before: resp.body_len,
            ex: resp.ex.clone(),
        });
        resp.body_len += bytes.len() as u64;
        let Some(sse) = resp.sse.as_mut() else {
            if resp.body.len() + bytes.len() <= BODY_LIMIT {
                resp.body.extend_from_slice(bytes);
            } else {
                resp.over = true;
            }
            return;
        };
        if let Some(s) = &resp.stream
            && view
                .positions
                .streams
                .last()
                .is_none_or(|l| !Arc::ptr_eq(&l.stream, s))
        {
            view.positions.streams.push(StreamSpan {
                from: at,
                stream: s.clone(),
            });
        }
        let SseCtx {
            scanner,
            segs,
            events,
            llm,
        } = &mut **sse;
        let llm = *llm;
        let p_base = scanner.payload_offset();
        let raw_base = view.start + at as u64;
        // As in `http1_down`: keep the segment holding the block in progress's start and the
        // new one (a later event's raw start is looked up at or after it).
        let block = scanner.event_block_start();
        seg_forget(segs, block);
        segs.truncate(1);
        segs.push_back((p_base, raw_base));
        resp.map = (p_base, at);
        let before = view.classified.runs.len();
        let (conn, out) = (self.conn, &mut self.out);
        let rpc_id = resp.ex.req.rpc_id.get().cloned().flatten();
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
                event_observations(conn, u64::from(stream), index, llm, e, raw_start, raw_end);
            out.hold(raw_end, stream, event);
            if let Some(l) = llm_event {
                out.hold(raw_end, stream, l);
            }
            is_final
        };
        let was_following = !scanner.gave_up();
        scanner.feed_classified(bytes, &mut on_event, &mut view.classified);
        if was_following && scanner.gave_up() {
            let raw_offset = raw_base + bytes.len() as u64;
            tracing::warn!(
                conn,
                stream,
                raw_offset,
                "line too long: observer gives up on this SSE stream, bytes still relayed"
            );
            self.sink.record(Observation::ObserverGaveUp {
                conn,
                seq: u64::from(stream),
                raw_offset,
                reason: format!(
                    "line too long (over {LINE_LIMIT} bytes): observer gives up on this stream, \
                     bytes still relayed"
                ),
            });
        }
        take_runs(view, resp, before);
    }

    /// The body of `stream`'s current `DATA` frame ended at view offset `at`: a cut point that
    /// waits for its next byte is classified now (the next bytes on the wire are not payload).
    pub(super) fn down_data_end(&mut self, stream: u32, at: usize) {
        let Some(resp) = self.resps.get_mut(&stream) else {
            return;
        };
        let Some(sse) = resp.sse.as_mut() else {
            return;
        };
        let before = self.view.classified.runs.len();
        sse.scanner.flush_pending(&mut self.view.classified);
        let payload = sse.scanner.payload_offset();
        let classified = &self.view.classified;
        if let Some(run) = classified.run_at(payload)
            && let Some(f) = classified.facts.get(run.facts as usize)
        {
            resp.tail = Some(Tail {
                raw: self.view.start + at as u64,
                payload,
                class: if resp.ex.req.resume {
                    run.class.on_resume()
                } else {
                    run.class
                },
                event_index: run.event_index,
                block_start: f.block_start,
                data_line: f.data_line,
            });
        }
        take_runs(&mut self.view, resp, before);
    }

    /// Where each SSE stream still open, `except` the one a cut fell in, stands: the cut of
    /// the whole connection delivered each of them through the end of its last `DATA` body.
    /// One point per SSE stream (`h2_stream` set), described as a stream-scope cut at that end
    /// would be: class, event index, ids, torn bytes, data line; a stream with no body yet
    /// stands at its start (`boundary`, payload 0).
    pub fn stands(&self, except: u32) -> Vec<crate::wire::CutPoint> {
        let mut out: Vec<crate::wire::CutPoint> = self
            .resps
            .iter()
            .filter(|(id, _)| **id != except)
            .filter_map(|(id, r)| {
                // A stream with its head but no body yet stands at the body's start: it was
                // cut too (a resume cut before its first event is no empty replay).
                let sse = r.sse.as_ref()?;
                let t = r.tail.unwrap_or(Tail {
                    raw: r.head_end,
                    payload: 0,
                    class: crate::wire::SseClass::Boundary,
                    event_index: 0,
                    block_start: 0,
                    data_line: 0,
                });
                let scanner = &sse.scanner;
                let last = scanner.last_event_id();
                Some(crate::wire::CutPoint {
                    class: Some(t.class),
                    raw_offset: t.raw,
                    payload_offset: Some(t.payload),
                    event_index: Some(t.event_index),
                    pending_id: scanner.pending_id().map(str::to_owned),
                    last_committed_id: (!last.is_empty()).then(|| last.to_owned()),
                    torn_bytes: if t.class.tears_event() {
                        t.payload.saturating_sub(t.block_start)
                    } else {
                        0
                    },
                    data_line: (t.data_line > 0).then_some(t.data_line),
                    request: Some(format!(
                        "{} {}",
                        r.ex.req.method,
                        crate::wire::redact::target(&r.ex.req.path)
                    )),
                    session: r.ex.session.clone(),
                    rpc_id: r.ex.req.rpc_id.get().cloned().flatten(),
                    exchange: Some(u64::from(*id)),
                    h2_stream: Some(u64::from(*id)),
                    with_connection: true,
                    ..crate::wire::CutPoint::default()
                })
            })
            .collect();
        out.sort_unstable_by_key(|p| p.h2_stream);
        out
    }

    /// `stream`'s response ended at raw offset `at` (`clean`: with `END_STREAM`).
    pub(super) fn end_response(&mut self, stream: u32, at: u64, clean: bool) {
        let Some(mut resp) = self.resps.remove(&stream) else {
            return;
        };
        self.shared.close(stream);
        let seq = u64::from(stream);
        let obs = match resp.sse.as_mut() {
            Some(sse) => {
                sse.scanner.finish(&mut |_| {});
                Observation::StreamEnd {
                    conn: self.conn,
                    seq,
                    clean,
                }
            }
            None if clean => Observation::ResponseBody {
                conn: self.conn,
                seq,
                body: (!resp.over).then(|| bytes::Bytes::from(std::mem::take(&mut resp.body))),
            },
            None => return,
        };
        self.out.hold(at, stream, obs);
    }

    /// `stream`'s response (if any) ended without `END_STREAM` at raw offset `at`.
    pub(super) fn end_response_unclean(&mut self, stream: u32, at: u64) {
        self.end_response(stream, at, false);
    }
}

/// Converts payload runs `view.classified.runs[from..]` of `resp` to view runs.
fn take_runs(view: &mut super::view::View, resp: &Resp, from: usize) {
    let (p_base, at) = resp.map;
    let resume = resp.ex.req.resume;
    for i in from..view.classified.runs.len() {
        let r = view.classified.runs[i];
        view.positions.runs.push(PositionRun {
            start: at + r.start.saturating_sub(p_base) as usize,
            end: at + r.end.saturating_sub(p_base) as usize,
            class: if resume { r.class.on_resume() } else { r.class },
            base: r.class,
            llm: r.llm,
            event_index: r.event_index,
            payload_offset: r.start,
        });
        view.run_facts.push(r.facts);
    }
}
