//! The passive HTTP/1.1 observer of one keep-alive connection, both directions.
//!
//! It exists so that the proxy knows, for every byte it forwards, which message it belongs to
//! and, inside `text/event-stream` response bodies, where the byte sits in the SSE event, and so
//! that the audit learns requests, responses and SSE events from the wire alone.
//!
//! Invariants:
//! - Observers never change bytes and never fail the connection. A direction becomes opaque for
//!   good (bytes pass, no positions, no observations) at anything it cannot follow: a head
//!   `httparse` rejects or longer than 64 KiB, HTTP/2 (its preface fails as a version), TLS, a
//!   malformed chunk, a 101 response, a `CONNECT`, or a request asking for `Upgrade` (its
//!   upstream direction goes opaque after the head, whether or not the server agrees).
//! - Responses pair with requests in order (pipelining): the upstream observer appends the facts
//!   of each request head to a queue shared with the downstream observer, which takes the front
//!   entry for every final (non-1xx) response. The queue's lock is held only to push or pop.
//!   It holds at most [`MAX_PIPELINED`] requests: a client that pipelines more requests than
//!   that ahead of the responses makes the upstream observer go opaque (logged), so a server
//!   that never answers cannot make the proxy's memory grow.
//! - Body lengths follow RFC 9112 §6: no body for HEAD requests and 1xx/204/304 responses;
//!   chunked if the last transfer coding is `chunked`; `Content-Length`; else (responses)
//!   until close. Requests without length fields have no body.
//! - Delivery rule (the contract on [`WireObserver`]): an observation is held with the raw
//!   offset just after the byte that produced it and released when the pump reports delivery
//!   through that offset; a dropped range or a cut at or before it discards it. So a `Request`
//!   is recorded if and only if its last byte was written to the server, and an `SseEvent` if
//!   and only if the byte that dispatched it reached the client; a cut SSE body then ends with
//!   `StreamEnd { clean: false }`.
//! - A `text/event-stream` response with a `Content-Encoding` other than `identity` is declared
//!   unobservable (`ObserverGaveUp` naming the encoding) and relayed as an opaque body: it is
//!   never scanned as plain SSE, so it yields no events, positions or SSE cuts.
//! - Bodies and SSE data are kept for observations only up to [`BODY_LIMIT`] bytes; larger ones
//!   are hashed (SSE) or reported as `None`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use super::http1_body::{BodyDecoder, Piece};
use super::http1_head::{Framing, HeadBuf, HeadKind, HeadStatus, RequestHead, parse_request};
use super::llm_routes::LlmRoutes;
use super::{CutPoint, Observation, ObservationSink, WireObserver};

pub use super::http1_down::Http1Downstream;

/// Bodies up to this many bytes are kept in observations.
pub const BODY_LIMIT: usize = 64 * 1024;

/// Requests the observer keeps waiting for their responses (see the module doc).
pub const MAX_PIPELINED: usize = 1024;

/// The observer keeps an SSE event's data whole up to this many bytes (the audit parses such
/// messages in full: requests, progress, initialize results); a longer value is hashed and read
/// for its JSON-RPC id and kind as it streams, and not kept (`sse_data`).
pub const DATA_HEAD: usize = 4096;

/// A line of an SSE body longer than this makes the observer give up on the stream (bytes are
/// still relayed; no more events or positions are reported for it).
pub const LINE_LIMIT: u64 = 64 << 20;

/// The facts of one request, shared between the two directions.
#[derive(Debug)]
pub(super) struct ReqInfo {
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub session: Option<String>,
    /// The JSON-RPC id of the request body (JSON text, e.g. `7` or `"a"`), once the body ended.
    pub rpc_id: OnceLock<Option<String>>,
    /// The request carried `Last-Event-ID`: its response stream is a resume (its events are
    /// classified `during-replay`, see `http1_down`).
    pub resume: bool,
    /// The LLM API its path names (a `POST` on a known or declared route).
    pub llm: Option<crate::vocab::LlmApi>,
    /// Routes of its proxy (for the once-per-path notice of an unrecognised event stream).
    pub routes: Arc<LlmRoutes>,
}

/// Request facts waiting for their responses.
pub(super) type ReqQueue = Arc<Mutex<VecDeque<Arc<ReqInfo>>>>;

/// The two observers of connection `conn`: `(upstream, downstream)`.
pub fn observer_pair(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
    observer_pair_routed(conn, sink, LlmRoutes::known())
}

/// [`observer_pair`], recognising LLM streams on `routes` (declared routes, then the known
/// paths).
pub fn observer_pair_routed(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    routes: Arc<LlmRoutes>,
) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
    let queue: ReqQueue = Arc::default();
    let mut up = Http1Upstream::new(conn, sink.clone(), queue.clone());
    up.routes = routes;
    let down = Http1Downstream::new(conn, sink, queue);
    (Box::new(up), Box::new(down))
}

