//! The h2 observer against recorded conversations built with the frame encoder and an HPACK
//! encoder (literal fields with incremental indexing, Huffman-coded values): facts, every
//! chunking, cut points only in SSE bodies, connection cuts, stream cuts by the relay, the
//! sniffing pair, opaque fallbacks and the stream cap.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::frame::{self, FrameHeader, FrameType, flags};
use super::*;
use crate::vocab::{Direction, WireProtocol};
use crate::wire::llm_routes::LlmRoutes;
use crate::wire::{Observation, ObservationSink, SseClass, WireObserver};

#[derive(Default)]
pub(super) struct Keep(pub(super) Mutex<Vec<Observation>>);

impl ObservationSink for Keep {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

impl Keep {
    pub(super) fn take(&self) -> Vec<Observation> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// An HPACK block: every field a literal with incremental indexing and a new name, the value
/// Huffman-coded (exercising the decoder's dynamic table and Huffman path).
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (n, v) in fields {
        b.push(0x40);
        string(&mut b, n.as_bytes(), false);
        string(&mut b, v.as_bytes(), true);
    }
    b
}

fn string(b: &mut Vec<u8>, s: &[u8], huffman: bool) {
    let coded = if huffman {
        super::huffman::encode(s)
    } else {
        s.to_vec()
    };
    let flag = if huffman { 0x80 } else { 0 };
    let len = coded.len();
    if len < 127 {
        b.push(flag | len as u8);
    } else {
        b.push(flag | 127);
        let mut rest = len - 127;
        while rest >= 128 {
            b.push((rest % 128) as u8 | 0x80);
            rest /= 128;
        }
        b.push(rest as u8);
    }
    b.extend_from_slice(&coded);
}

fn frame_bytes(kind: FrameType, fl: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = FrameHeader {
        len: payload.len() as u32,
        kind,
        flags: fl,
        stream,
    }
    .encode()
    .to_vec();
    v.extend_from_slice(payload);
    v
}

/// One direction's bytes, with the raw ranges of SSE `DATA` bodies.
#[derive(Default)]
pub(super) struct Side {
    pub(super) bytes: Vec<u8>,
    sse_bodies: Vec<(u32, Range<u64>)>,
}

impl Side {
    fn raw(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }
    fn headers(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) {
        let es = if end_stream { flags::END_STREAM } else { 0 };
        let b = block(fields);
        self.raw(&frame_bytes(
            FrameType::Headers,
            es | flags::END_HEADERS,
            stream,
            &b,
        ));
    }
    /// A header block split into HEADERS (padded, with priority) + CONTINUATION.
    fn headers_continued(&mut self, stream: u32, fields: &[(&str, &str)], end_stream: bool) {
        let b = block(fields);
        let (a, c) = b.split_at(b.len() / 2);
        let mut p = vec![2, 0, 0, 0, 0, 16];
        p.extend_from_slice(a);
        p.extend_from_slice(&[0, 0]);
        let es = if end_stream { flags::END_STREAM } else { 0 };
        self.raw(&frame_bytes(
            FrameType::Headers,
            es | flags::PADDED | flags::PRIORITY,
            stream,
            &p,
        ));
        self.raw(&frame_bytes(
            FrameType::Continuation,
            flags::END_HEADERS,
            stream,
            c,
        ));
    }
    fn data(&mut self, stream: u32, body: &[u8], end_stream: bool, pad: u8, sse: bool) {
        let es = if end_stream { flags::END_STREAM } else { 0 };
        let mut p = Vec::new();
        let mut fl = es;
        if pad > 0 {
            fl |= flags::PADDED;
            p.push(pad);
        }
        let start = (self.bytes.len() + frame::HEADER_LEN + p.len()) as u64;
        p.extend_from_slice(body);
        p.extend(std::iter::repeat_n(0, pad as usize));
        self.raw(&frame_bytes(FrameType::Data, fl, stream, &p));
        if sse {
            self.sse_bodies
                .push((stream, start..start + body.len() as u64));
        }
    }
}

const RPC: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#;

/// A client and a server: an MCP POST answered with SSE (stream 1), a resume GET whose SSE
/// stream the server resets (stream 3), a plain JSON GET (stream 5); events split across frames
/// interleaved with other streams, padding, CONTINUATION, unknown frames, SETTINGS, GOAWAY.
pub(super) fn conversation() -> (Side, Side) {
    let (mut c, mut s) = (Side::default(), Side::default());
    c.raw(PREFACE);
    c.raw(&frame_bytes(
        FrameType::Settings,
        0,
        0,
        &[0, 1, 0, 0, 0x20, 0],
    ));
    c.headers(
        1,
        &[
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/mcp"),
            (":authority", "lab"),
            ("mcp-session-id", "s-1"),
            ("accept", "application/json, text/event-stream"),
            ("authorization", "Bearer x"),
        ],
        false,
    );
    c.data(1, &RPC.as_bytes()[..20], false, 0, false);
    c.data(1, &RPC.as_bytes()[20..], true, 3, false);
    c.headers_continued(
        3,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/mcp"),
            (":authority", "lab"),
            ("mcp-session-id", "s-1"),
            ("last-event-id", "4"),
        ],
        true,
    );
    c.raw(&frame_bytes(FrameType::Unknown(0x42), 0, 0, b"ext"));
    c.headers(
        5,
        &[
            (":method", "GET"),
            (":path", "/status"),
            ("accept", "application/json"),
        ],
        true,
    );
    s.raw(&frame_bytes(
        FrameType::Settings,
        0,
        0,
        &[0, 3, 0, 0, 0, 100],
    ));
    s.raw(&frame_bytes(FrameType::Settings, flags::ACK, 0, &[]));
    let sse = [
        (":status", "200"),
        ("content-type", "text/event-stream"),
        ("mcp-session-id", "s-1"),
    ];
    s.headers(1, &sse, false);
    s.data(1, b"id: 1\ndata: {\"p\":1}\n\n", false, 0, true);
    s.headers(3, &sse[..2], false);
    s.data(1, b"id: 2\ndata: hel", false, 0, true);
    s.data(3, b"id: 5\ndata: replayed\n\n", false, 4, true);
    s.headers(
        5,
        &[(":status", "200"), ("content-type", "application/json")],
        false,
    );
    s.data(1, b"lo\n\n", false, 0, true);
    s.data(5, b"{\"ok\":true}", true, 0, false);
    s.data(3, b"data: torn", false, 0, true);
    s.raw(&frame::rst_stream(3, ErrorCode::CANCEL));
    s.data(
        1,
        b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n",
        true,
        0,
        true,
    );
    s.raw(&frame::goaway(5, ErrorCode::NO_ERROR));
    (c, s)
}

