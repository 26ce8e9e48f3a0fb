//! The seam between the pump and the wire observers, and the observations the audit reads.
//!
//! The pump calls [`WireObserver::observe`] with every chunk it reads, before the faults decide,
//! and then tells the observer what it actually did, by raw offset: delivered through `x`,
//! dropped `[a, b)`, cut at `x`, EOF. That delivery contract is documented once, on
//! [`WireObserver`]. Observers report what they learn as [`Observation`]s to an
//! [`ObservationSink`] (the audit, or nothing). The byte-mode observer ([`NoObserver`]) keeps no
//! state and returns no positions, so a plain relay pays nothing.

use std::borrow::Cow;

use super::SseClass;
use super::http1_clean::CleanEnd;
use crate::vocab::{CutAction, StreamInfo};
use crate::vocab::{Direction, WireProtocol};

/// Positions of the cut points inside one chunk of an SSE response body.
///
/// Cut point `k` (for `1 <= k <= chunk.len()`) means "exactly the first `k` bytes of this chunk
/// are delivered, then the connection stops". `runs` cover cut points with the class a cut there
/// hits, in increasing order, without overlap; cut points outside every run are outside an SSE
/// body (HTTP heads, non-SSE bodies) and SSE-position faults do not aim at them. A run may also
/// start at cut point 0 ("deliver none of this chunk"): the HTTP/1.1 observer reports there the
/// cut point that ended the previous chunk when its class needed this chunk's first byte
/// (`before-eol` vs `mid-value`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkPositions {
    /// Runs of equal class, `start..end` over cut points (chunk-relative, 1-based as above).
    pub runs: Vec<PositionRun>,
    /// The SSE response streams the runs belong to, in order: a run belongs to the last span
    /// whose `from` is at most its `start`.
    pub streams: Vec<StreamSpan>,
}

/// The SSE response stream that owns the cut points from `from` on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSpan {
    /// First cut point (chunk-relative) of the stream in this chunk.
    pub from: usize,
    /// The stream's facts (shared, not copied per chunk).
    pub stream: std::sync::Arc<StreamInfo>,
}

/// Consecutive cut points that hit the same class in the same event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PositionRun {
    /// First cut point of the run (number of chunk bytes delivered).
    pub start: usize,
    /// One past the last cut point of the run.
    pub end: usize,
    /// The class every cut point of the run hits.
    pub class: SseClass,
    /// The class the run would have outside a resume: equal to `class` except where `class`
    /// is `during-replay` (then the structural class under it, e.g. `mid-value`).
    pub base: SseClass,
    /// The LLM position of the run's cut points, in a stream of a known LLM API.
    pub llm: Option<super::LlmPos>,
    /// Index of the SSE event (0-based, per response stream) the run belongs to.
    pub event_index: u64,
    /// Payload offset (decoded SSE body bytes before cut point `start`).
    pub payload_offset: u64,
}

impl ChunkPositions {
    /// Empties the annotation, keeping its allocation.
    pub fn clear(&mut self) {
        self.runs.clear();
        self.streams.clear();
    }

    /// The stream that owns the run starting at cut point `start`.
    pub fn stream_at(&self, start: usize) -> Option<&StreamInfo> {
        self.streams
            .iter()
            .rev()
            .find(|s| s.from <= start)
            .map(|s| &*s.stream)
    }
}

