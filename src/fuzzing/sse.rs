//! Fuzz target `sse`: the WHATWG scanner and the cut-point classifier.
//!
//! Invariants checked: the events (type, data, own id, last event ID) and the final state
//! (last event ID, retry) equal those of [`reference`], a direct transcription of the WHATWG
//! algorithm on the whole input, under every chunking; a bounded scanner reports the same data
//! lengths and hashes, short data whole and of long data the JSON-RPC facts `parse_head` reads;
//! every payload cut point `0..=n` is classified exactly once, in increasing order,
//! identically under every chunking; event spans and event indexes never go backwards.

use crate::wire::http1::data_hash;
use crate::wire::sse::{EventSpan, ID_LIMIT, SseScanner};
use crate::wire::sse_class::Classified;

use super::{Input, chunkings, pieces};

/// One dispatched event as the reference sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefEvent {
    /// Event type (`message` unless set).
    pub event_type: String,
    /// Data buffer without its final LF.
    pub data: Vec<u8>,
    /// The event's own `id` (last valid id line of its block).
    pub id: Option<String>,
    /// The last event ID string after dispatch.
    pub last_event_id: String,
}

/// What the reference leaves at end of stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RefOutcome {
    /// Dispatched events, in order.
    pub events: Vec<RefEvent>,
    /// The last event ID string at the end.
    pub last_event_id: String,
    /// The reconnection time, if a valid `retry` set it.
    pub retry: Option<u64>,
}

/// The WHATWG event-stream interpretation of a whole stream: split into lines (CRLF, LF, CR),
/// the incomplete last line and the undispatched event discarded.
pub fn reference(stream: &[u8]) -> RefOutcome {
    let body = stream.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(stream);
    let mut out = RefOutcome::default();
    let (mut data, mut event_type, mut id_buf) = (Vec::new(), String::new(), String::new());
    let mut own_id: Option<String> = None;
    let mut rest = body;
    while let Some(i) = rest.iter().position(|&b| b == b'\r' || b == b'\n') {
        let line = &rest[..i];
        let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        rest = &rest[i + skip..];
        if line.is_empty() {
            out.last_event_id = id_buf.clone();
            let id = own_id.take();
            if data.is_empty() {
                event_type.clear();
                continue;
            }
            data.pop();
            let t = if event_type.is_empty() {
                "message".to_owned()
            } else {
                std::mem::take(&mut event_type)
            };
            out.events.push(RefEvent {
                event_type: t,
                data: std::mem::take(&mut data),
                id,
                last_event_id: id_buf.clone(),
            });
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                data.extend_from_slice(value);
                data.push(b'\n');
            }
            b"event" => event_type = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                id_buf = String::from_utf8_lossy(value).into_owned();
                own_id = Some(id_buf.clone());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().fold(0u64, |a, &d| {
                    a.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                });
                out.retry = Some(ms);
            }
            _ => {}
        }
    }
    out
}

/// What one scanner run produced, for comparison across chunkings.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    events: Vec<RefEvent>,
    last_event_id: String,
    retry: Option<u64>,
    /// Per cut point: (class, event index, block start, data line, pending id, last id).
    points: Vec<(crate::wire::SseClass, u64, u64, u32, Option<String>, String)>,
    spans: Vec<EventSpan>,
}