/// Observations held until the bytes that produced them are delivered (by raw offset).
#[derive(Default)]
pub(super) struct Outbox {
    /// (raw offset just after the producing bytes, observation), in increasing offset order.
    held: VecDeque<(u64, Observation)>,
    /// Every byte before this offset was delivered.
    through: u64,
    /// Nothing at or after this offset will ever be delivered (a drop or a cut).
    end: Option<u64>,
    /// Approximate bytes of the held observations.
    bytes: usize,
}

/// Slots an emptied [`Outbox`] keeps whatever it released.
const KEEP_SLOTS: usize = 8;

/// Approximate memory of one observation.
pub(super) fn size_of_obs(obs: &Observation) -> usize {
    let payload = match obs {
        Observation::SseEvent { data, .. } => data.as_ref().map_or(0, |d| d.len()),
        Observation::Request { body, .. } => body.as_ref().map_or(0, |d| d.len()),
        Observation::ResponseBody { body, .. } => body.as_ref().map_or(0, |d| d.len()),
        _ => 0,
    };
    std::mem::size_of::<Observation>() + payload
}

impl Outbox {
    /// Holds `obs` until the bytes before raw offset `at` are delivered.
    pub(super) fn hold(&mut self, at: u64, obs: Observation) {
        if self.end.is_none_or(|end| at <= end) {
            self.bytes += size_of_obs(&obs);
            self.held.push_back((at, obs));
        }
    }

    /// Every byte before `raw` was delivered: releases what they produced.
    pub(super) fn release(&mut self, raw: u64, sink: &dyn ObservationSink) {
        self.through = self.through.max(raw);
        let through = self.through;
        if self.held.front().is_none_or(|(at, _)| *at > through) {
            self.trim(0);
            return;
        }
        let (held, bytes) = (&mut self.held, &mut self.bytes);
        let mut released = 0;
        // A sink takes every item; should one not, the rest are released by the next call.
        sink.record_all(&mut std::iter::from_fn(|| {
            if held.front().is_none_or(|(at, _)| *at > through) {
                return None;
            }
            let (_, obs) = held.pop_front()?;
            *bytes = bytes.saturating_sub(size_of_obs(&obs));
            released += 1;
            Some(obs)
        }));
        self.trim(released);
    }

    /// Keeps the storage of an emptied outbox while it is small ([`KEEP_SLOTS`]: a paced
    /// stream holds an event's one or two observations per read, and would otherwise allocate
    /// and free per read) or was well used by the batch just released (a busy stream holds
    /// hundreds per read, and would otherwise regrow through every size per read). An emptied
    /// outbox that is large and was little used is freed: a stream that waits between
    /// messages keeps at most [`KEEP_SLOTS`] slots of 256 bytes (2 KB; a paced LLM stream's
    /// two observations per read keep 4, 1 KB). Never more than the peak a read produced, so
    /// memory per connection stays bounded by the read size.
    fn trim(&mut self, released: usize) {
        let cap = self.held.capacity();
        if self.held.is_empty() && cap > KEEP_SLOTS && released < cap / 4 {
            self.held = VecDeque::new();
        }
    }

    /// Releases what was already delivered (facts held after their bytes left, e.g. at EOF).
    pub(super) fn release_delivered(&mut self, sink: &dyn ObservationSink) {
        self.release(self.through, sink);
    }

    /// Nothing at or after `raw` will be delivered: discards what those bytes produced.
    pub(super) fn end_at(&mut self, raw: u64) {
        let end = self.end.map_or(raw, |e| e.min(raw));
        self.end = Some(end);
        while self.held.back().is_some_and(|(at, _)| *at > end) {
            if let Some((_, obs)) = self.held.pop_back() {
                self.bytes = self.bytes.saturating_sub(size_of_obs(&obs));
            }
        }
        self.trim(0);
    }

    /// Approximate bytes held.
    pub(super) fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// The delivered-through offset.
    pub(super) fn through(&self) -> u64 {
        self.through
    }
}

/// The 64-bit hash of an event's data the audit compares (XXH3-64: many GB/s, so hashing every
/// event does not bound the observer's throughput; FNV-1a, byte at a time, did at ~500 MB/s).
pub fn data_hash(data: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(data)
}

/// The JSON-RPC id of a request message, as JSON text; `None` for notifications and non-JSON.
pub(super) fn rpc_request_id(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let o = v.as_object()?;
    o.get("method")?;
    o.get("id").map(|id| id.to_string())
}

enum UpState {
    Head,
    Body {
        body: BodyDecoder,
        leaves_http: bool,
    },
    Opaque,
}

