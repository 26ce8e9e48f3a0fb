//! Scanner throughput on one core: `cargo bench --bench sse_scan`.
//!
//! Measures, in the same run, a `memchr` pass over the same bytes (the baseline: the least any
//! line-oriented parser must do), the plain WHATWG scanner, the classifying scanner, and the
//! HTTP/1.1 downstream observer over a chunked SSE response, on large-data streams (64 KiB and
//! 4 MiB events, the documents' tool results) fed in 64 KiB reads. Prints MB/s and the ratio to
//! the baseline. Goal: ≥ 2 GB/s for the plain scanner on large-data streams. The observer also
//! hashes every event's data with XXH3-64 (for the audit); that hash alone is measured too.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tearline::wire::http1::observer_pair;
use tearline::wire::sse::SseScanner;
use tearline::wire::sse_class::Classified;
use tearline::wire::{Observation, ObservationSink};

struct Discard;

impl ObservationSink for Discard {
    fn record(&self, obs: Observation) {
        black_box(obs);
    }
}

const READ: usize = 64 * 1024;
const TOTAL: usize = 256 * 1024 * 1024;

/// Events of `event_len` data bytes (3 data lines each), until about `TOTAL` bytes.
fn stream(event_len: usize) -> Vec<u8> {
    let line = event_len / 3;
    let mut one = Vec::with_capacity(event_len + 64);
    one.extend_from_slice(b"id: 00000000-0000-0000-0000-000000000000_1700000000000_42\n");
    for i in 0..3 {
        one.extend_from_slice(b"data: ");
        one.extend((0..line).map(|j| b"{\"k\":\"abcdefghijklmnop\"},"[(i + j) % 25]));
        one.push(b'\n');
    }
    one.push(b'\n');
    let mut s = Vec::with_capacity(TOTAL + one.len());
    while s.len() < TOTAL {
        s.extend_from_slice(&one);
    }
    s
}

fn chunked(payload: &[u8]) -> Vec<u8> {
    let mut s =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for c in payload.chunks(16 * 1024) {
        s.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        s.extend_from_slice(c);
        s.extend_from_slice(b"\r\n");
    }
    s.extend_from_slice(b"0\r\n\r\n");
    s
}

fn best_of(runs: usize, bytes: usize, mut f: impl FnMut()) -> f64 {
    let mut best = Duration::MAX;
    for _ in 0..runs {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed());
    }
    bytes as f64 / best.as_secs_f64() / 1e6
}

fn main() {
    for event_len in [64 * 1024, 4 * 1024 * 1024] {
        let s = stream(event_len);
        let baseline = best_of(3, s.len(), || {
            let mut n = 0usize;
            for c in s.chunks(READ) {
                n += memchr::memchr2_iter(b'\r', b'\n', c).count();
            }
            black_box(n);
        });
        let plain = best_of(3, s.len(), || {
            let mut sc = SseScanner::new();
            let mut n = 0u64;
            for c in s.chunks(READ) {
                sc.feed(c, &mut |e| n += e.data.len() as u64);
            }
            black_box(n);
        });
        let classified = best_of(3, s.len(), || {
            let mut sc = SseScanner::new();
            let mut out = Classified::default();
            let mut n = 0u64;
            for c in s.chunks(READ) {
                out.clear();
                sc.feed_classified(
                    c,
                    &mut |e, _| {
                        n += e.data.len() as u64;
                        false
                    },
                    &mut out,
                );
                n += out.runs.len() as u64;
            }
            black_box(n);
        });
        let hashed = best_of(3, s.len(), || {
            let mut h = 0u64;
            for c in s.chunks(READ) {
                h ^= tearline::wire::http1::data_hash(c);
            }
            black_box(h);
        });
        let wire = chunked(&s);
        let observed = best_of(3, wire.len(), || {
            let (mut up, mut down) = observer_pair(0, Arc::new(Discard));
            up.observe(b"GET /mcp HTTP/1.1\r\n\r\n");
            let mut n = 0usize;
            for c in wire.chunks(READ) {
                n += down.observe(c).map_or(0, |p| p.runs.len());
            }
            down.eof();
            black_box(n);
        });
        println!(
            "events of {} KiB, {} MiB fed in {} KiB reads:",
            event_len / 1024,
            s.len() >> 20,
            READ / 1024
        );
        for (name, mbs) in [
            ("memchr CR/LF baseline", baseline),
            ("scanner (plain)", plain),
            ("scanner (classifying)", classified),
            ("XXH3-64 of the bytes", hashed),
            ("http1 observer, chunked SSE", observed),
        ] {
            println!(
                "  {name:<30} {mbs:>9.0} MB/s  {:>5.2}x baseline",
                mbs / baseline
            );
        }
    }
}