/// Raw cut point → (stream, class, event index, payload offset), for every run point.
pub(super) type Points = Vec<(u64, u64, SseClass, u64, u64)>;

/// Feeds both directions as the pump does (each read delivered at once), split at `cuts`.
pub(super) fn run(
    c: &[u8],
    s: &[u8],
    up_cuts: &[usize],
    down_cuts: &[usize],
) -> (Vec<Observation>, Vec<Observation>, Points) {
    let up_sink = Arc::new(Keep::default());
    let (mut up, mut down) = h2_pair(1, up_sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    let mut points = Vec::new();
    feed(&mut up, c, up_cuts, &mut Vec::new());
    feed(&mut down, s, down_cuts, &mut points);
    up.eof();
    down.eof();
    let (ups, downs) = by_direction(up_sink.take());
    (ups, downs, points)
}

/// `all` parted into what the client's bytes said and what the server's said.
pub(super) fn by_direction(all: Vec<Observation>) -> (Vec<Observation>, Vec<Observation>) {
    all.into_iter().partition(|o| {
        matches!(
            o,
            Observation::Protocol { .. } | Observation::Request { .. } | Observation::LlmRequest(_)
        ) || matches!(
            o,
            Observation::StreamReset {
                direction: Direction::Upstream,
                ..
            }
        )
    })
}

fn feed(o: &mut H2Observer, bytes: &[u8], cuts: &[usize], points: &mut Points) {
    let mut cuts: Vec<usize> = cuts.iter().copied().filter(|&c| c < bytes.len()).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut start = 0;
    for end in cuts.into_iter().chain(std::iter::once(bytes.len())) {
        if end <= start {
            continue;
        }
        if let Some(p) = o.observe(&bytes[start..end]) {
            for r in &p.runs {
                let seq = p.stream_at(r.start).map(|s| s.seq).unwrap();
                for k in r.start..r.end {
                    let payload = r.payload_offset + (k - r.start) as u64;
                    points.push(((start + k) as u64, seq, r.class, r.event_index, payload));
                }
            }
        }
        o.delivered_through(end as u64);
        start = end;
    }
}

#[test]
fn an_h2c_conversation_reports_what_an_http1_exchange_would() {
    let (c, s) = conversation();
    let (ups, downs, _) = run(&c.bytes, &s.bytes, &[], &[]);
    assert_eq!(
        ups[0],
        Observation::Protocol {
            conn: 1,
            protocol: WireProtocol::H2c
        }
    );
    let Observation::Request {
        seq,
        method,
        path,
        session,
        has_authorization,
        accepts_event_stream,
        body,
        ..
    } = &ups[1]
    else {
        panic!("{:?}", ups[1]);
    };
    assert_eq!((*seq, method.as_str(), path.as_str()), (1, "POST", "/mcp"));
    assert_eq!(session.as_deref(), Some("s-1"));
    assert!(*has_authorization && *accepts_event_stream);
    assert_eq!(
        body.as_deref(),
        Some(RPC.as_bytes()),
        "the body across two frames, padding out"
    );
    let Observation::Request {
        seq: 3,
        last_event_id,
        ..
    } = &ups[2]
    else {
        panic!("{:?}", ups[2]);
    };
    assert_eq!(
        last_event_id.as_deref(),
        Some("4"),
        "HEADERS + CONTINUATION decoded"
    );
    assert!(matches!(
        &ups[3],
        Observation::Request {
            seq: 5,
            accepts_event_stream: false,
            ..
        }
    ));
    assert_eq!(ups.len(), 4);

    let events: Vec<(u64, Option<String>, Option<String>)> = downs
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent { seq, id, data, .. } => Some((
                *seq,
                id.clone(),
                data.as_ref()
                    .map(|d| String::from_utf8_lossy(d).into_owned()),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        events,
        vec![
            (1, Some("1".into()), Some(r#"{"p":1}"#.into())),
            (3, Some("5".into()), Some("replayed".into())),
            (1, Some("2".into()), Some("hello".into())),
            (
                1,
                None,
                Some(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.into())
            ),
        ]
    );
    // The split event's raw span runs from its first byte (frame 1) to its dispatching LF
    // (frame 3), across the other streams' frames between.
    let (raw_start, raw_end) = downs
        .iter()
        .find_map(|o| match o {
            Observation::SseEvent {
                seq: 1,
                index: 1,
                raw_start,
                raw_end,
                ..
            } => Some((*raw_start as usize, *raw_end as usize)),
            _ => None,
        })
        .unwrap();
    assert!(s.bytes[raw_start..].starts_with(b"id: 2\n"));
    assert_eq!(&s.bytes[raw_end - 4..raw_end], b"lo\n\n");
    let ends: Vec<&Observation> = downs
        .iter()
        .filter(|o| {
            matches!(
                o,
                Observation::StreamEnd { .. }
                    | Observation::StreamReset { .. }
                    | Observation::GoAway { .. }
                    | Observation::ResponseBody { .. }
            )
        })
        .collect();
    assert_eq!(
        ends,
        vec![
            &Observation::ResponseBody {
                conn: 1,
                seq: 5,
                body: Some(bytes::Bytes::from_static(b"{\"ok\":true}"))
            },
            &Observation::StreamReset {
                conn: 1,
                seq: 3,
                direction: Direction::Downstream,
                code: 8,
                by_proxy: false
            },
            &Observation::StreamEnd {
                conn: 1,
                seq: 3,
                clean: false
            },
            &Observation::StreamEnd {
                conn: 1,
                seq: 1,
                clean: true
            },
            &Observation::GoAway {
                conn: 1,
                direction: Direction::Downstream,
                last_stream: 5,
                code: 0,
                by_proxy: false
            },
        ]
    );
    let statuses = downs
        .iter()
        .filter(|o| matches!(o, Observation::Response { status: 200, .. }))
        .count();
    assert_eq!(statuses, 3);
}

#[test]
fn cut_points_lie_only_inside_sse_bodies_once_each_and_resume_streams_are_during_replay() {
    let (c, s) = conversation();
    let (_, _, points) = run(&c.bytes, &s.bytes, &[], &[]);
    assert!(!points.is_empty());
    for &(raw, seq, class, ..) in &points {
        let inside = s
            .sse_bodies
            .iter()
            .any(|(st, r)| u64::from(*st) == seq && r.start <= raw && raw <= r.end);
        assert!(
            inside,
            "cut point {raw} of stream {seq} ({class:?}) outside its bodies"
        );
        if seq == 3 {
            assert!(
                !matches!(
                    class,
                    SseClass::MidValue | SseClass::FieldName | SseClass::BeforeEol
                ),
                "a resume stream's torn points are during-replay, at {raw}: {class:?}"
            );
        }
    }
    let mut raws: Vec<u64> = points.iter().map(|p| p.0).collect();
    let n = raws.len();
    raws.dedup();
    assert_eq!(raws.len(), n, "each cut point once");
    // Every payload point of every stream is classified: stream 1 has 84 payload bytes.
    let s1 = points.iter().filter(|p| p.1 == 1).count();
    assert!(s1 >= 84, "{s1}");
    assert!(points.iter().any(|p| p.1 == 1 && p.2 == SseClass::MidValue));
    assert!(
        points
            .iter()
            .any(|p| p.1 == 3 && p.2 == SseClass::DuringReplay)
    );
}

#[test]
fn one_byte_reads_give_the_same_observations_and_positions() {
    let (c, s) = conversation();
    let whole = run(&c.bytes, &s.bytes, &[], &[]);
    let ones: Vec<usize> = (1..s.bytes.len()).collect();
    let up_ones: Vec<usize> = (1..c.bytes.len()).collect();
    assert_eq!(run(&c.bytes, &s.bytes, &up_ones, &ones), whole);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
    #[test]
    fn every_chunking_gives_the_same_observations_and_positions(
        up in proptest::collection::vec(0usize..400, 0..6),
        down in proptest::collection::vec(0usize..600, 0..10),
    ) {
        let (c, s) = conversation();
        let whole = run(&c.bytes, &s.bytes, &[], &[]);
        proptest::prop_assert_eq!(run(&c.bytes, &s.bytes, &up, &down), whole);
    }
}

/// The raw offset of a `mid-value` cut point of `stream` in the payload byte `text` starts.
fn point_in(s: &Side, stream: u32, text: &[u8], into: usize) -> u64 {
    let (_, r) = s
        .sse_bodies
        .iter()
        .find(|(st, r)| {
            *st == stream
                && s.bytes[r.start as usize..r.end as usize]
                    .windows(text.len())
                    .any(|w| w == text)
        })
        .unwrap();
    let body = &s.bytes[r.start as usize..r.end as usize];
    let at = body.windows(text.len()).position(|w| w == text).unwrap();
    r.start + (at + into) as u64
}

#[test]
fn a_connection_cut_mid_frame_is_seen_before_that_frame_names_its_stream_and_ends_every_open_sse_stream()
 {
    let (c, s) = conversation();
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = h2_pair(9, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    up.observe(&c.bytes);
    up.delivered_through(c.bytes.len() as u64);
    // Inside "hel" of event 2 on stream 1 (after "he"), in the DATA frame "id: 2\ndata: hel":
    // the client's h2 stack hands on nothing of an incomplete frame, so as the client sees it
    // the cut falls at that frame's body start, after event 1 (no event torn).
    let raw = point_in(&s, 1, b"hel", 2);
    down.observe(&s.bytes);
    let point = down.cut_at(raw);
    assert!(!point.class.is_some_and(SseClass::tears_event), "{point:?}");
    assert_eq!(point.torn_bytes, 0);
    assert_eq!(point.exchange, Some(1));
    assert_eq!(point.h2_stream, None, "the pump cuts the connection");
    assert_eq!(point.pending_id, None);
    assert_eq!(point.request.as_deref(), Some("POST /mcp"));
    assert_eq!(point.rpc_id.as_deref(), Some("7"));
    let got = sink.take();
    let ends: Vec<_> = got
        .iter()
        .filter_map(|o| match o {
            Observation::StreamEnd { seq, clean, .. } => Some((*seq, *clean)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![(1, false), (3, false)], "the cut stream first");
    let events: Vec<_> = got
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent { seq, index, .. } => Some((*seq, *index)),
            _ => None,
        })
        .collect();
    assert_eq!(
        events,
        vec![(1, 0)],
        "only the events delivered before the cut"
    );
    // A cut in a frame header belongs to no stream.
    let (mut up2, mut down2) = h2_pair(9, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    up2.observe(&c.bytes);
    down2.observe(&s.bytes);
    let p = down2.cut_at(s.sse_bodies[0].1.start - 3);
    assert_eq!((p.class, p.exchange), (None, None));
}

#[test]
fn a_connection_cut_before_a_response_head_was_delivered_ends_no_stream() {
    let (c, s) = conversation();
    // The server's SETTINGS (no response head yet): the client gets nothing of any stream,
    // read by the observer in one go (as a pump's read holds all of them) or frame by frame.
    let settings_end = (frame::HEADER_LEN + 6) as u64;
    for reads in [vec![], vec![settings_end as usize, 40, 80]] {
        let sink = Arc::new(Keep::default());
        let (mut up, mut down) = h2_pair(9, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
        up.observe(&c.bytes);
        up.delivered_through(c.bytes.len() as u64);
        let mut start = 0;
        for end in reads.iter().copied().chain([s.bytes.len()]) {
            down.observe(&s.bytes[start..end]);
            start = end;
        }
        down.delivered_through(settings_end);
        down.cut_at(settings_end);
        let (_, downs) = by_direction(sink.take());
        assert!(
            !downs.iter().any(|o| matches!(
                o,
                Observation::Response { .. } | Observation::StreamEnd { .. }
            )),
            "reads {reads:?}: {downs:#?}"
        );
    }
    // The same cut after stream 1's head: stream 1 began, so it ends (unclean); stream 3's
    // head came later and was never delivered.
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = h2_pair(9, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    up.observe(&c.bytes);
    up.delivered_through(c.bytes.len() as u64);
    down.observe(&s.bytes);
    let head_end = s.sse_bodies[0].1.start - frame::HEADER_LEN as u64;
    down.delivered_through(head_end);
    down.cut_at(head_end);
    let ends: Vec<_> = sink
        .take()
        .iter()
        .filter_map(|o| match o {
            Observation::StreamEnd { seq, clean, .. } => Some((*seq, *clean)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![(1, false)]);
}

/// Feeds whole frames of `bytes` (after `skip`) to a relay half, delivering each.
fn frames(
    half: &mut H2Half,
    bytes: &[u8],
    skip: usize,
    mut until: impl FnMut(&FrameHeader, u64) -> bool,
) -> usize {
    let mut i = skip;
    while i + frame::HEADER_LEN <= bytes.len() {
        let h = FrameHeader::parse(&bytes[i..]).unwrap();
        if until(&h, i as u64) {
            return i;
        }
        let end = i + h.frame_len();
        half.frame(&h, &bytes[i + frame::HEADER_LEN..end], i as u64);
        half.delivered_through(end as u64);
        i = end;
    }
    i
}

#[test]
fn a_stream_cut_by_the_relay_ends_that_stream_and_the_others_flow_on() {
    let (c, s) = conversation();
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = halves(4, sink.clone(), LlmRoutes::known(), WireProtocol::H2);
    up.preface(PREFACE.len() as u64);
    frames(&mut up, &c.bytes, PREFACE.len(), |_, _| false);
    // Read the server's frames up to stream 1's "hel" frame; cut it after "he".
    let raw = point_in(&s, 1, b"hel", 2);
    let at = frames(&mut down, &s.bytes, 0, |h, r| {
        h.kind == FrameType::Data && h.stream == 1 && r + 9 < raw && raw <= r + h.frame_len() as u64
    });
    let h = FrameHeader::parse(&s.bytes[at..]).unwrap();
    let p = down
        .frame(&h, &s.bytes[at + 9..at + h.frame_len()], at as u64)
        .expect("an SSE body has positions")
        .clone();
    let k = (raw - (at as u64 + 9)) as usize;
    let run = p.runs.iter().find(|r| r.start <= k && k < r.end).unwrap();
    assert_eq!(
        (run.class, p.stream_at(run.start).map(|s| s.seq)),
        (SseClass::MidValue, Some(1))
    );
    let point = down.cut_stream(1, raw, StreamEnding::Reset(ErrorCode::CANCEL));
    up.proxy_reset(1, ErrorCode::CANCEL);
    assert_eq!(point.h2_stream, Some(1));
    assert_eq!(
        (point.class, point.exchange),
        (Some(SseClass::MidValue), Some(1))
    );
    // The rest of the server's frames: stream 1's are dropped by the relay but still read.
    frames(&mut down, &s.bytes, at + h.frame_len(), |_, _| false);
    down.eof();
    let got = sink.take();
    let resets: Vec<_> = got
        .iter()
        .filter_map(|o| match o {
            Observation::StreamReset {
                seq,
                direction,
                by_proxy,
                ..
            } => Some((*seq, *direction, *by_proxy)),
            _ => None,
        })
        .collect();
    assert_eq!(
        resets,
        vec![
            (1, Direction::Downstream, true),
            (1, Direction::Upstream, true),
            (3, Direction::Downstream, false)
        ]
    );
    let s1_events = got
        .iter()
        .filter(|o| matches!(o, Observation::SseEvent { seq: 1, .. }))
        .count();
    assert_eq!(s1_events, 1, "stream 1 stops at its cut");
    assert!(
        got.iter()
            .any(|o| matches!(o, Observation::SseEvent { seq: 3, .. })),
        "stream 3 flows on"
    );
    assert!(
        got.iter()
            .any(|o| matches!(o, Observation::ResponseBody { seq: 5, .. }))
    );
    let ends: Vec<_> = got
        .iter()
        .filter_map(|o| match o {
            Observation::StreamEnd { seq, clean, .. } => Some((*seq, *clean)),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![(1, false), (3, false)]);
}

#[test]
fn the_preface_picks_h2c_and_anything_else_http1() {
    let sink = Arc::new(Keep::default());
    let (mut up, _down) = observer_pair_sniffed(2, sink.clone(), LlmRoutes::known());
    // One byte at a time through the preface: held until decided.
    let (c, _) = conversation();
    for (i, b) in c.bytes.iter().enumerate() {
        up.observe(std::slice::from_ref(b));
        up.delivered_through(i as u64 + 1);
    }
    let got = sink.take();
    assert!(matches!(
        got[0],
        Observation::Protocol {
            protocol: WireProtocol::H2c,
            ..
        }
    ));
    assert!(
        got.iter()
            .any(|o| matches!(o, Observation::Request { seq: 1, .. }))
    );

    let (mut up, _down) = observer_pair_sniffed(3, sink.clone(), LlmRoutes::known());
    let req = b"PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n";
    up.observe(&req[..1]);
    up.observe(&req[1..]);
    up.delivered_through(req.len() as u64);
    let got = sink.take();
    assert!(matches!(&got[..], [Observation::Request { seq: 0, method, .. }] if method == "PUT"));
}

#[test]
fn a_bad_header_block_makes_the_connection_opaque_and_bytes_still_count() {
    let sink = Arc::new(Keep::default());
    let (mut up, down) = h2_pair(5, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    let mut c = Side::default();
    c.raw(PREFACE);
    // Index 70 does not exist.
    c.raw(&frame_bytes(
        FrameType::Headers,
        flags::END_HEADERS | flags::END_STREAM,
        1,
        &[0x80 | 70],
    ));
    up.observe(&c.bytes);
    assert!(up.is_opaque() && down.is_opaque(), "the whole connection");
    up.passed(100);
    assert_eq!(up.cut_point(0).raw_offset, c.bytes.len() as u64 + 100 - 100);
    // A DATA frame with impossible padding from the server side, on a fresh connection.
    let (_, mut down) = h2_pair(6, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    down.observe(&frame_bytes(FrameType::Data, flags::PADDED, 1, &[9, 1]));
    assert!(down.is_opaque());
}

#[test]
fn streams_past_the_cap_are_relayed_unobserved_and_memory_stays_bounded() {
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = h2_pair(7, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    let mut c = Side::default();
    c.raw(PREFACE);
    let n = MAX_STREAMS as u32 + 20;
    for i in 0..n {
        c.headers(2 * i + 1, &[(":method", "GET"), (":path", "/sse")], true);
    }
    up.observe(&c.bytes);
    up.delivered_through(c.bytes.len() as u64);
    assert_eq!(up.half().shared.live(), MAX_STREAMS);
    let requests = sink
        .take()
        .iter()
        .filter(|o| matches!(o, Observation::Request { .. }))
        .count();
    assert_eq!(requests, MAX_STREAMS);
    let mut s = Side::default();
    for i in 0..n {
        s.headers(
            2 * i + 1,
            &[(":status", "200"), ("content-type", "text/event-stream")],
            false,
        );
        s.data(2 * i + 1, b"data: x\n\n", false, 0, true);
    }
    down.observe(&s.bytes);
    down.delivered_through(s.bytes.len() as u64);
    let events = sink
        .take()
        .iter()
        .filter(|o| matches!(o, Observation::SseEvent { .. }))
        .count();
    assert_eq!(events, MAX_STREAMS);
    // Every tracked stream holds a bounded scanner, no body: well under 4 KiB per stream.
    let per_stream = down.held_bytes() / MAX_STREAMS;
    assert!(per_stream < 4096, "{per_stream} bytes per stream");
}

#[test]
fn where_each_open_sse_stream_stands_is_its_last_bodys_end_with_the_event_it_would_tear() {
    let (c, s) = conversation();
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = halves(5, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    up.preface(PREFACE.len() as u64);
    frames(&mut up, &c.bytes, PREFACE.len(), |_, _| false);
    // Every server frame before stream 1's "lo\n\n": stream 1 stands inside event 2's value
    // ("id: 2\ndata: hel"), stream 3 right after its whole replayed event.
    let lo = point_in(&s, 1, b"lo\n\n", 0);
    let at = frames(&mut down, &s.bytes, 0, |h, r| {
        h.kind == FrameType::Data && h.stream == 1 && r < lo && lo <= r + h.frame_len() as u64
    });
    let hel_end = point_in(&s, 1, b"hel", 3);
    let all = down.stands(0);
    assert_eq!(
        all.iter().map(|p| p.h2_stream).collect::<Vec<_>>(),
        [Some(1), Some(3)],
        "{all:#?}"
    );
    assert!(all.iter().all(|p| p.with_connection), "{all:#?}");
    let one = &all[0];
    assert_eq!(one.class, Some(SseClass::MidValue));
    assert_eq!(one.raw_offset, hel_end);
    assert_eq!(one.exchange, Some(1));
    assert_eq!(one.event_index, Some(1));
    assert_eq!(one.pending_id.as_deref(), Some("2"));
    assert_eq!(one.last_committed_id.as_deref(), Some("1"));
    assert_eq!(one.torn_bytes, b"id: 2\ndata: hel".len() as u64);
    assert_eq!(one.data_line, Some(1));
    assert_eq!(one.request.as_deref(), Some("POST /mcp"));
    let three = &all[1];
    assert!(
        three.class.is_some_and(|k| !k.tears_event()) && three.torn_bytes == 0,
        "a stream between events tears nothing: {three:#?}"
    );
    assert_eq!(three.last_committed_id.as_deref(), Some("5"));
    // The stream a cut fell in is left out; a stream that ended is not open.
    let others = down.stands(1);
    assert_eq!(
        others.iter().map(|p| p.h2_stream).collect::<Vec<_>>(),
        [Some(3)]
    );
    // The rest: stream 3 is reset by the server, stream 1 ends with END_STREAM.
    frames(&mut down, &s.bytes, at, |_, _| false);
    assert!(down.stands(0).is_empty(), "{:#?}", down.stands(0));
}

#[test]
fn an_sse_stream_with_its_head_but_no_body_yet_stands_at_its_start() {
    let (c, s) = conversation();
    let sink = Arc::new(Keep::default());
    let (mut up, mut down) = halves(5, sink.clone(), LlmRoutes::known(), WireProtocol::H2c);
    up.preface(PREFACE.len() as u64);
    frames(&mut up, &c.bytes, PREFACE.len(), |_, _| false);
    // Every server frame before the first DATA: the SSE heads alone.
    frames(&mut down, &s.bytes, 0, |h, _| h.kind == FrameType::Data);
    let all = down.stands(0);
    assert!(
        !all.is_empty(),
        "a stream with a head is open: it ends with the connection"
    );
    for p in &all {
        assert_eq!(p.class, Some(SseClass::Boundary), "{p:#?}");
        assert_eq!((p.payload_offset, p.torn_bytes), (Some(0), 0), "{p:#?}");
        assert!(
            p.h2_stream.is_some() && p.last_committed_id.is_none(),
            "{p:#?}"
        );
    }
}
