use std::sync::Arc;

use super::*;
use crate::fault::conn_rng;
use crate::wire::LlmPos;
use crate::wire::http1::observer_pair;
use crate::wire::{Observation, ObservationSink, WireObserver};

struct NoSink;

impl ObservationSink for NoSink {
    fn record(&self, _: Observation) {}
}

/// A POST whose SSE response holds every class the scanner produces, in one chunk.
fn stream() -> (Vec<u8>, Vec<u8>) {
    let rpc = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#;
    let up = format!(
        "POST /mcp HTTP/1.1\r\nContent-Length: {}\r\n\r\n{rpc}",
        rpc.len()
    )
    .into_bytes();
    let payload = "\u{feff}id: p0\ndata:\n\n: keepalive\nevent: m\nid: e1\ndata: {\"a\":\"\u{e9}\"}\r\ndata: x\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n: bye\n\n";
    let body: String = payload
        .as_bytes()
        .chunks(17)
        .map(|c| format!("{:x}\r\n{}\r\n", c.len(), String::from_utf8_lossy(c)))
        .collect();
    // Chunks split inside a multi-byte character would not survive the lossy round trip.
    assert!(!body.contains('\u{fffd}'));
    let down = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{body}0\r\n\r\n"
    );
    (up, down.into_bytes())
}

fn positions() -> (Vec<u8>, ChunkPositions) {
    let (up, down) = stream();
    observed(&up, down)
}

/// The same response, to a resume request (a GET carrying `Last-Event-ID`).
fn resume_positions() -> (Vec<u8>, ChunkPositions) {
    let (_, down) = stream();
    let up = b"GET /mcp HTTP/1.1\r\nLast-Event-ID: e0\r\n\r\n".to_vec();
    observed(&up, down)
}

fn observed(up: &[u8], down: Vec<u8>) -> (Vec<u8>, ChunkPositions) {
    let (mut u, mut d): (Box<dyn WireObserver>, Box<dyn WireObserver>) =
        observer_pair(0, Arc::new(NoSink));
    u.observe(up);
    let pos = d.observe(&down).cloned().unwrap_or_default();
    (down, pos)
}

fn class_at(pos: &ChunkPositions, k: usize) -> Option<SseClass> {
    pos.runs
        .iter()
        .find(|r| r.start <= k && k < r.end)
        .map(|r| r.class)
}

fn cfg(toml_text: &str) -> SseCutConfig {
    match toml::from_str(toml_text) {
        Ok(c) => c,
        Err(e) => panic!("{toml_text}: {e}"),
    }
}

fn cut_with(cfg: &SseCutConfig, seed: u64, bytes: &[u8], pos: &ChunkPositions) -> Plan {
    let f = factory(cfg.clone());
    let now = Instant::now();
    let mut rng = conn_rng(seed, "t", 0);
    let mut fault = f.instantiate(&mut rng, now).expect("instantiates");
    let mut plan = Plan::default();
    plan.reset(bytes.len(), now);
    let chunk = Chunk {
        bytes,
        offset: 0,
        arrived: now,
        direction: Direction::Downstream,
        positions: Some(pos),
    };
    fault.on_chunk(&chunk, &mut plan, &mut rng);
    plan
}

#[test]
fn the_stream_holds_every_scanner_class() {
    let (_, pos) = positions();
    for c in SseClass::ALL {
        if c == SseClass::DuringReplay {
            continue;
        }
        assert!(pos.runs.iter().any(|r| r.class == c), "{c} missing");
    }
}

#[test]
fn each_class_target_cuts_exactly_at_a_cut_point_of_that_class() {
    let (down, pos) = positions();
    for c in SseClass::ALL {
        if c == SseClass::DuringReplay {
            continue;
        }
        let cfg = cfg(&format!("at = \"{c}\"\naction = \"fin\""));
        for seed in 0..20 {
            let plan = cut_with(&cfg, seed, &down, &pos);
            let cut = plan.cut().unwrap_or_else(|| panic!("{c}: no cut"));
            assert_eq!(class_at(&pos, cut.at), Some(c), "seed {seed}");
            assert_eq!(cut.action, CutAction::Fin);
            assert_eq!(
                plan.slices().last().map(|s| s.end),
                Some(cut.at).filter(|&k| k > 0)
            );
        }
    }
}