/// Where a cut fell, as the observer saw it; the pump adds time and connection facts.
///
/// The one typed record of a cut: the pump fills it, the cuts log writes it (flattened into
/// [`super::record::CutRecord`], absent facts as `null`), the audit keeps and reports it
/// (`audit::finding::FindingCut` is built from it). Its enums become strings only when it is
/// serialized.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct CutPoint {
    /// Class of the cut, `None` outside an SSE body.
    pub class: Option<SseClass>,
    /// Raw offset in this direction (bytes of the connection delivered before the cut).
    pub raw_offset: u64,
    /// Offset in the decoded SSE payload, if inside an SSE body.
    pub payload_offset: Option<u64>,
    /// Index of the event in progress (per stream), if inside an SSE body.
    pub event_index: Option<u64>,
    /// The `id` of the event in progress, if its id line was complete.
    pub pending_id: Option<String>,
    /// The last committed event id (WHATWG "last event ID string") before the cut.
    pub last_committed_id: Option<String>,
    /// Bytes of the torn event that were delivered (0 at a boundary).
    pub torn_bytes: u64,
    /// Outside an SSE body: bytes of the response body (HTTP framing included) delivered
    /// before the cut, if the cut fell in a response with a body.
    pub body_bytes: Option<u64>,
    /// Which `data:` line of the event the cut fell in (1-based), if any.
    pub data_line: Option<u32>,
    /// Request facts of the stream: method and path (written as the record's `stream`).
    #[serde(skip)]
    pub request: Option<String>,
    /// `Mcp-Session-Id` of the stream's request or response, if any.
    pub session: Option<String>,
    /// JSON-RPC request id of the stream's POST, if visible (written in the record's `stream`).
    #[serde(skip)]
    pub rpc_id: Option<String>,
    /// Request sequence number on the connection of the exchange whose response bytes the cut
    /// fell in (the one `request`, `session` and `rpc_id` describe); `None` outside every
    /// response's bytes (before the first head, in a head after the body before it ended).
    #[serde(skip)]
    pub exchange: Option<u64>,
    /// How the client's TLS session ended, if the client side speaks TLS (set by the pump).
    pub tls_end: Option<crate::tls::TlsEnd>,
    /// The outage window this cut opened (new connections held), in milliseconds, as it took
    /// effect (set by the pump; `None` when the cut opened none).
    pub outage_ms: Option<u64>,
    /// The LLM position of the cut, in a stream of a known LLM API (see `wire::llm`).
    #[serde(rename = "llm_position")]
    pub llm: Option<super::LlmPos>,
    /// The fault kind that decided the cut (set by the pump).
    pub by: Option<&'static str>,
    /// On an HTTP/2 connection, the stream the cut ended (stream scope: `RST_STREAM` or an
    /// `END_STREAM` the proxy wrote; the connection and its other streams live on), or one of
    /// the other streams a connection cut ended (`with_connection`). `None`: the whole
    /// connection ended (HTTP/1.1, or `scope = "connection"` on h2), described where it fell.
    pub h2_stream: Option<u64>,
    /// On HTTP/2, set on the point a connection-scope cut records for each other stream it
    /// ended (`h2_stream` names that stream): the stream ended with the whole TCP connection,
    /// not with a frame of its own, so a reset there may discard what the client had not read.
    pub with_connection: bool,
}