fn scan(payload: &[u8], bounds: &[usize]) -> Run {
    let mut s = SseScanner::new();
    let mut events = Vec::new();
    let mut spans = Vec::new();
    let mut out = Classified::default();
    let mut fed = 0u64;
    for piece in pieces(payload, bounds) {
        fed += piece.len() as u64;
        s.feed_classified(
            piece,
            &mut |e, span| {
                events.push(RefEvent {
                    event_type: e.event_type.to_owned(),
                    data: e.data.to_vec(),
                    id: e.id.map(str::to_owned),
                    last_event_id: e.last_event_id.to_owned(),
                });
                spans.push(span);
                false
            },
            &mut out,
        );
        assert_eq!(
            s.payload_offset(),
            fed,
            "payload offset counts every byte fed"
        );
    }
    s.flush_pending(&mut out);
    let mut points = Vec::new();
    let mut next = 0u64;
    for r in &out.runs {
        assert_eq!(
            r.start, next,
            "runs leave no gap and do not overlap: {:?}",
            out.runs
        );
        assert!(r.end > r.start, "empty run {r:?}");
        let f = out.facts[r.facts as usize];
        for _ in r.start..r.end {
            points.push((
                r.class,
                r.event_index,
                f.block_start,
                f.data_line,
                out.pending_id(&f).map(str::to_owned),
                out.last_id(&f).to_owned(),
            ));
        }
        next = r.end;
    }
    assert_eq!(
        next,
        payload.len() as u64 + 1,
        "every cut point 0..=n is classified"
    );
    s.finish(&mut |_| panic!("finish dispatched an event"));
    Run {
        events,
        last_event_id: s.last_event_id().to_owned(),
        retry: s.retry(),
        points,
        spans,
    }
}

/// The target.
pub fn fuzz(data: &[u8]) {
    let input = Input::new(data);
    let payload = input.payload;
    let want = reference(payload);
    let whole = scan(payload, &[]);
    assert_eq!(
        whole.events, want.events,
        "events differ from the reference"
    );
    assert_eq!(whole.last_event_id, want.last_event_id, "last event ID");
    assert_eq!(whole.retry, want.retry, "retry");
    for w in whole.spans.windows(2) {
        assert!(w[0].end <= w[1].start, "event spans go backwards: {w:?}");
    }
    for s in &whole.spans {
        assert!(
            s.start < s.end && s.end <= payload.len() as u64,
            "bad span {s:?}"
        );
    }
    for w in whole.points.windows(2) {
        assert!(w[0].1 <= w[1].1, "event index goes backwards");
        assert!(w[0].2 <= w[1].2, "block start goes backwards");
    }
    for bounds in chunkings(input.control, payload.len()) {
        assert_eq!(
            scan(payload, &bounds),
            whole,
            "chunking {bounds:?} changed the result"
        );
    }
    bounded(payload, &input.splits(payload.len()), &want);
}

/// A bounded scanner (the proxy's) agrees on lengths, hashes and data heads.
/// (Data longer than [`ID_LIMIT`] could carry an id the scanner declines: its head is not
/// compared.)
fn bounded(payload: &[u8], bounds: &[usize], want: &RefOutcome) {
    const HEAD: usize = 16;
    let mut s = SseScanner::bounded(HEAD, u64::MAX);
    let mut got = Vec::new();
    for piece in pieces(payload, bounds) {
        s.feed(piece, &mut |e| {
            got.push((
                e.data.to_vec(),
                e.data_len,
                e.data_hash,
                e.last_event_id.to_owned(),
            ))
        });
    }
    assert_eq!(got.len(), want.events.len(), "bounded scanner event count");
    for ((head, len, hash, last), w) in got.iter().zip(&want.events) {
        assert_eq!(*len, w.data.len() as u64, "bounded data_len");
        assert_eq!(*hash, Some(data_hash(&w.data)), "bounded data_hash");
        // Short data is kept whole; of longer data, the head of its JSON-RPC facts (what
        // `parse_head` reads from the whole data), or nothing.
        if w.data.len() > ID_LIMIT {
            continue;
        }
        let want_head = if w.data.len() <= HEAD {
            w.data.clone()
        } else {
            match crate::audit::rpc::parse_head(&w.data) {
                Some(crate::audit::rpc::RpcMessage::Response { id, error, .. }) => {
                    let kind = if error { "error" } else { "result" };
                    format!(r#"{{"id":{id},"{kind}":0}}"#).into_bytes()
                }
                _ => Vec::new(),
            }
        };
        assert_eq!(head[..], want_head[..], "bounded data head");
        assert_eq!(*last, w.last_event_id, "bounded last event id");
    }
    assert!(!s.gave_up(), "no line limit was set");
}
