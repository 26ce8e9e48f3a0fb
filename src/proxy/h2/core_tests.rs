//! The core as a pure function: frames in, queued frames and observations out, with a real
//! `sse_cut` deciding on positions a stub observer gives (every body byte of stream 1's `DATA`
//! is `mid-value` from cut point 5 on; stream 3 carries no positions).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use rand::SeedableRng;

use super::*;
use crate::fault::h2::CutScope;
use crate::fault::sse_cut::{H2Keys, SseCutConfig, factory_h2};
use crate::proxy::ProxyConfig;
use crate::proxy::h2::queue::Next;
use crate::vocab::StreamInfo;
use crate::wire::h2::frame::{data_header, rst_code, window_increment};
use crate::wire::{ObservationSink, PositionRun, SseClass, StreamSpan};

#[derive(Default)]
struct Stub {
    pos: Option<ChunkPositions>,
}

impl FrameObserver for Stub {
    fn frame(&mut self, dir: Direction, _raw: u64, h: &FrameHeader, payload: &[u8]) {
        self.pos = None;
        if dir != Direction::Downstream || h.kind != FrameType::Data || h.stream != 1 {
            return;
        }
        let len = data_body(h, payload).map_or(0, |b| b.len());
        let run = |start: usize, end: usize| PositionRun {
            start,
            end,
            class: SseClass::MidValue,
            base: SseClass::MidValue,
            llm: None,
            event_index: 0,
            payload_offset: start as u64,
        };
        self.pos = Some(ChunkPositions {
            runs: vec![run(5, len + 1)],
            streams: vec![StreamSpan {
                from: 0,
                stream: Arc::new(StreamInfo {
                    seq: 1,
                    method: "GET".into(),
                    path: "/sse".into(),
                    session: None,
                    resume: false,
                }),
            }],
        });
    }

    fn positions(&self) -> Option<&ChunkPositions> {
        self.pos.as_ref()
    }

    fn cut_point(&mut self, stream: u32, delivered: usize) -> CutPoint {
        CutPoint {
            class: Some(SseClass::MidValue),
            torn_bytes: delivered as u64,
            h2_stream: Some(u64::from(stream)),
            ..CutPoint::default()
        }
    }
}

#[derive(Default)]
struct Keep(Mutex<Vec<Observation>>);