/// One thing an observer learned, for the audit. Additive: consumers ignore what they do not
/// need.
///
/// On an HTTP/2 connection (announced by [`Observation::Protocol`]), an exchange is a stream:
/// every `seq` below is the stream id (odd, increasing with the order the client opened them,
/// not contiguous), exchanges interleave, and a [`Observation::Cut`] whose point names an
/// `h2_stream` ends that stream only.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// A connection was accepted.
    ConnOpened { conn: u64, proxy: String },
    /// A connection ended (both directions closed or cut).
    ConnClosed { conn: u64 },
    /// The connection speaks a protocol other than HTTP/1.1, found before its first request
    /// (absent: HTTP/1.1, or opaque).
    Protocol {
        conn: u64,
        protocol: crate::vocab::WireProtocol,
    },
    /// An HTTP/2 stream was reset (`RST_STREAM`), by an endpoint or by the proxy.
    StreamReset {
        conn: u64,
        /// The stream id.
        seq: u64,
        /// Where the frame went: `Upstream` = sent by the client (or by the proxy towards the
        /// server), `Downstream` = sent by the server (or by the proxy towards the client).
        direction: Direction,
        /// The RFC 9113 error code (`0x8` = `CANCEL`).
        code: u32,
        /// The proxy wrote it (a fault), rather than relaying an endpoint's.
        by_proxy: bool,
    },
    /// An HTTP/2 `GOAWAY`: streams above `last_stream` were not and will not be processed by
    /// the endpoint that sent it; streams at or below it may still complete.
    GoAway {
        conn: u64,
        /// As in [`Observation::StreamReset`].
        direction: Direction,
        last_stream: u64,
        code: u32,
        by_proxy: bool,
    },
    /// A request head (and body, when small) was seen upstream.
    Request {
        conn: u64,
        /// Per-connection request sequence number (0-based, pipelined order).
        seq: u64,
        method: String,
        path: String,
        session: Option<String>,
        last_event_id: Option<String>,
        protocol_version: Option<String>,
        has_authorization: bool,
        /// The `Idempotency-Key` header, if present and not blank: requests carrying the same
        /// value are one logical call (a later one re-sends an earlier one).
        idempotency_key: Option<String>,
        /// False if and only if an `Accept` header was sent and it names no
        /// `text/event-stream`: not an `EventSource` (a browser's `favicon.ico` fetch sends
        /// `image/…,*/*`), so not a stream re-opened without its cursor.
        accepts_event_stream: bool,
        /// The request body if it was at most the observer's body limit.
        body: Option<bytes::Bytes>,
    },
    /// A response head was seen downstream.
    Response {
        conn: u64,
        seq: u64,
        status: u16,
        content_type: Option<String>,
        session: Option<String>,
    },
    /// A non-SSE response body ended (its bytes when at most the body limit).
    ResponseBody {
        conn: u64,
        seq: u64,
        body: Option<bytes::Bytes>,
    },
    /// An SSE event was dispatched by the WHATWG rules from bytes the proxy forwarded.
    SseEvent {
        conn: u64,
        seq: u64,
        index: u64,
        /// The event's own `id` field, if it had one.
        id: Option<String>,
        /// The last event ID string after dispatch (sticky ids).
        last_event_id: Option<String>,
        /// The event type; the default `message` is a shared constant (no allocation per event).
        event_type: Option<Cow<'static, str>>,
        /// XXH3-64 of the data buffer (`wire::http1::data_hash`); the payload itself is not kept.
        data_hash: u64,
        data_len: u64,
        /// The data when it is at most `http1::DATA_HEAD` bytes; when longer (`data_len`
        /// tells), the minimal JSON-RPC head of what its first level says
        /// (`{"id":7,"result":0}`, read from the whole data as it streamed), or empty. `None`
        /// on an LLM stream: its data is a provider's JSON, which the LLM reader reported as
        /// [`Observation::LlmEvent`] facts.
        data: Option<bytes::Bytes>,
        /// How many `data` field lines the event had on the wire.
        data_lines: u32,
        raw_start: u64,
        raw_end: u64,
    },
    /// The observer stopped following an SSE stream (a line longer than its line limit): the
    /// bytes are still relayed, but no more events or cut positions are reported for it.
    ObserverGaveUp {
        conn: u64,
        seq: u64,
        /// Raw offset (downstream) by which the observer gave up.
        raw_offset: u64,
        /// Why, in words (e.g. "line too long: …").
        reason: String,
    },
    /// The SSE body of a response ended; `clean` if and only if its HTTP framing ended normally.
    StreamEnd { conn: u64, seq: u64, clean: bool },
    /// A request to an LLM API (its path names one, see [`crate::vocab::LlmApi`]) was seen
    /// upstream: what identifies it as a re-send of an earlier one. Released right after its
    /// [`Observation::Request`]. Carries no header value but the two re-send markers (never
    /// `Authorization`, `x-api-key` or any other credential).
    LlmRequest(LlmRequestSeen),
    /// What a dispatched event of an LLM stream contributed to the answer (a text delta, a
    /// tool call's start or arguments, the completion signal, the terminal event, …); released,
    /// like its [`Observation::SseEvent`], once the event's last byte reached the client.
    LlmEvent(LlmEventSeen),
    /// The proxy cut the connection.
    Cut {
        conn: u64,
        direction: Direction,
        action: CutAction,
        point: CutPoint,
    },
}

impl Observation {
    /// The proxy's number of the connection the observation is about.
    pub fn conn(&self) -> u64 {
        match self {
            Observation::ConnOpened { conn, .. }
            | Observation::ConnClosed { conn }
            | Observation::Protocol { conn, .. }
            | Observation::StreamReset { conn, .. }
            | Observation::GoAway { conn, .. }
            | Observation::Request { conn, .. }
            | Observation::Response { conn, .. }
            | Observation::ResponseBody { conn, .. }
            | Observation::SseEvent { conn, .. }
            | Observation::ObserverGaveUp { conn, .. }
            | Observation::StreamEnd { conn, .. }
            | Observation::Cut { conn, .. } => *conn,
            Observation::LlmRequest(r) => r.conn,
            Observation::LlmEvent(e) => e.conn,
        }
    }
}