/// The client→server observer: request heads and bodies.
pub struct Http1Upstream {
    conn: u64,
    sink: Arc<dyn ObservationSink>,
    /// Which paths are LLM APIs.
    routes: Arc<LlmRoutes>,
    queue: ReqQueue,
    state: UpState,
    head: HeadBuf,
    seq: u64,
    /// The request whose body is being read, with its head facts.
    cur: Option<(Arc<ReqInfo>, RequestHead)>,
    body: Vec<u8>,
    body_over: bool,
    /// A POST to an LLM API: its API, and the hash and length of its whole body so far.
    llm_body: Option<(crate::vocab::LlmApi, Box<xxhash_rust::xxh3::Xxh3>, u64)>,
    chunk_start: u64,
    raw: u64,
    out: Outbox,
}

impl Http1Upstream {
    fn new(conn: u64, sink: Arc<dyn ObservationSink>, queue: ReqQueue) -> Self {
        Http1Upstream {
            conn,
            sink,
            routes: LlmRoutes::known(),
            queue,
            state: UpState::Head,
            head: HeadBuf::new(HeadKind::Request),
            seq: 0,
            cur: None,
            body: Vec::new(),
            body_over: false,
            llm_body: None,
            chunk_start: 0,
            raw: 0,
            out: Outbox::default(),
        }
    }

    fn on_head(&mut self, at: usize) {
        let Some(req) = parse_request(self.head.bytes()) else {
            self.state = UpState::Opaque;
            return;
        };
        self.head.clear();
        let info = Arc::new(ReqInfo {
            seq: self.seq,
            method: req.method.clone(),
            path: req.path.clone(),
            session: req.session.clone(),
            rpc_id: OnceLock::new(),
            resume: req.last_event_id.is_some(),
            llm: self
                .routes
                .api_of(&req.path)
                .filter(|_| req.method == "POST"),
            routes: self.routes.clone(),
        });
        self.seq += 1;
        let queued = match self.queue.lock() {
            Ok(mut q) if q.len() < MAX_PIPELINED => {
                q.push_back(info.clone());
                true
            }
            _ => false,
        };
        if !queued {
            tracing::warn!(
                conn = self.conn,
                "more than {MAX_PIPELINED} requests await their responses: the HTTP observer \
                 stops following this connection's requests (bytes are still relayed)"
            );
            self.state = UpState::Opaque;
            return;
        }
        let body = match req.framing {
            Framing::Length(n) => BodyDecoder::length(n),
            Framing::Chunked => BodyDecoder::chunked(),
            Framing::Unspecified => BodyDecoder::length(0),
            Framing::OtherEncoding | Framing::Invalid => {
                self.finish_request(info, req, at);
                self.state = UpState::Opaque;
                return;
            }
        };
        let leaves_http = req.leaves_http;
        self.body.clear();
        self.body_over = false;
        self.llm_body = info
            .llm
            .map(|api| (api, Box::new(xxhash_rust::xxh3::Xxh3::new()), 0));
        self.cur = Some((info, req));
        self.state = UpState::Body { body, leaves_http };
    }

    fn finish_request(&mut self, info: Arc<ReqInfo>, req: RequestHead, at: usize) {
        let body = (!self.body_over && !self.body.is_empty())
            .then(|| bytes::Bytes::copy_from_slice(&self.body));
        let _ = info.rpc_id.set(body.as_deref().and_then(rpc_request_id));
        let llm = self
            .llm_body
            .take()
            .map(|(api, hash, len)| (api, hash.digest(), len));
        let (request, llm) = request_observations(self.conn, info.seq, req, body, llm);
        self.out.hold(self.chunk_start + at as u64, request);
        if let Some(llm) = llm {
            self.out.hold(self.chunk_start + at as u64, llm);
        }
    }
}

/// The `Request` (and, on an LLM route, `LlmRequest`) observations of a request whose last
/// byte was read: `llm` is its API with the hash and length of its whole body. Shared by the
/// HTTP/1.1 and HTTP/2 observers, so that both report a request with the same facts.
pub(super) fn request_observations(
    conn: u64,
    seq: u64,
    req: RequestHead,
    body: Option<bytes::Bytes>,
    llm: Option<(crate::vocab::LlmApi, u64, u64)>,
) -> (Observation, Option<Observation>) {
    let llm = llm.map(|(api, body_hash, body_len)| {
        Observation::LlmRequest(super::LlmRequestSeen {
            conn,
            seq,
            api,
            body_hash,
            body_len,
            idempotency_key: req.idempotency_key.clone(),
            retry_count: req.retry_count,
        })
    });
    let request = Observation::Request {
        conn,
        seq,
        method: req.method,
        path: req.path,
        session: req.session,
        last_event_id: req.last_event_id,
        protocol_version: req.protocol_version,
        has_authorization: req.has_authorization,
        idempotency_key: req.idempotency_key,
        accepts_event_stream: req.accepts_event_stream,
        body,
    };
    (request, llm)
}