impl ObservationSink for Keep {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

fn frame(kind: FrameType, flags: u8, stream: u32, payload: &[u8]) -> Bytes {
    let mut b = FrameHeader {
        len: payload.len() as u32,
        kind,
        flags,
        stream,
    }
    .encode()
    .to_vec();
    b.extend_from_slice(payload);
    Bytes::from(b)
}

fn data(stream: u32, end: bool, body: &[u8]) -> Bytes {
    let mut b = data_header(stream, body.len() as u32, end).to_vec();
    b.extend_from_slice(body);
    Bytes::from(b)
}

/// What a queue holds: its byte items concatenated, and the credit written.
fn drain(q: &OutQueue) -> (Vec<u8>, u32) {
    let (mut bytes, mut credit) = (Vec::new(), 0);
    while let Some(next) = q.next().now_or_never() {
        match next {
            Next::Credit(n) => credit += n,
            Next::Item(Out::Bytes { bytes: b, .. }) => bytes.extend_from_slice(&b),
            Next::Item(_) => panic!("the connection must not end"),
        }
    }
    (bytes, credit)
}

fn frames(mut b: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(h) = FrameHeader::parse(b) {
        out.push((h, b[HEADER_LEN..h.frame_len()].to_vec()));
        b = &b[h.frame_len()..];
    }
    assert!(b.is_empty());
    out
}

/// Runs the conversation through a core with one stream-scope `sse_cut` of `action`.
fn run(action: &str) -> (Vec<u8>, Vec<u8>, u32, Vec<Observation>) {
    let (to_server, to_client, obs) = converse(action, CutScope::Stream);
    let (client, _) = drain(&to_client);
    let (server, credit) = drain(&to_server);
    (client, server, credit, obs)
}

/// Runs the conversation through a core with one `sse_cut` of `action` and `scope`; returns
/// the queues toward the server and the client, and the observations.
fn converse(
    action: &str,
    scope: CutScope,
) -> (OutQueue<'static>, OutQueue<'static>, Vec<Observation>) {
    converse_with(&format!("action = \"{action}\""), scope, Instant::now())
}

/// [`converse`] with the fault's keys besides `at` spelled out, at `now`.
fn converse_with(
    keys: &str,
    scope: CutScope,
    now: Instant,
) -> (OutQueue<'static>, OutQueue<'static>, Vec<Observation>) {
    let proxy = crate::proxy::Proxy::new(ProxyConfig::new("t", "127.0.0.1:9"));
    let keep = Arc::new(Keep::default());
    proxy.set_sink(Some(keep.clone()));
    let cfg: SseCutConfig = toml::from_str(&format!("at = \"mid-value\"\n{keys}")).unwrap();
    let f = factory_h2(
        cfg,
        H2Keys {
            scope,
            h2_error: None,
        },
    );
    let mut rng = crate::fault::conn_rng(1, "t", 0);
    let fault = f.instantiate(&mut rng, now).unwrap();
    let faults = Faults {
        body: vec![(fault, f.h2_body_cut().unwrap())],
        h2: Vec::new(),
        bytes: [
            ByteChain {
                faults: Vec::new(),
                rng: ConnRng::from_rng(&mut rng),
                offset: 0,
            },
            ByteChain {
                faults: Vec::new(),
                rng: ConnRng::from_rng(&mut rng),
                offset: 0,
            },
        ],
        rng,
    };
    let (to_server, to_client) = (OutQueue::new(1 << 20), OutQueue::new(1 << 20));
    let mut core = Core::new(
        0,
        &proxy,
        [&to_server, &to_client],
        Box::new(Stub::default()),
        faults,
    );
    let up = Direction::Upstream;
    let down = Direction::Downstream;
    let mut raw = [0u64; 2];
    let mut feed = |core: &mut Core<'_>, dir: Direction, f: Bytes| {
        let r = raw[ix(dir)];
        raw[ix(dir)] += f.len() as u64;
        core.on_piece(dir, Piece::Frame { frame: f, raw: r }, now);
    };
    let hb = flags::END_HEADERS | flags::END_STREAM;
    feed(&mut core, up, frame(FrameType::Headers, hb, 1, &[0x82]));
    feed(&mut core, up, frame(FrameType::Headers, hb, 3, &[0x82]));
    feed(
        &mut core,
        down,
        frame(FrameType::Headers, flags::END_HEADERS, 1, &[0x88]),
    );
    feed(
        &mut core,
        down,
        frame(FrameType::Headers, flags::END_HEADERS, 3, &[0x88]),
    );
    feed(&mut core, down, data(3, false, b"data: three\n\n"));
    feed(&mut core, down, data(1, false, b"data: {\"a\":1}\n\n"));
    feed(&mut core, down, data(1, false, b"data: later\n\n"));
    feed(&mut core, down, data(3, true, b"data: end\n\n"));
    drop(core);
    let obs = keep.0.lock().unwrap().clone();
    (to_server, to_client, obs)
}

/// The kinds of what a queue holds, in order (`bytes` for each run of bytes).
fn items(q: &OutQueue) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    while let Some(next) = q.next().now_or_never() {
        let kind = match next {
            Next::Credit(_) => "credit",
            Next::Item(Out::Bytes { .. }) => "bytes",
            Next::Item(Out::Eof { .. }) => "eof",
            Next::Item(Out::Cut { .. }) => "cut",
            Next::Item(Out::Drain) => "drain",
        };
        if kind != "bytes" || out.last() != Some(&"bytes") {
            out.push(kind);
        }
    }
    out
}

