//! Regression tests for the bad inputs fuzzing found (the inputs are also corpus files under
//! `fuzz/corpus/`, replayed by `tests/fuzz_corpus.rs`).

use std::sync::{Arc, Mutex};

use tearline::wire::http1::observer_pair;
use tearline::wire::sse::SseScanner;
use tearline::wire::{Observation, ObservationSink};

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

/// Found by `http1` (corpus `regress-split-bom-chunk-points`): while a BOM arrived split across
/// reads, the scanner's payload offset stayed 0, so the observer placed the BOM's cut points
/// past the end of the chunk that carried them.
#[test]
fn split_bom_counts_in_the_payload_offset() {
    let mut s = SseScanner::new();
    s.feed(b"\xEF", &mut |_| {});
    assert_eq!(s.payload_offset(), 1);
    s.feed(b"\xBB", &mut |_| {});
    assert_eq!(s.payload_offset(), 2);
    s.feed(b"\xBFdata: x\n\n", &mut |_| {});
    assert_eq!(s.payload_offset(), 12);
    let mut half = SseScanner::new();
    let mut events = Vec::new();
    half.feed(b"\xEF\xBB", &mut |_| {});
    half.feed(b"data: x\n\n", &mut |e| events.push(e.data.to_vec()));
    assert_eq!(
        half.payload_offset(),
        11,
        "a broken BOM is content, counted once"
    );
    assert!(
        events.is_empty(),
        "the line starts with EF BB: an unknown field"
    );
}

#[test]
fn split_bom_cut_points_stay_inside_their_chunks() {
    let down: &[u8] =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n\xEF\xBB\xBFdata: x\r\n\r\n";
    let body = down.len() - 13;
    for split in body..body + 4 {
        let rec = Arc::new(Recorder::default());
        let (mut up, mut d) = observer_pair(1, rec.clone());
        up.observe(b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n");
        up.delivered_through(28);
        for chunk in [&down[..split], &down[split..]] {
            if let Some(p) = d.observe(chunk) {
                for r in &p.runs {
                    assert!(
                        r.end <= chunk.len() + 1,
                        "split at {split}: run {r:?} outside its {}-byte chunk",
                        chunk.len()
                    );
                }
            }
        }
    }
}

/// Raw cut points the observer labels, feeding `down` in `piece`-byte chunks.
fn labelled_points(down: &[u8], piece: usize) -> Vec<u64> {
    let rec = Arc::new(Recorder::default());
    let (mut up, mut d) = observer_pair(1, rec);
    let req = b"GET /s HTTP/1.1\r\nHost: x\r\n\r\n";
    up.observe(req);
    up.delivered_through(req.len() as u64);
    let mut points = Vec::new();
    let mut at = 0u64;
    for chunk in down.chunks(piece) {
        if let Some(p) = d.observe(chunk) {
            for r in &p.runs {
                points.extend((r.start..r.end).map(|k| at + k as u64));
            }
        }
        at += chunk.len() as u64;
        d.delivered_through(at);
    }
    points.sort_unstable();
    points.dedup();
    points
}

/// Found by `http1` (corpus `regress-malformed-size-line`): a size line that turns malformed
/// after a valid hex digit (`a:`) was framing up to that byte when read byte by byte, but not
/// when read whole, so whether a cut there was aimable depended on the reads.
#[test]
fn malformed_size_line_is_labelled_the_same_under_every_chunking() {
    let down: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: b\n\n\r\na: y0\r\n\r\n";
    let whole = labelled_points(down, down.len());
    for piece in 1..8 {
        assert_eq!(labelled_points(down, piece), whole, "{piece}-byte reads");
    }
}