impl WireObserver for Http1Upstream {
    fn delivered_through(&mut self, raw: u64) {
        self.out.release(raw, &*self.sink);
    }

    fn dropped(&mut self, start: u64, _end: u64) {
        self.out.end_at(start);
    }

    fn held_bytes(&self) -> usize {
        self.head.held() + self.body.capacity() + self.out.held_bytes()
    }

    fn observe(&mut self, chunk: &[u8]) -> Option<&super::ChunkPositions> {
        self.chunk_start = self.raw;
        self.raw += chunk.len() as u64;
        let mut i = 0;
        while i < chunk.len() || matches!(self.state, UpState::Body { .. }) {
            match &mut self.state {
                UpState::Opaque => break,
                UpState::Head => match self.head.push(&chunk[i..]) {
                    HeadStatus::Partial => break,
                    HeadStatus::Invalid => self.state = UpState::Opaque,
                    HeadStatus::Complete(n) => {
                        i += n;
                        self.on_head(i);
                    }
                },
                UpState::Body { body, leaves_http } => match body.step(&chunk[i..]) {
                    Piece::Data(0) | Piece::Framing(0) => break,
                    Piece::Data(n) => {
                        if let Some((_, h, len)) = self.llm_body.as_mut() {
                            h.update(&chunk[i..i + n]);
                            *len += n as u64;
                        }
                        if self.body.len() + n <= BODY_LIMIT {
                            self.body.extend_from_slice(&chunk[i..i + n]);
                        } else {
                            self.body_over = true;
                        }
                        i += n;
                    }
                    Piece::Framing(n) => i += n,
                    Piece::End(n) => {
                        i += n;
                        let leaves = *leaves_http;
                        if let Some((info, req)) = self.cur.take() {
                            self.finish_request(info, req, i);
                        }
                        self.state = if leaves {
                            UpState::Opaque
                        } else {
                            UpState::Head
                        };
                    }
                    Piece::Invalid => self.state = UpState::Opaque,
                },
            }
        }
        None
    }

    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        self.cut_at(self.chunk_start + delivered as u64)
    }

    fn cut_at(&mut self, raw: u64) -> CutPoint {
        self.out.release(raw, &*self.sink);
        self.out.end_at(raw);
        CutPoint {
            raw_offset: raw,
            ..CutPoint::default()
        }
    }

    fn eof(&mut self) {
        self.out.release_delivered(&*self.sink);
    }

    fn is_opaque(&self) -> bool {
        matches!(self.state, UpState::Opaque)
    }

    fn passed(&mut self, n: u64) {
        // The pump reports these bytes delivered right after (`delivered_through`).
        self.chunk_start = self.raw;
        self.raw += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(Mutex<Vec<Observation>>);
    impl ObservationSink for Count {
        fn record(&self, obs: Observation) {
            self.0.lock().unwrap().push(obs);
        }
    }

    #[test]
    fn an_outbox_releases_in_offset_order_and_keeps_only_storage_it_uses() {
        let sink = Count(Mutex::new(Vec::new()));
        let mut out = Outbox::default();
        for (at, conn) in [(10, 1), (20, 2), (30, 3)] {
            out.hold(at, Observation::ConnClosed { conn });
        }
        out.release(20, &sink);
        assert_eq!(sink.0.lock().unwrap().len(), 2);
        out.release(30, &sink);
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(
            got,
            [1, 2, 3]
                .map(|conn| Observation::ConnClosed { conn })
                .to_vec()
        );
        // A paced stream's few slots are kept for its next read.
        let small = out.held.capacity();
        assert!((3..=KEEP_SLOTS).contains(&small), "{small}");
        assert_eq!(out.held_bytes(), 0);
        // A busy stream's read: its storage is kept while reads fill it.
        for k in 0..1000 {
            out.hold(100 + k, Observation::ConnClosed { conn: k });
        }
        out.release(1100, &sink);
        let busy = out.held.capacity();
        assert!(busy >= 1000, "{busy}");
        for k in 0..1000 {
            out.hold(1200 + k, Observation::ConnClosed { conn: k });
        }
        out.release(2200, &sink);
        assert_eq!(
            out.held.capacity(),
            busy,
            "no regrowth for the next busy read"
        );
        // Then a read with one observation: the large storage is freed.
        out.hold(2300, Observation::ConnClosed { conn: 1 });
        out.release(2300, &sink);
        assert_eq!((out.held.capacity(), out.held_bytes()), (0, 0));
        // What a cut discards is freed too.
        for k in 0..100 {
            out.hold(2400 + k, Observation::ConnClosed { conn: k });
        }
        out.end_at(2350);
        assert_eq!((out.held.capacity(), out.held_bytes()), (0, 0));
        assert_eq!(sink.0.lock().unwrap().len(), 2004);
    }
}