#[test]
fn a_connection_cut_ends_both_sides_and_the_server_acknowledges_a_ping_after_its_requests_first() {
    let (to_server, to_client, _) = converse("reset", CutScope::Connection);
    // The client: what came before the cut point, then the cut.
    assert_eq!(items(&to_client), ["bytes", "cut"]);
    // The server: both request heads, then the drain PING and its wait, then the cut (so the
    // server read every request the relay forwarded before the connection ends).
    assert_eq!(items(&to_server), ["bytes", "drain", "cut"]);
}

#[test]
fn a_reset_cut_tears_stream_1_resets_it_both_ways_and_leaves_stream_3_byte_exact() {
    let (client, server, credit, obs) = run("reset");
    let f = frames(&client);
    let kinds: Vec<_> = f.iter().map(|(h, _)| (h.kind, h.stream)).collect();
    assert_eq!(
        kinds,
        vec![
            (FrameType::Headers, 1),
            (FrameType::Headers, 3),
            (FrameType::Data, 3),
            (FrameType::Data, 1),
            (FrameType::RstStream, 1),
            (FrameType::Data, 3),
        ]
    );
    assert_eq!(f[3].1, b"data:", "the first 5 body bytes, then the reset");
    assert_eq!(f[3].0.flags, 0);
    assert_eq!(rst_code(&f[4].1), Some(ErrorCode::CANCEL));
    // Stream 3's frames are exactly what the server sent.
    let mut expected = data(3, false, b"data: three\n\n").to_vec();
    assert_eq!(
        &client[HEADER_LEN * 2 + 2..][..expected.len()],
        &expected[..]
    );
    expected = data(3, true, b"data: end\n\n").to_vec();
    assert!(client.ends_with(&expected));
    // The server: its two request heads, then RST_STREAM(1, CANCEL); the rest of the cut
    // frame (15 - 5) and the whole dropped frame (13) credited.
    let s = frames(&server);
    assert_eq!(s.len(), 3);
    assert_eq!((s[2].0.kind, s[2].0.stream), (FrameType::RstStream, 1));
    assert_eq!(rst_code(&s[2].1), Some(ErrorCode::CANCEL));
    assert_eq!(credit, 10 + 13);
    let cut = obs
        .iter()
        .find_map(|o| match o {
            Observation::Cut { point, action, .. } => Some((point.clone(), *action)),
            _ => None,
        })
        .expect("a cut is recorded");
    assert_eq!(cut.0.h2_stream, Some(1));
    assert_eq!(cut.1, CutAction::Reset);
    assert_eq!(cut.0.by, Some("sse_cut"));
    let resets: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::StreamReset {
                seq,
                direction,
                code,
                by_proxy: true,
                ..
            } => Some((*seq, *direction, *code)),
            _ => None,
        })
        .collect();
    assert_eq!(
        resets,
        vec![
            (1, Direction::Downstream, ErrorCode::CANCEL.0),
            (1, Direction::Upstream, ErrorCode::CANCEL.0)
        ]
    );
}

#[test]
fn a_clean_end_ends_stream_1_with_end_stream_and_resets_only_the_server_side() {
    let (client, server, credit, obs) = run("clean-end");
    let f = frames(&client);
    let one: Vec<_> = f.iter().filter(|(h, _)| h.stream == 1).collect();
    assert_eq!(
        one.len(),
        3,
        "HEADERS, the bytes before the cut, then the ending DATA"
    );
    assert_eq!(one[1].0.kind, FrameType::Data);
    assert!(!one[1].0.has(flags::END_STREAM));
    assert_eq!(one[1].1, b"data:");
    assert_eq!(one[2].0.kind, FrameType::Data);
    assert!(one[2].0.has(flags::END_STREAM) && one[2].1.is_empty());
    let s = frames(&server);
    assert_eq!(s.last().map(|(h, _)| h.kind), Some(FrameType::RstStream));
    assert_eq!(credit, 10 + 13);
    assert_eq!(
        obs.iter()
            .filter(|o| matches!(o, Observation::StreamReset { .. }))
            .count(),
        1,
        "only the server's RST_STREAM"
    );
    // A credit frame is well formed.
    assert_eq!(
        window_increment(&crate::wire::h2::frame::window_update(0, credit)[HEADER_LEN..]),
        Some(credit)
    );
}