/// One LLM request (see [`Observation::LlmRequest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmRequestSeen {
    /// Connection.
    pub conn: u64,
    /// Request sequence number on the connection (pairs with its response's).
    pub seq: u64,
    /// The API its path names.
    pub api: crate::vocab::LlmApi,
    /// XXH3-64 of the whole body (every byte, however long).
    pub body_hash: u64,
    /// Body length in bytes.
    pub body_len: u64,
    /// `Idempotency-Key`, if present and not blank.
    pub idempotency_key: Option<String>,
    /// `X-Stainless-Retry-Count` (the OpenAI and Anthropic SDKs' attempt number), if present.
    pub retry_count: Option<u32>,
}

/// One LLM event, as delivered (see [`Observation::LlmEvent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmEventSeen {
    /// Connection.
    pub conn: u64,
    /// Response sequence number on the connection.
    pub seq: u64,
    /// The SSE event's index in its stream (pairs with `SseEvent::index`).
    pub index: u64,
    /// The stream's API.
    pub api: crate::vocab::LlmApi,
    /// What the event contributed.
    pub facts: super::llm::LlmEventFacts,
    /// Raw offset after the event's dispatching byte.
    pub raw_end: u64,
}

/// Where observations go. Implementations must be cheap and never block the data path.
pub trait ObservationSink: Send + Sync {
    /// Records one observation.
    fn record(&self, obs: Observation);

    /// Records, in order, the observations one delivery released together (the bytes that
    /// produced them reached the peer in one write, at one instant). A sink with a cost per
    /// call (a clock reading, a lock, a wake-up) overrides it to pay that once per batch; it
    /// takes every item.
    fn record_all(&self, batch: &mut dyn Iterator<Item = Observation>) {
        for obs in batch {
            self.record(obs);
        }
    }

    /// True if the sink keeps nothing but [`Observation::Cut`]s: a [`FanOut`] hands it only
    /// those (no clone of every event for a sink that drops it).
    fn cuts_only(&self) -> bool {
        false
    }

    /// The run is ending and the proxy is about to close, itself, every connection still open
    /// (its shutdown drain ended; not called for a proxy stopped through the control API): a
    /// sink that judges open streams judges them now, while they are still open, and knows that
    /// the closes that follow are the proxy's.
    fn closing(&self) {}
}

/// Sends every observation to each of several sinks, in order (the audit, a cut log, …); a
/// sink that keeps only cuts gets only cuts.
pub struct FanOut(pub Vec<std::sync::Arc<dyn ObservationSink>>);

impl FanOut {
    fn wants(sink: &dyn ObservationSink, obs: &Observation) -> bool {
        !sink.cuts_only() || matches!(obs, Observation::Cut { .. })
    }
}

impl ObservationSink for FanOut {
    fn record(&self, obs: Observation) {
        let Some(last) = self.0.iter().rposition(|s| Self::wants(&**s, &obs)) else {
            return;
        };
        for sink in &self.0[..last] {
            if Self::wants(&**sink, &obs) {
                sink.record(obs.clone());
            }
        }
        self.0[last].record(obs);
    }

    /// With at most one sink that keeps more than cuts (the usual: the audit beside a cut book
    /// and a cut log), the batch goes to it whole, cuts copied to the others on the way.
    fn record_all(&self, batch: &mut dyn Iterator<Item = Observation>) {
        let mut general = self.0.iter().filter(|s| !s.cuts_only());
        let (Some(main), None) = (general.next(), general.next()) else {
            for obs in batch {
                self.record(obs);
            }
            return;
        };
        let mut batch = batch.inspect(|obs| {
            if matches!(obs, Observation::Cut { .. }) {
                for sink in self.0.iter().filter(|s| s.cuts_only()) {
                    sink.record(obs.clone());
                }
            }
        });
        main.record_all(&mut batch);
        // Whatever it left (it should take every item) still reaches it, one at a time.
        for obs in batch {
            main.record(obs);
        }
    }

    fn cuts_only(&self) -> bool {
        self.0.iter().all(|s| s.cuts_only())
    }

