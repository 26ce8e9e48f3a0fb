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
//! - Body lengths follow RFC 9112 §6: no body for HEAD requests and 1xx/204/304 responses;
//!   chunked if the last transfer coding is `chunked`; `Content-Length`; else (responses)
//!   until close. Requests without length fields have no body.
//! - Delivery rule: an observation becomes visible only when the bytes that produced it were
//!   delivered. Observations of a chunk are held until the pump shows what it delivered: all of
//!   them on the next `observe` or on `eof` (the previous chunk was then written whole), and on
//!   `cut_point(k)` only those whose last byte lies in the first `k` bytes; the rest are dropped,
//!   then a cut SSE body ends with `StreamEnd { clean: false }`. So an `SseEvent` is recorded if
//!   and only if the byte that dispatched it reached the client.
//! - Bodies and SSE data are kept for observations only up to [`BODY_LIMIT`] bytes; larger ones
//!   are hashed (SSE) or reported as `None`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use super::http1_body::{BodyDecoder, Piece};
use super::http1_head::{Framing, HeadBuf, HeadKind, HeadStatus, RequestHead, parse_request};
use super::{CutPoint, Observation, ObservationSink, WireObserver};

pub use super::http1_down::Http1Downstream;

/// Bodies and SSE data up to this many bytes are kept in observations.
pub const BODY_LIMIT: usize = 64 * 1024;

/// The facts of one request, shared between the two directions.
#[derive(Debug)]
pub(super) struct ReqInfo {
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub session: Option<String>,
    /// The JSON-RPC id of the request body (JSON text, e.g. `7` or `"a"`), once the body ended.
    pub rpc_id: OnceLock<Option<String>>,
}

/// Request facts waiting for their responses.
pub(super) type ReqQueue = Arc<Mutex<VecDeque<Arc<ReqInfo>>>>;

/// The two observers of connection `conn`: `(upstream, downstream)`.
pub fn observer_pair(
    conn: u64,
    sink: Arc<dyn ObservationSink>,
) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
    let queue: ReqQueue = Arc::default();
    let up = Http1Upstream::new(conn, sink.clone(), queue.clone());
    let down = Http1Downstream::new(conn, sink, queue);
    (Box::new(up), Box::new(down))
}

/// Observations held until the bytes that produced them are delivered.
#[derive(Default)]
pub(super) struct Outbox {
    /// (chunk cut point at which the observation is delivered, observation)
    held: Vec<(usize, Observation)>,
}

impl Outbox {
    pub(super) fn hold(&mut self, at: usize, obs: Observation) {
        self.held.push((at, obs));
    }

    /// Everything held was delivered.
    pub(super) fn release_all(&mut self, sink: &dyn ObservationSink) {
        for (_, obs) in self.held.drain(..) {
            sink.record(obs);
        }
    }

    /// Only the first `delivered` bytes of the chunk were delivered.
    pub(super) fn release_upto(&mut self, delivered: usize, sink: &dyn ObservationSink) {
        for (at, obs) in self.held.drain(..) {
            if at <= delivered {
                sink.record(obs);
            }
        }
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

/// True if and only if `data` is a JSON-RPC response (result or error) with id `id` (JSON text).
pub(super) fn is_response_to(data: &[u8], id: &str) -> bool {
    let first = data.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        return false;
    }
    let (Ok(v), Ok(id)) = (
        serde_json::from_slice::<serde_json::Value>(data),
        serde_json::from_str::<serde_json::Value>(id),
    ) else {
        return false;
    };
    v.get("id") == Some(&id) && (v.get("result").is_some() || v.get("error").is_some())
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
    queue: ReqQueue,
    state: UpState,
    head: HeadBuf,
    seq: u64,
    /// The request whose body is being read, with its head facts.
    cur: Option<(Arc<ReqInfo>, RequestHead)>,
    body: Vec<u8>,
    body_over: bool,
    chunk_start: u64,
    raw: u64,
    out: Outbox,
}

impl Http1Upstream {
    fn new(conn: u64, sink: Arc<dyn ObservationSink>, queue: ReqQueue) -> Self {
        Http1Upstream {
            conn,
            sink,
            queue,
            state: UpState::Head,
            head: HeadBuf::new(HeadKind::Request),
            seq: 0,
            cur: None,
            body: Vec::new(),
            body_over: false,
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
        });
        self.seq += 1;
        if let Ok(mut q) = self.queue.lock() {
            q.push_back(info.clone());
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
        self.cur = Some((info, req));
        self.state = UpState::Body { body, leaves_http };
    }

    fn finish_request(&mut self, info: Arc<ReqInfo>, req: RequestHead, at: usize) {
        let body = (!self.body_over && !self.body.is_empty())
            .then(|| bytes::Bytes::copy_from_slice(&self.body));
        let _ = info.rpc_id.set(body.as_deref().and_then(rpc_request_id));
        self.out.hold(
            at,
            Observation::Request {
                conn: self.conn,
                seq: info.seq,
                method: req.method,
                path: req.path,
                session: req.session,
                last_event_id: req.last_event_id,
                protocol_version: req.protocol_version,
                has_authorization: req.has_authorization,
                body,
            },
        );
    }
}

impl WireObserver for Http1Upstream {
    fn delivered(&mut self) {
        self.out.release_all(&*self.sink);
    }

    fn observe(&mut self, chunk: &[u8]) -> Option<&super::ChunkPositions> {
        self.out.release_all(&*self.sink);
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
        self.out.release_upto(delivered, &*self.sink);
        CutPoint {
            raw_offset: self.chunk_start + delivered as u64,
            ..CutPoint::default()
        }
    }

    fn eof(&mut self) {
        self.out.release_all(&*self.sink);
    }

    fn is_opaque(&self) -> bool {
        matches!(self.state, UpState::Opaque)
    }

    fn passed(&mut self, n: u64) {
        self.out.release_all(&*self.sink);
        self.chunk_start = self.raw;
        self.raw += n;
    }
}
