//! The HTTP/SSE observer's memory does not depend on how many reads an SSE event spans: feeding
//! one event as thousands of small HTTP chunks (one read each) leaves what the observer holds
//! (its `bytes_buffered` share) where it was after the event's first reads, and the event is
//! still reported with the exact raw offsets of its bytes.

use std::sync::{Arc, Mutex};

use tearline::wire::http1::{DATA_HEAD, observer_pair};
use tearline::wire::{Observation, ObservationSink, WireObserver};

#[derive(Default)]
struct Sink(Mutex<Vec<Observation>>);

impl ObservationSink for Sink {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(obs);
    }
}

/// The downstream observer of one connection and the raw offset it has seen.
struct Down {
    obs: Box<dyn WireObserver>,
    raw: u64,
}

impl Down {
    /// One read of `bytes`, written to the client at once.
    fn read(&mut self, bytes: &[u8]) {
        self.obs.observe(bytes);
        self.raw += bytes.len() as u64;
        self.obs.delivered_through(self.raw);
    }
}

/// One HTTP/1.1 chunk carrying `data`.
fn chunk(data: &[u8]) -> Vec<u8> {
    [format!("{:x}\r\n", data.len()).as_bytes(), data, b"\r\n"].concat()
}

fn events(sink: &Sink) -> Vec<(Option<String>, u64, u64, u64)> {
    sink.0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent {
                id,
                data_len,
                raw_start,
                raw_end,
                ..
            } => Some((id.clone(), *data_len, *raw_start, *raw_end)),
            _ => None,
        })
        .collect()
}

#[test]
fn held_bytes_stay_flat_while_one_event_spans_many_reads_and_its_offsets_stay_exact() {
    for eol in ["\n", "\r\n"] {
        let sink = Arc::new(Sink::default());
        let (_up, obs) = observer_pair(1, sink.clone());
        let mut down = Down { obs, raw: 0 };
        down.read(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
              transfer-encoding: chunked\r\n\r\n",
        );
        // A small event, then the big one's first line, in one HTTP chunk: the big event's
        // block starts mid-chunk.
        let first = format!("id: 1{eol}data: x{eol}{eol}");
        let lead = format!("{first}id: 2{eol}data: a");
        let framing = format!("{:x}\r\n", lead.len()).len() as u64;
        let big_start = down.raw + framing + first.len() as u64;
        down.read(&chunk(lead.as_bytes()));
        // Then the rest of its data line, 16 bytes per HTTP chunk, one read each.
        let piece = chunk(&[b'a'; 16]);
        let mut value = 1u64;
        for _ in 0..(2 * DATA_HEAD / 16) {
            down.read(&piece);
            value += 16;
        }
        let settled = down.obs.held_bytes();
        for _ in 0..100_000 {
            down.read(&piece);
            value += 16;
        }
        assert_eq!(
            down.obs.held_bytes(),
            settled,
            "100,000 more reads of the same event add nothing to what the observer holds"
        );
        let end = format!("{eol}{eol}");
        down.read(&chunk(end.as_bytes()));
        // The blank line's CR (or LF) dispatches; the HTTP chunk's CRLF follows the data.
        let big_end = down.raw - 2 - (eol.len() as u64 - 1);
        let got = events(&sink);
        assert_eq!(got.len(), 2, "both events reported: {got:?}");
        assert_eq!(got[1], (Some("2".to_owned()), value, big_start, big_end));
    }
}