    fn closing(&self) {
        for sink in &self.0 {
            sink.closing();
        }
    }
}

/// Observes one direction of one connection.
///
/// # The delivery contract
///
/// Offsets are *raw offsets* of the direction: bytes read from the source before the byte in
/// question (the first byte read has offset 0). The pump keeps these promises, on its fast path,
/// through its queue, under every fault, at cuts, deadlines and kills:
///
/// 1. [`observe`](Self::observe) sees every chunk, in order, before any fault decides on it.
/// 2. After every write to the destination it calls
///    [`delivered_through(x)`](Self::delivered_through): every byte before raw offset `x` has
///    been written (and none after it in this call); `x` never decreases.
/// 3. For every range of read bytes that will never be written (a `timeout` blackhole, slices
///    a deadline cut or a kill throws away), it calls [`dropped(a, b)`](Self::dropped) once:
///    bytes `[a, b)` never reach the peer. A drop may be announced before earlier queued bytes
///    are written; offsets say which bytes are meant.
/// 4. A cut ends the direction at raw offset `x`, the offset just after the last byte
///    delivered: [`clean_end_at(x)`](Self::clean_end_at) (for `clean-end`) and then
///    [`cut_at(x)`](Self::cut_at), after every byte before `x` was written. No call follows.
/// 5. At the source's EOF it calls [`eof`](Self::eof), possibly before queued bytes leave.
///
/// In return an observer releases a fact (an [`Observation`] to its sink) if and only if every
/// byte that produced it lies before the delivered-through offset and before every dropped
/// range: a request is reported when its last byte was written to the server, an SSE event
/// when the byte that dispatched it reached the client, never on "the next chunk arrived". Facts
/// held when the direction ends without delivery are never released.
pub trait WireObserver: Send {
    /// Reads a chunk before faults decide; returns its positions when any byte of it is in an
    /// SSE body.
    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions>;
    /// Describes the cut that delivers exactly `delivered` bytes of the last observed chunk
    /// (the same as [`cut_at`](Self::cut_at) at that chunk's start plus `delivered`).
    fn cut_point(&mut self, delivered: usize) -> CutPoint;
    /// The source sent EOF.
    fn eof(&mut self);

    /// Every byte before raw offset `raw` has been written to the destination.
    fn delivered_through(&mut self, raw: u64) {
        let _ = raw;
    }

    /// Bytes the observer holds now (buffers, held observations), for the `bytes_buffered`
    /// gauge. Must not grow with event or body size.
    fn held_bytes(&self) -> usize {
        0
    }

    /// Bytes `[start, end)` were read but will never be written.
    fn dropped(&mut self, start: u64, end: u64) {
        let _ = (start, end);
    }

    /// Describes the cut after exactly the bytes before raw offset `raw` were delivered. The
    /// default serves observers that only ever cut inside the last observed chunk.
    fn cut_at(&mut self, raw: u64) -> CutPoint {
        let mut point = self.cut_point(0);
        point.raw_offset = raw;
        point
    }

    /// The bytes that end the current HTTP message as if normally, written after a `clean-end`
    /// cut that delivered exactly `delivered` bytes of the last observed chunk (for a chunked
    /// body: the `0\r\n\r\n` terminator). Empty when no valid clean end exists there; the cut
    /// is then a FIN.
    fn clean_end(&mut self, delivered: usize) -> CleanEnd {
        let _ = delivered;
        CleanEnd::default()
    }

    /// True if and only if the observer will learn nothing from this direction's further bytes
    /// (byte mode, or the stream went opaque for good): the relay may then move them without
    /// showing them, telling the observer only how many passed ([`WireObserver::passed`]).
    fn is_opaque(&self) -> bool {
        false
    }

    /// `n` bytes passed unshown after [`WireObserver::is_opaque`] returned true, every one of
    /// them delivered. Equivalent to observing a delivered `n`-byte chunk that carries no
    /// positions: raw offsets (and `cut_point(k)`, relative to that run) count them.
    fn passed(&mut self, n: u64) {
        let _ = n;
    }

    /// [`clean_end`](Self::clean_end) for the cut at raw offset `raw`. The default is empty
    /// (FIN).
    fn clean_end_at(&mut self, raw: u64) -> CleanEnd {
        let _ = raw;
        CleanEnd::default()
    }