#[test]
fn class_frequencies_follow_the_weights() {
    let (down, pos) = positions();
    let cfg = cfg("at = { mid-value = 3, after-id = 1, before-dispatch = 1, boundary = 1 }");
    let n = 10_000;
    let mut counts = BTreeMap::new();
    for seed in 0..n {
        let plan = cut_with(&cfg, seed, &down, &pos);
        let class = plan.cut().and_then(|c| class_at(&pos, c.at));
        *counts.entry(class).or_insert(0u64) += 1;
    }
    for (class, w) in [
        (SseClass::MidValue, 3.0),
        (SseClass::AfterId, 1.0),
        (SseClass::BeforeDispatch, 1.0),
        (SseClass::Boundary, 1.0),
    ] {
        let p: f64 = w / 6.0;
        let mean = n as f64 * p;
        let sigma = (n as f64 * p * (1.0 - p)).sqrt();
        let got = counts.get(&Some(class)).copied().unwrap_or(0) as f64;
        assert!(
            (got - mean).abs() <= 3.0 * sigma,
            "{class}: {got} vs {mean} ± {}",
            3.0 * sigma
        );
    }
}

#[test]
fn same_seed_gives_the_same_any_byte_offsets() {
    let (down, pos) = positions();
    let cfg = cfg("at = \"any-byte\"\nrange = [0, 100]");
    let offsets: Vec<Option<usize>> = (0..50)
        .map(|s| cut_with(&cfg, s, &down, &pos).cut().map(|c| c.at))
        .collect();
    let again: Vec<Option<usize>> = (0..50)
        .map(|s| cut_with(&cfg, s, &down, &pos).cut().map(|c| c.at))
        .collect();
    assert_eq!(offsets, again);
    assert!(offsets.iter().all(Option::is_some));
    let distinct: std::collections::BTreeSet<_> = offsets.iter().collect();
    assert!(distinct.len() > 20, "offsets vary with the seed");
    for k in offsets.into_iter().flatten() {
        assert_ne!(class_at(&pos, k), Some(SseClass::ChunkFraming));
    }
}

#[test]
fn filters_probability_events_stall_and_outage_are_honoured() {
    let (down, pos) = positions();
    let no = |t: &str| assert!(cut_with(&cfg(t), 1, &down, &pos).cut().is_none(), "{t}");
    no("at = \"mid-value\"\nmethod = \"GET\"");
    no("at = \"mid-value\"\npath = \"/other\"");
    no("at = \"mid-value\"\nprobability = 0.0");
    no("at = \"mid-value\"\nevents = [5, 9]");
    let c = cfg(
        "at = \"mid-value\"\npath = \"/m*\"\nmethod = \"POST\"\nevents = [1, 1]\nstall_ms = 250\noutage_ms = 250\naction = \"clean-end\"",
    );
    let plan = cut_with(&c, 1, &down, &pos);
    let cut = plan.cut().expect("cut");
    let run = pos
        .runs
        .iter()
        .find(|r| r.start <= cut.at && cut.at < r.end)
        .expect("run");
    assert_eq!((run.class, run.event_index), (SseClass::MidValue, 1));
    assert_eq!(cut.outage, Some(Duration::from_millis(250)));
    assert_eq!(cut.action, CutAction::CleanEnd);
    let last = plan.slices().last().copied().expect("stall slice");
    assert_eq!((last.start, last.end), (cut.at, cut.at));
    assert!(last.at >= plan.slices()[0].at + Duration::from_millis(250));
}

#[test]
fn a_stream_that_is_not_selected_leaves_the_next_one_to_decide() {
    let (_, pos) = positions();
    let mut two = pos.clone();
    let first = two.streams[0].stream.clone();
    let mut other = (*first).clone();
    other.seq += 1;
    other.path = "/other".into();
    let half = two.runs.len() / 2;
    let from = two.runs[half].start;
    two.streams = vec![
        crate::wire::StreamSpan {
            from: 0,
            stream: Arc::new(StreamInfo {
                path: "/skip".into(),
                ..(*first).clone()
            }),
        },
        crate::wire::StreamSpan {
            from,
            stream: Arc::new(other),
        },
    ];
    let len = two.runs.last().map_or(0, |r| r.end);
    let bytes = vec![b'x'; len];
    let plan = cut_with(
        &cfg("at = \"any-byte\"\nrange = [0, 0]\npath = \"/other\""),
        3,
        &bytes,
        &two,
    );
    assert_eq!(plan.cut().map(|c| c.at >= from), Some(true));
}

/// The structural class under the cut point `k`.
fn base_at(pos: &ChunkPositions, k: usize) -> Option<SseClass> {
    pos.runs
        .iter()
        .find(|r| r.start <= k && k < r.end)
        .map(|r| r.base)
}

