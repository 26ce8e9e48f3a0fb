//! Fuzz target `http1`: the passive HTTP/1.1 observer pair, both directions.
//!
//! Input: 4 control bytes, then the client's bytes, then [`SEPARATOR`], then the server's bytes
//! (no separator: everything is the client's). Invariants checked: the observations and the
//! class of every raw cut point are the same under every chunking of both directions; position
//! runs are ordered, non-empty, inside their chunk, and classify each raw cut point at most once;
//! SSE events lie inside the bytes seen; held bytes stay bounded; and the delivery rule: after a
//! cut at raw offset `x` downstream, the facts released are a prefix of the uncut run's and no
//! released event was dispatched by a byte at or after `x`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::wire::http1::observer_pair;
use crate::wire::{Observation, ObservationSink, SseClass, WireObserver};

use super::{Input, Rng, chunkings, pieces};

/// Separates the client's bytes from the server's in an input.
pub const SEPARATOR: &[u8] = b"\n=====\n";

/// Held bytes an observer may keep for these small inputs (heads, one kept body, queue).
const HELD_LIMIT: usize = 1 << 20;

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

/// Raw cut point → (class, event index, payload offset).
type Classes = BTreeMap<u64, (SseClass, u64, u64)>;

fn feed(obs: &mut dyn WireObserver, input: &[u8], bounds: &[usize]) -> Classes {
    let mut classes = Classes::new();
    let mut prev = 0usize;
    for chunk in pieces(input, bounds) {
        if let Some(p) = obs.observe(chunk) {
            let mut last_end = 0;
            for r in &p.runs {
                assert!(
                    r.start >= last_end && r.start < r.end && r.end <= chunk.len() + 1,
                    "run {r:?} out of order or outside its {}-byte chunk",
                    chunk.len()
                );
                last_end = r.end;
                for k in r.start..r.end {
                    let payload = if r.class == SseClass::ChunkFraming {
                        r.payload_offset
                    } else {
                        r.payload_offset + (k - r.start) as u64
                    };
                    let old = classes.insert((prev + k) as u64, (r.class, r.event_index, payload));
                    // Point 0 of a chunk may restate the previous chunk's last point.
                    assert!(
                        old.is_none() || k == 0,
                        "raw cut point {} classified twice",
                        prev + k
                    );
                }
            }
        }
        assert!(
            obs.held_bytes() <= HELD_LIMIT,
            "observer holds {} bytes",
            obs.held_bytes()
        );
        prev += chunk.len();
        obs.delivered_through(prev as u64);
    }
    obs.eof();
    classes
}

fn converse(up: &[u8], down: &[u8], ub: &[usize], db: &[usize]) -> (Vec<Observation>, Classes) {
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(1, rec.clone());
    feed(&mut *u, up, ub);
    let classes = feed(&mut *d, down, db);
    let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
    (obs, classes)
}

/// The server's bytes up to raw offset `x` delivered, then a cut there.
fn converse_cut(up: &[u8], down: &[u8], x: usize) -> Vec<Observation> {
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(1, rec.clone());
    feed(&mut *u, up, &[]);
    if !d.is_opaque() {
        d.observe(down);
    } else {
        d.passed(down.len() as u64);
    }
    d.delivered_through(x as u64);
    let _ = d.clean_end_at(x as u64);
    let point = d.cut_at(x as u64);
    assert_eq!(point.raw_offset, x as u64, "cut point names its raw offset");
    let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
    for o in &obs {
        if let Observation::SseEvent { raw_end, .. } = o {
            assert!(
                *raw_end <= x as u64,
                "event released past the cut at {x}: {o:?}"
            );
        }
    }
    obs
}

/// Facts whose release the delivery rule fixes (ends of bodies depend on how they ended).
fn facts(obs: &[Observation]) -> Vec<&Observation> {
    obs.iter()
        .filter(|o| {
            matches!(
                o,
                Observation::Request { .. }
                    | Observation::Response { .. }
                    | Observation::SseEvent { .. }
            )
        })
        .collect()
}

/// The target.
pub fn fuzz(data: &[u8]) {
    let input = Input::new(data);
    let p = input.payload;
    let (up, down) = match memchr::memmem::find(p, SEPARATOR) {
        Some(i) => (&p[..i], &p[i + SEPARATOR.len()..]),
        None => (p, &p[p.len()..]),
    };
    let whole = converse(up, down, &[], &[]);
    let mut last_seq = None;
    for o in &whole.0 {
        match o {
            Observation::SseEvent {
                raw_start, raw_end, ..
            } => assert!(
                raw_start <= raw_end && *raw_end <= down.len() as u64,
                "event outside the bytes seen: {o:?}"
            ),
            Observation::Request { seq, .. } => {
                assert!(last_seq < Some(*seq), "request seq not increasing: {o:?}");
                last_seq = Some(*seq);
            }
            _ => {}
        }
    }
    let up_chunkings = chunkings(input.control, up.len());
    let down_control = [input.byte(1), input.byte(2), input.byte(3), input.byte(0)];
    let down_chunkings = chunkings(&down_control, down.len());
    for (i, db) in down_chunkings.iter().enumerate() {
        let ub = &up_chunkings[i % up_chunkings.len()];
        assert_eq!(
            converse(up, down, ub, db),
            whole,
            "chunking up {ub:?} down {db:?} changed the result"
        );
    }
    let mut rng = Rng::from_bytes(input.control);
    let x = rng.below(down.len() + 1);
    let cut = converse_cut(up, down, x);
    let (cut, all) = (facts(&cut), facts(&whole.0));
    assert!(
        cut.len() <= all.len() && cut[..] == all[..cut.len()],
        "facts after a cut at {x} are not a prefix of the uncut run's"
    );
}
