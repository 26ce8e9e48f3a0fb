//! An SSE event longer than the observer keeps (`DATA_HEAD`) is still read for its JSON-RPC
//! id and kind — wherever the id sits — while the observer holds none of its data: the
//! TypeScript SDK writes a tool result's `id` after the result, and 10,000 streams each with a
//! long event in flight must not cost 4 KiB each.

use std::sync::{Arc, Mutex};

use tearline::wire::http1::{DATA_HEAD, observer_pair};
use tearline::wire::{Observation, ObservationSink, SseClass, WireObserver};

#[derive(Default)]
struct Sink(Mutex<Vec<Observation>>);

impl ObservationSink for Sink {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(obs);
    }
}

/// (data, data_len) of every SSE event reported.
fn events(sink: &Sink) -> Vec<(Vec<u8>, u64)> {
    sink.0
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent { data, data_len, .. } => Some((
                data.as_ref().map(|d| d.to_vec()).unwrap_or_default(),
                *data_len,
            )),
            _ => None,
        })
        .collect()
}

/// Feeds `bytes` to `obs` as one read delivered at once; returns the classes of its cut points.
fn read(obs: &mut Box<dyn WireObserver>, raw: &mut u64, bytes: &[u8]) -> Vec<SseClass> {
    let classes = obs
        .observe(bytes)
        .map(|p| p.runs.iter().map(|r| r.class).collect())
        .unwrap_or_default();
    *raw += bytes.len() as u64;
    obs.delivered_through(*raw);
    classes
}

/// What one long answer left: its events, the observer's held bytes before and in the middle
/// of it, and the classes of the bytes after it.
struct Answer {
    events: Vec<(Vec<u8>, u64)>,
    before: usize,
    held_mid: usize,
    after: Vec<SseClass>,
}

/// A tools/call with id 7 answered by one long event; `result_first` puts the id last.
fn long_answer(result_first: bool, error: bool) -> Answer {
    let sink = Arc::new(Sink::default());
    let (mut up, mut down) = observer_pair(1, sink.clone());
    let body = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"big"}}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut up_raw = 0;
    read(&mut up, &mut up_raw, &[req.as_bytes(), body].concat());
    let mut raw = 0;
    read(
        &mut down,
        &mut raw,
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
    );
    let kind = if error { "error" } else { "result" };
    let text = "a \\\"quoted\\\" {[ text ".repeat(40_000);
    let value = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
    let data = if result_first {
        format!(r#"{{"{kind}":{value},"jsonrpc":"2.0","id":7}}"#)
    } else {
        format!(r#"{{"jsonrpc":"2.0","id":7,"{kind}":{value}}}"#)
    };
    let event = format!("id: e1\ndata: {data}\n\n");
    let before = down.held_bytes();
    let pieces: Vec<&[u8]> = event.as_bytes().chunks(1000).collect();
    let mut held_mid = 0;
    for (i, piece) in pieces.iter().enumerate() {
        read(&mut down, &mut raw, piece);
        if i == pieces.len() / 2 {
            held_mid = down.held_bytes();
        }
    }
    // A comment after the answer: where it falls tells whether the answer was recognised.
    let after = read(&mut down, &mut raw, b": ping\n\n");
    Answer {
        events: events(&sink),
        before,
        held_mid,
        after,
    }
}

#[test]
fn a_long_results_id_is_found_wherever_it_sits_and_its_data_is_not_held() {
    for result_first in [false, true] {
        for error in [false, true] {
            let Answer {
                events: got,
                before,
                held_mid,
                after,
            } = long_answer(result_first, error);
            let kind = if error { "error" } else { "result" };
            assert_eq!(got.len(), 1, "one event: {result_first} {error}");
            let (data, len) = &got[0];
            assert!(*len as usize > 100 * DATA_HEAD, "the event is long ({len})");
            assert_eq!(
                String::from_utf8_lossy(data),
                format!(r#"{{"id":7,"{kind}":0}}"#),
                "the event's facts (result first: {result_first})"
            );
            assert!(
                held_mid < before + DATA_HEAD / 2,
                "the observer held {held_mid} bytes mid-event (before it: {before})"
            );
            assert!(
                after.iter().all(|c| *c == SseClass::AfterFinal),
                "bytes after the answer are after-final: {after:?}"
            );
        }
    }
}

#[test]
fn a_long_event_that_is_no_answer_reports_no_facts() {
    let sink = Arc::new(Sink::default());
    let (_up, mut down) = observer_pair(1, sink.clone());
    let mut raw = 0;
    read(
        &mut down,
        &mut raw,
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
    );
    let notification = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{}","id":7,"result":1}}}}"#,
        "x".repeat(3 * DATA_HEAD)
    );
    let not_json = "y".repeat(3 * DATA_HEAD);
    for data in [notification, not_json] {
        read(&mut down, &mut raw, format!("data: {data}\n\n").as_bytes());
    }
    let got = events(&sink);
    assert_eq!(got.len(), 2);
    for (data, len) in got {
        assert!(len as usize > DATA_HEAD);
        assert!(
            data.is_empty(),
            "no facts: {:?}",
            String::from_utf8_lossy(&data)
        );
    }
}
