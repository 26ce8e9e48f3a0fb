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

/// Found by `lab` (corpus `regress-float-id-echo`, third fuzzing run): a request whose id is a
/// number with more digits than an f64 holds got an error answer whose id, read back, was
/// another number (`57773.7777777388888888` → `57773.777777738884` from the release binary).
/// serde_json's default float parsing is not correctly rounded, so the lab's echo (the
/// shortest digits of its parse) did not read back as the same double. With `float_roundtrip`
/// every parse is correctly rounded and the echo reads back as the id.
#[test]
fn the_lab_echoes_a_long_fractional_id_as_the_same_number() {
    tearline::fuzzing::lab::fuzz(include_bytes!(
        "../../fuzz/corpus/lab/regress-float-id-echo"
    ));
}

#[test]
fn a_long_fractional_id_reads_back_as_the_double_a_correct_parser_gives() {
    use http_body_util::Full;
    use tearline::lab::LabConfig;
    use tearline::lab::socketless::DirectLab;
    use tearline::lab::sse_body::LabBody;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let lab = DirectLab::new(LabConfig::default()).unwrap();
        let init = http::Request::post("/mcp")
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(Full::new(bytes::Bytes::from_static(
                br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            )))
            .unwrap();
        let session = lab
            .answer(init)
            .await
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
            .expect("a session id");
        for id in ["57773.7777777388888888", "0.1000000000000000055511151231257827", "1e-7"] {
            // A malformed request (no method): answered with an error carrying the id.
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"metho)":"tools/call"}}"#);
            let req = http::Request::post("/mcp")
                .header("accept", "application/json, text/event-stream")
                .header("content-type", "application/json")
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-11-25")
                .body(Full::new(bytes::Bytes::from(body)))
                .unwrap();
            let answer = match lab.answer(req).await.into_body() {
                LabBody::Full(b) => b.unwrap_or_default(),
                _ => panic!("a JSON answer was expected"),
            };
            // The id's own digits, as sent (not re-read through serde_json).
            let text = String::from_utf8_lossy(&answer);
            let at = text.find(r#""id":"#).expect("an id in the answer") + 5;
            let echoed: String = text[at..]
                .chars()
                .take_while(|c| !matches!(c, ',' | '}'))
                .collect();
            // Rust's own `f64` parser is correctly rounded: both texts must name one double.
            let want: f64 = id.parse().unwrap();
            let got: f64 = echoed.parse().unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(got.to_bits(), want.to_bits(), "id {id} echoed as {echoed}");
        }
        lab.shutdown().await;
    });
}

/// `cargo test` may not show the defect above on its own: any dev-dependency that turns on
/// serde_json's `float_roundtrip` (one did) turns it on for every test build, while the shipped
/// binary (and the `cargo fuzz` build, where it was found) gets only the features tearline asks
/// for. So the fix is one line of Cargo.toml, and this guards it.
#[test]
fn the_shipped_build_asks_for_correctly_rounded_json_numbers() {
    let manifest = include_str!("../../Cargo.toml");
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("serde_json"))
        .expect("serde_json is a dependency");
    assert!(
        line.contains("float_roundtrip"),
        "serde_json without float_roundtrip: JSON-RPC ids with long fractions are echoed as \
         other numbers by the release binary ({line})"
    );
}