/// Stream 1's items toward the client after its head: (time after `now`, frame kinds).
fn stream_one_items(q: &OutQueue, now: Instant) -> Vec<(Duration, Vec<FrameType>)> {
    let mut out = Vec::new();
    while let Some(next) = q.next().now_or_never() {
        if let Next::Item(Out::Bytes { bytes, at, .. }) = next {
            let kinds: Vec<FrameType> = frames(&bytes)
                .into_iter()
                .filter(|(h, _)| h.stream == 1 && h.kind != FrameType::Headers)
                .map(|(h, _)| h.kind)
                .collect();
            if !kinds.is_empty() {
                out.push((at - now, kinds));
            }
        }
    }
    out
}

#[test]
fn a_stalled_stream_cut_sends_the_bytes_before_it_at_once_and_its_end_stall_ms_later() {
    let stall = Duration::from_millis(250);
    for action in ["reset", "clean-end"] {
        let now = Instant::now();
        let keys = format!("action = \"{action}\"\nstall_ms = 250");
        let (_, to_client, _) = converse_with(&keys, CutScope::Stream, now);
        let end = if action == "reset" {
            FrameType::RstStream
        } else {
            FrameType::Data
        };
        assert_eq!(
            stream_one_items(&to_client, now),
            [(Duration::ZERO, vec![FrameType::Data]), (stall, vec![end])],
            "{action}"
        );
    }
}

#[test]
fn a_byte_latency_delays_the_frames_of_its_direction_and_nothing_else() {
    let proxy = crate::proxy::Proxy::new(ProxyConfig::new("t", "127.0.0.1:9"));
    let def: toml::Table =
        toml::from_str("kind = \"latency\"\nlatency_ms = 50\ndirection = \"downstream\"").unwrap();
    let crate::fault::kind::Built::Conn(f) =
        crate::fault::registry::build(&crate::fault::keys::FaultDef::from_pairs(def)).unwrap()
    else {
        panic!("a connection fault")
    };
    let mut rng = crate::fault::conn_rng(1, "t", 0);
    let now = Instant::now();
    let latency = f.instantiate(&mut rng, now).unwrap();
    let faults = Faults {
        body: Vec::new(),
        h2: Vec::new(),
        bytes: [
            ByteChain {
                faults: Vec::new(),
                rng: ConnRng::from_rng(&mut rng),
                offset: 0,
            },
            ByteChain {
                faults: vec![latency],
                rng: ConnRng::from_rng(&mut rng),
                offset: 0,
            },
        ],
        rng,
    };
    let (to_server, to_client) = (OutQueue::new(1 << 20), OutQueue::new(1 << 20));
    let mut core = Core::new(
        0,
        &proxy,
        [&to_server, &to_client],
        Box::new(Stub::default()),
        faults,
    );
    let sent = data(3, false, b"data: x\n\n");
    let piece = |f: &Bytes| Piece::Frame {
        frame: f.clone(),
        raw: 0,
    };
    core.on_piece(Direction::Downstream, piece(&sent), now);
    core.on_piece(Direction::Upstream, piece(&sent), now);
    let at = |q: &OutQueue| match q.next().now_or_never() {
        Some(Next::Item(Out::Bytes { bytes, at, .. })) => (bytes, at),
        _ => panic!("one frame queued"),
    };
    let (bytes, when) = at(&to_client);
    assert_eq!(bytes, sent, "the frame itself, unchanged");
    assert_eq!(when, now + std::time::Duration::from_millis(50));
    let (bytes, when) = at(&to_server);
    assert_eq!(
        (bytes, when),
        (sent, now),
        "the other direction is not delayed"
    );
}