    /// The connection's TLS handshake with the client selected `protocol` by ALPN; told once,
    /// before any byte is observed. An observer that announces its connection's protocol names
    /// this one (h2 over TLS is [`WireProtocol::H2`], not the h2c its bytes alone suggest).
    /// The default ignores it.
    fn negotiated(&mut self, protocol: WireProtocol) {
        let _ = protocol;
    }
}

/// The byte-mode observer: sees nothing, costs nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver {
    /// Raw offset of the first byte of the last observed chunk.
    chunk_start: u64,
    /// Raw offset after the last observed chunk.
    raw: u64,
}

impl WireObserver for NoObserver {
    fn observe(&mut self, chunk: &[u8]) -> Option<&ChunkPositions> {
        self.chunk_start = self.raw;
        self.raw += chunk.len() as u64;
        None
    }

    fn cut_point(&mut self, delivered: usize) -> CutPoint {
        CutPoint {
            raw_offset: self.chunk_start + delivered as u64,
            ..CutPoint::default()
        }
    }

    fn cut_at(&mut self, raw: u64) -> CutPoint {
        CutPoint {
            raw_offset: raw,
            ..CutPoint::default()
        }
    }

    fn eof(&mut self) {}

    fn is_opaque(&self) -> bool {
        true
    }

    fn passed(&mut self, n: u64) {
        self.chunk_start = self.raw;
        self.raw += n;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Keeps what it is given, in order; `cuts` says whether it keeps only cuts.
    #[derive(Default)]
    struct Keep {
        cuts: bool,
        got: Mutex<Vec<Observation>>,
        calls: Mutex<usize>,
    }

    impl ObservationSink for Keep {
        fn record(&self, obs: Observation) {
            assert!(!self.cuts || matches!(obs, Observation::Cut { .. }));
            self.got.lock().unwrap().push(obs);
            *self.calls.lock().unwrap() += 1;
        }

        fn record_all(&self, batch: &mut dyn Iterator<Item = Observation>) {
            self.got.lock().unwrap().extend(batch);
            *self.calls.lock().unwrap() += 1;
        }

        fn cuts_only(&self) -> bool {
            self.cuts
        }
    }

    fn batch() -> Vec<Observation> {
        vec![
            Observation::ConnOpened {
                conn: 1,
                proxy: "p".into(),
            },
            Observation::Cut {
                conn: 1,
                direction: Direction::Downstream,
                action: CutAction::Reset,
                point: CutPoint::default(),
            },
            Observation::ConnClosed { conn: 1 },
        ]
    }

    #[test]
    fn a_fan_out_gives_cut_keepers_only_cuts_and_the_audit_each_batch_whole() {
        let (book, audit, log) = (
            Arc::new(Keep {
                cuts: true,
                ..Keep::default()
            }),
            Arc::new(Keep::default()),
            Arc::new(Keep {
                cuts: true,
                ..Keep::default()
            }),
        );
        let fan = FanOut(vec![book.clone(), audit.clone(), log.clone()]);
        assert!(!fan.cuts_only());
        fan.record_all(&mut batch().into_iter());
        assert_eq!(*audit.got.lock().unwrap(), batch());
        assert_eq!(*audit.calls.lock().unwrap(), 1, "one call for the batch");
        for cuts in [&book, &log] {
            assert_eq!(*cuts.got.lock().unwrap(), batch()[1..2]);
        }
        // One at a time: the same.
        for obs in batch() {
            fan.record(obs);
        }
        assert_eq!(audit.got.lock().unwrap().len(), 6);
        assert_eq!(book.got.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_fan_out_with_two_full_sinks_gives_each_everything() {
        let (a, b) = (Arc::new(Keep::default()), Arc::new(Keep::default()));
        let fan = FanOut(vec![a.clone(), b.clone()]);
        fan.record_all(&mut batch().into_iter());
        assert_eq!(*a.got.lock().unwrap(), batch());
        assert_eq!(*b.got.lock().unwrap(), batch());
        let only_cuts = FanOut(vec![Arc::new(Keep {
            cuts: true,
            ..Keep::default()
        })]);
        assert!(only_cuts.cuts_only());
    }
}