#[test]
fn a_class_is_a_position_on_first_and_resume_legs_alike() {
    let (first, first_pos) = positions();
    let (resume, resume_pos) = resume_positions();
    assert!(resume_pos.streams.iter().all(|s| s.stream.resume));
    assert!(first_pos.streams.iter().all(|s| !s.stream.resume));
    for c in SseClass::ALL {
        if c == SseClass::DuringReplay {
            continue;
        }
        // `after-final` needs the request's JSON-RPC id, which a resume GET does not carry.
        if c == SseClass::AfterFinal {
            continue;
        }
        let cfg = cfg(&format!("at = \"{c}\""));
        for (bytes, pos) in [(&first, &first_pos), (&resume, &resume_pos)] {
            let cut = cut_with(&cfg, 5, bytes, pos).cut().map(|c| c.at);
            let k = cut.unwrap_or_else(|| panic!("{c}: no cut"));
            assert_eq!(base_at(pos, k), Some(c));
        }
        // On the resume leg a cut inside an event is recorded as during-replay.
        let k = cut_with(&cfg, 5, &resume, &resume_pos).cut().map(|c| c.at);
        let recorded = k.and_then(|k| class_at(&resume_pos, k));
        let want = if c.tears_event() && c.on_resume() == SseClass::DuringReplay {
            SseClass::DuringReplay
        } else {
            c
        };
        assert_eq!(recorded, Some(want), "{c}");
    }
}

#[test]
fn leg_restricts_a_class_to_first_or_resume_legs() {
    let (first, first_pos) = positions();
    let (resume, resume_pos) = resume_positions();
    let cuts = |t: &str| {
        (
            cut_with(&cfg(t), 2, &first, &first_pos).cut().is_some(),
            cut_with(&cfg(t), 2, &resume, &resume_pos).cut().is_some(),
        )
    };
    assert_eq!(cuts("at = \"mid-value\""), (true, true));
    assert_eq!(cuts("at = \"mid-value\"\nleg = \"any\""), (true, true));
    assert_eq!(cuts("at = \"mid-value\"\nleg = \"first\""), (true, false));
    assert_eq!(cuts("at = \"mid-value\"\nleg = \"resume\""), (false, true));
    // during-replay keeps its meaning: tearing positions of resume legs only.
    assert_eq!(cuts("at = \"during-replay\""), (false, true));
}

#[test]
fn invalid_definitions_are_rejected_with_reasons() {
    let err = |t: &str| match toml::from_str::<SseCutConfig>(t) {
        Ok(c) => panic!("{t} accepted: {c:?}"),
        Err(e) => e.to_string(),
    };
    assert!(err("at = \"mid-valu\"").contains("mid-value"));
    assert!(err("at = \"any-byte\"").contains("range"));
    assert!(err("at = \"boundary\"\nbogus = 1").contains("bogus"));
    assert!(err("at = { mid-value = 0 }").contains("positive"));
    assert!(err("at = \"boundary\"\nrange = [5, 1]").contains("a <= b"));
    assert!(err("at = \"boundary\"\nprobability = 2.0").contains("probability"));
    assert!(err("at = \"boundary\"\ndirection = \"upstream\"").contains("downstream"));
    assert!(err("at = \"boundary\"\nleg = \"second\"").contains("second"));
    assert!(err("at = { mid-delta = 1, mid-value = 1 }").contains("mixes"));
    assert!(err("at = { mid-delta = 0 }").contains("positive"));
    assert!(err("at = \"mid-delta\"\nnth = [3, 1]").contains("'nth'"));
    assert_eq!(cfg("at = \"mid-delta\"\nnth = [2, 9]").nth, Some((2, 9)));
    assert_eq!(
        cfg("at = { mid-delta = 3, before-completion = 1 }").at,
        CutTarget::Llm(vec![
            (LlmPos::MidDelta, 3.0),
            (LlmPos::BeforeCompletion, 1.0)
        ])
    );
    assert_eq!(
        cfg("at = \"after-completion\"").at,
        CutTarget::Llm(vec![(LlmPos::AfterCompletion, 1.0)])
    );
    let ok =
        cfg("at = { mid-value = 3, after-id = 1 }\ndirection = \"downstream\"\nprobability = 0.5");
    assert_eq!(
        ok.at,
        CutTarget::Classes(vec![(SseClass::MidValue, 3.0), (SseClass::AfterId, 1.0)])
    );
    assert_eq!(ok.action, CutAction::Reset);
}