/// Holds every server `HEADERS` until its stream's first `DATA`; drops the client's `PING`s.
struct HoldHeaders;

impl H2Fault for HoldHeaders {
    fn kind(&self) -> &'static str {
        "test-hold"
    }

    fn on_frame(
        &mut self,
        frame: &FrameView<'_>,
        _facts: &StreamFacts<'_>,
        _now: Instant,
        _rng: &mut ConnRng,
        actions: &mut H2Actions,
    ) {
        match (frame.direction, frame.header.kind) {
            (Direction::Downstream, FrameType::Headers) => {
                actions.verdict =
                    Verdict::Hold(crate::fault::h2::Hold::FirstData { deadline: None });
            }
            (Direction::Upstream, FrameType::Ping) => actions.verdict = Verdict::Drop,
            (Direction::Upstream, FrameType::Settings) => {
                actions.verdict = Verdict::Drop;
                actions.inject.push(Inject::GoAway {
                    to: Direction::Downstream,
                    last_stream: 0,
                    code: ErrorCode::NO_ERROR,
                });
            }
            _ => {}
        }
    }
}

#[test]
fn held_headers_leave_before_their_first_data_keeping_header_block_order() {
    let proxy = crate::proxy::Proxy::new(ProxyConfig::new("t", "127.0.0.1:9"));
    let mut rng = crate::fault::conn_rng(1, "t", 0);
    let faults = Faults {
        body: Vec::new(),
        h2: vec![Box::new(HoldHeaders)],
        bytes: [
            ByteChain {
                faults: Vec::new(),
                rng: ConnRng::from_rng(&mut rng),
                offset: 0,
            },
            ByteChain {
                faults: Vec::new(),
                rng: ConnRng::from_rng(&mut rng),
                offset: 0,
            },
        ],
        rng,
    };
    let (to_server, to_client) = (OutQueue::new(1 << 20), OutQueue::new(1 << 20));
    let mut core = Core::new(
        0,
        &proxy,
        [&to_server, &to_client],
        Box::new(Stub::default()),
        faults,
    );
    let now = Instant::now();
    let mut feed =
        |dir: Direction, f: Bytes| core.on_piece(dir, Piece::Frame { frame: f, raw: 0 }, now);
    let down = Direction::Downstream;
    feed(Direction::Upstream, frame(FrameType::Ping, 0, 0, &[0; 8]));
    feed(Direction::Upstream, frame(FrameType::Settings, 0, 0, &[]));
    feed(
        down,
        frame(FrameType::Headers, flags::END_HEADERS, 1, &[0x88]),
    );
    feed(
        down,
        frame(FrameType::Headers, flags::END_HEADERS, 3, &[0x88]),
    );
    feed(down, frame(FrameType::WindowUpdate, 0, 0, &[0, 0, 1, 0]));
    feed(down, data(3, false, b"three"));
    feed(down, data(1, false, b"one"));
    let (client, _) = drain(&to_client);
    let order: Vec<_> = frames(&client)
        .iter()
        .map(|(h, _)| (h.kind, h.stream))
        .collect();
    assert_eq!(
        order,
        vec![
            (FrameType::GoAway, 0),
            (FrameType::WindowUpdate, 0),
            // Stream 3's DATA releases nothing of stream 1 and waits for its own HEADERS,
            // which wait behind stream 1's (HPACK order).
            (FrameType::Headers, 1),
            (FrameType::Headers, 3),
            (FrameType::Data, 3),
            (FrameType::Data, 1),
        ]
    );
    // The PING was dropped; SETTINGS may not be, so it passed despite the verdict.
    let (server, _) = drain(&to_server);
    let kinds: Vec<_> = frames(&server).iter().map(|(h, _)| h.kind).collect();
    assert_eq!(kinds, vec![FrameType::Settings]);
}
