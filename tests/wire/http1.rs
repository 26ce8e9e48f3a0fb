//! The passive HTTP/1.1 observer: keep-alive and pipelining, chunked bodies with extensions and
//! trailers, close-delimited bodies, HEAD/204/304, non-HTTP and TLS traffic, SSE positions, the
//! delivery rule and clean ends; every result is checked under every chunking.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use tearline::wire::http1::observer_pair;
use tearline::wire::{Observation, ObservationSink, SseClass, WireObserver};

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

fn feed(obs: &mut dyn WireObserver, input: &[u8], cuts: &[usize]) -> Classes {
    let mut classes = Classes::new();
    let mut prev = 0;
    let mut bounds: Vec<usize> = cuts.to_vec();
    bounds.push(input.len());
    for b in bounds {
        let chunk = &input[prev..b];
        if let Some(p) = obs.observe(chunk) {
            let mut last_end = 0;
            for r in &p.runs {
                assert!(r.start >= last_end && r.start < r.end && r.end <= chunk.len() + 1);
                last_end = r.end;
                for k in r.start..r.end {
                    let payload = if r.class == SseClass::ChunkFraming {
                        r.payload_offset
                    } else {
                        r.payload_offset + (k - r.start) as u64
                    };
                    let old = classes.insert((prev + k) as u64, (r.class, r.event_index, payload));
                    assert!(old.is_none(), "raw cut point {} classified twice", prev + k);
                }
            }
        }
        prev = b;
        // Fast path: the chunk was written whole.
        obs.delivered_through(prev as u64);
    }
    obs.eof();
    classes
}

/// Runs a conversation with the given chunk boundaries; returns observations and classes.
fn converse(
    up: &[u8],
    down: &[u8],
    up_cuts: &[usize],
    down_cuts: &[usize],
) -> (Vec<Observation>, Classes) {
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(1, rec.clone());
    feed(&mut *u, up, up_cuts);
    let classes = feed(&mut *d, down, down_cuts);
    let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
    (obs, classes)
}

/// Whole, 1-byte pieces and every single split agree; returns the whole-feed result.
fn observe_all_chunkings(up: &[u8], down: &[u8]) -> (Vec<Observation>, Classes) {
    let whole = converse(up, down, &[], &[]);
    let ones_up: Vec<usize> = (1..up.len()).collect();
    let ones_down: Vec<usize> = (1..down.len()).collect();
    assert_eq!(
        converse(up, down, &ones_up, &ones_down),
        whole,
        "1-byte pieces"
    );
    for k in 0..=down.len() {
        assert_eq!(
            converse(up, down, &[], &[k]),
            whole,
            "downstream split at {k}"
        );
    }
    for k in 0..=up.len() {
        assert_eq!(
            converse(up, down, &[k], &[]),
            whole,
            "upstream split at {k}"
        );
    }
    whole
}

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

fn chunked(parts: &[&str]) -> String {
    let mut s = String::new();
    for (i, p) in parts.iter().enumerate() {
        s.push_str(&format!("{:x};n={i}\r\n{p}\r\n", p.len()));
    }
    s.push_str("0\r\nX-Trailer: t\r\n\r\n");
    s
}

fn up_requests() -> String {
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#;
    format!(
        "POST /mcp HTTP/1.1\r\nHost: x\r\nMcp-Session-Id: s1\r\nAuthorization: Bearer t\r\nContent-Length: {}\r\n\r\n{body}\
         GET /mcp HTTP/1.1\r\nHost: x\r\nLast-Event-ID: e1\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n\
         HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n\
         DELETE /mcp HTTP/1.1\r\nHost: x\r\n\r\n\
         GET /c HTTP/1.1\r\nHost: x\r\n\r\n",
        body.len()
    )
}

fn down_responses() -> String {
    let sse = chunked(&[
        "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n",
        "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,",
        "\"result\":{}}\n\n",
    ]);
    format!(
        "HTTP/1.1 100 Continue\r\n\r\n{SSE_HEAD}{sse}\
         HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 10\r\n\r\ndata: x\r\n\r\n\
         HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n\
         HTTP/1.1 204 No Content\r\n\r\n\
         HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"
    )
}

#[test]
fn keep_alive_conversation_is_observed_identically_under_every_chunking() {
    let (obs, classes) =
        observe_all_chunkings(up_requests().as_bytes(), down_responses().as_bytes());
    let requests: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Request {
                seq,
                method,
                path,
                session,
                last_event_id,
                protocol_version,
                has_authorization,
                body,
                ..
            } => Some((
                *seq,
                method.as_str(),
                path.as_str(),
                session.clone(),
                last_event_id.clone(),
                protocol_version.clone(),
                *has_authorization,
                body.is_some(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        requests,
        vec![
            (0, "POST", "/mcp", Some("s1".into()), None, None, true, true),
            (
                1,
                "GET",
                "/mcp",
                None,
                Some("e1".into()),
                Some("2025-11-25".into()),
                false,
                false
            ),
            (2, "HEAD", "/h", None, None, None, false, false),
            (3, "DELETE", "/mcp", None, None, None, false, false),
            (4, "GET", "/c", None, None, None, false, false),
        ]
    );
    let responses: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Response { seq, status, .. } => Some((*seq, *status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        responses,
        vec![(0, 100), (0, 200), (1, 200), (2, 200), (3, 204), (4, 304)]
    );
    let events: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent {
                seq,
                index,
                id,
                last_event_id,
                data,
                ..
            } => Some((
                *seq,
                *index,
                id.clone(),
                last_event_id.clone(),
                data.as_ref()
                    .map(|d| String::from_utf8_lossy(d).into_owned()),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        events,
        vec![
            (
                0,
                0,
                Some("e1".into()),
                Some("e1".into()),
                Some(r#"{"jsonrpc":"2.0","method":"n"}"#.into())
            ),
            (
                0,
                1,
                Some("e2".into()),
                Some("e2".into()),
                Some(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#.into())
            ),
            (1, 0, None, None, Some("x".into())),
        ]
    );
    let ends: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::StreamEnd { seq, clean, .. } => Some((*seq, *clean)),
            Observation::ResponseBody { seq, body, .. } => {
                Some((*seq + 100, body.as_ref().is_some_and(|b| b.is_empty())))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        vec![(0, true), (1, true), (102, true), (103, true), (104, true)]
    );
    // After the final response of call id 7, every SSE cut point of that stream is after-final.
    let down = down_responses();
    let end_of_first = down
        .find("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length")
        .map(|i| i as u64);
    let result_at = down
        .find("\"result\":{}}\n\n")
        .map(|i| i as u64 + 14)
        .expect("final event");
    let after: Vec<SseClass> = classes
        .range(result_at + 1..end_of_first.expect("second response"))
        .map(|(_, c)| c.0)
        .collect();
    assert!(!after.is_empty());
    assert!(
        after
            .iter()
            .all(|c| matches!(c, SseClass::AfterFinal | SseClass::ChunkFraming)),
        "{after:?}"
    );
}

#[test]
fn chunk_framing_and_payload_cut_points_are_classified() {
    let down = format!("{SSE_HEAD}{}", chunked(&["data: ab\n\n"]));
    let (_, classes) = observe_all_chunkings(b"GET / HTTP/1.1\r\n\r\n", down.as_bytes());
    let h = SSE_HEAD.len() as u64;
    assert_eq!(
        classes.get(&h).map(|c| c.0),
        Some(SseClass::Boundary),
        "right after the head"
    );
    // "a;n=0\r\n" is framing
    for k in 1..=7 {
        assert_eq!(
            classes.get(&(h + k)).map(|c| c.0),
            Some(SseClass::ChunkFraming),
            "{k}"
        );
    }
    let p = h + 7;
    let want = [
        SseClass::FieldName,
        SseClass::FieldName,
        SseClass::FieldName,
        SseClass::FieldName,
        SseClass::AfterColon,
        SseClass::AfterColon,
        SseClass::MidValue,
        SseClass::BeforeEol,
        SseClass::BeforeDispatch,
        SseClass::Boundary,
    ];
    for (i, w) in want.iter().enumerate() {
        let c = classes.get(&(p + 1 + i as u64)).copied();
        assert_eq!(c.map(|c| c.0), Some(*w), "payload byte {i}");
        assert_eq!(c.map(|c| c.2), Some(i as u64 + 1), "payload offset {i}");
    }
    assert_eq!(
        classes.get(&(p + 11)).map(|c| c.0),
        Some(SseClass::ChunkFraming)
    );
    assert_eq!(classes.keys().next_back().copied(), Some(down.len() as u64));
    assert_eq!(
        classes.len() as u64,
        down.len() as u64 - h + 1,
        "every body cut point"
    );
}

#[test]
fn value_split_across_http_chunks_is_mid_value_before_framing() {
    let down = format!("{SSE_HEAD}{}", chunked(&["data: ab", "\n\n"]));
    let (obs, classes) = observe_all_chunkings(b"GET / HTTP/1.1\r\n\r\n", down.as_bytes());
    let after_b = (SSE_HEAD.len() + 7 + 8) as u64;
    assert_eq!(classes.get(&after_b).map(|c| c.0), Some(SseClass::MidValue));
    assert!(
        obs.iter()
            .any(|o| matches!(o, Observation::SseEvent { data: Some(d), .. } if &d[..] == b"ab"))
    );
}

#[test]
fn close_delimited_sse_body_ends_clean_at_eof() {
    let down = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\r\ndata: 1\n\ndata: 2\n\ndata: torn";
    let (obs, classes) = observe_all_chunkings(b"GET /s HTTP/1.1\r\n\r\n", down.as_bytes());
    let datas: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::SseEvent { data: Some(d), .. } => Some(d.to_vec()),
            _ => None,
        })
        .collect();
    assert_eq!(datas, vec![b"1".to_vec(), b"2".to_vec()]);
    assert!(matches!(
        obs.last(),
        Some(Observation::StreamEnd { clean: true, .. })
    ));
    // Every body cut point but the last: its class would need a byte after the torn value.
    let head = down.find("\r\n\r\n").map_or(0, |i| i + 4) as u64;
    assert_eq!(classes.len() as u64, down.len() as u64 - head);
}

#[test]
fn truncated_chunked_body_ends_unclean_at_eof() {
    let down = format!("{SSE_HEAD}8\r\ndata: 1\n");
    let (obs, _) = observe_all_chunkings(b"GET / HTTP/1.1\r\n\r\n", down.as_bytes());
    assert!(matches!(
        obs.last(),
        Some(Observation::StreamEnd { clean: false, .. })
    ));
}

#[test]
fn non_http_tls_and_http2_traffic_is_opaque() {
    let tls: &[u8] = &[
        0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03, b'\r', b'\n', b'\r',
        b'\n',
    ];
    let h2 = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00";
    let junk = b"hello there, this is not http\r\n\r\ndata: x\n\n";
    for input in [tls, &h2[..], &junk[..]] {
        let (obs, classes) = observe_all_chunkings(input, input);
        assert!(obs.is_empty(), "{obs:?}");
        assert!(classes.is_empty());
    }
}

#[test]
fn connect_and_upgrade_make_the_connection_opaque_after_the_head() {
    let up = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\x16\x03\x01";
    let down = b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n";
    let (obs, classes) = observe_all_chunkings(up, down);
    assert_eq!(obs.len(), 2, "{obs:?}");
    assert!(classes.is_empty());
    let up = b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\x81\x05hello";
    let down = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x05HTTP/1.1 200 OK\r\n\r\n";
    let (obs, _) = observe_all_chunkings(up, down);
    assert_eq!(obs.len(), 2, "{obs:?}");
}

/// Collects what the observers log.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn an_h2c_upgrade_is_relayed_untouched_and_said_once_in_the_log() {
    let logs = Logs::default();
    let sub = tracing_subscriber::fmt()
        .with_writer({
            let l = logs.clone();
            move || l.clone()
        })
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(sub);
    let up = b"GET / HTTP/1.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let down = b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00HTTP/1.1 101 Switching Protocols\r\n\r\n";
    let ones_up: Vec<usize> = (1..up.len()).collect();
    let ones_down: Vec<usize> = (1..down.len()).collect();
    let (obs, _) = converse(up, down, &ones_up, &ones_down);
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert_eq!(
        text.matches("left HTTP/1.1 (101 Switching Protocols")
            .count(),
        1,
        "one line, however the bytes that follow are read: {text}"
    );
    assert!(text.contains("relayed untouched"), "{text}");
    // The request and its 101 are the only observations: nothing after the switch is read as
    // HTTP/1.1 (the second "101" above is h2 payload to the observer, so it is ignored).
    assert_eq!(obs.len(), 2, "{obs:?}");
}

#[test]
fn pipelined_requests_pair_with_responses_in_order() {
    let up = b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
    let down = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 404 Not Found\r\nContent-Length: 1\r\n\r\nb";
    let (obs, _) = observe_all_chunkings(up, down);
    let pairs: Vec<_> = obs
        .iter()
        .filter_map(|o| match o {
            Observation::Response { seq, status, .. } => Some((*seq, *status)),
            Observation::ResponseBody {
                seq, body: Some(b), ..
            } => Some((*seq, u16::from(b[0]))),
            _ => None,
        })
        .collect();
    assert_eq!(
        pairs,
        vec![
            (0, 200),
            (0, u16::from(b'a')),
            (1, 404),
            (1, u16::from(b'b'))
        ]
    );
}

fn events_of(obs: &[Observation]) -> Vec<u64> {
    obs.iter()
        .filter_map(|o| match o {
            Observation::SseEvent { index, .. } => Some(*index),
            _ => None,
        })
        .collect()
}

#[test]
fn only_events_whose_dispatching_byte_was_delivered_are_recorded() {
    let body = "data: a\n\ndata: b\n\n";
    let down = format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{body}");
    let h = down.len() - body.len();
    for (delivered, want) in [
        (h + 8, vec![]),
        (h + 9, vec![0]),
        (h + 17, vec![0]),
        (h + 18, vec![0, 1]),
    ] {
        let rec = Arc::new(Recorder::default());
        let (mut u, mut d) = observer_pair(3, rec.clone());
        u.observe(b"GET / HTTP/1.1\r\n\r\n");
        d.observe(down.as_bytes());
        let point = d.cut_point(delivered);
        assert_eq!(point.raw_offset, delivered as u64);
        assert_eq!(point.request.as_deref(), Some("GET /"));
        let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(events_of(&obs), want, "delivered {delivered}");
        assert!(matches!(
            obs.last(),
            Some(Observation::StreamEnd { clean: false, .. })
        ));
    }
}

#[test]
fn cut_point_describes_a_torn_event() {
    let body = "id: 1\ndata: a\n\nid: 2\ndata: {\"x\"\ndata: 1}\n\n";
    let down = format!(
        "HTTP/1.1 200 OK\r\nMcp-Session-Id: s9\r\nContent-Type: text/event-stream\r\n\r\n{body}"
    );
    let h = down.len() - body.len();
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(3, rec.clone());
    u.observe(b"GET /mcp HTTP/1.1\r\n\r\n");
    d.observe(down.as_bytes());
    let at = body.find("1}").unwrap_or(0) + 1;
    let p = d.cut_point(h + at);
    assert_eq!(p.class, Some(SseClass::MidValue));
    assert_eq!(p.payload_offset, Some(at as u64));
    assert_eq!(p.event_index, Some(1));
    assert_eq!(p.pending_id.as_deref(), Some("2"));
    assert_eq!(p.last_committed_id.as_deref(), Some("1"));
    assert_eq!(p.torn_bytes, (at - body.find("id: 2").unwrap_or(0)) as u64);
    assert_eq!(p.data_line, Some(2));
    assert_eq!(p.session.as_deref(), Some("s9"));
}

#[test]
fn clean_end_terminates_chunked_bodies_and_pads_inside_chunk_data() {
    let down = format!("{SSE_HEAD}{}", chunked(&["data: ab\n\n", "data: c\n\n"]));
    let h = SSE_HEAD.len();
    let first = "a;n=0\r\ndata: ab\n\n\r\n".len();
    let clean = |delivered: usize| {
        let rec = Arc::new(Recorder::default());
        let (mut u, mut d) = observer_pair(3, rec);
        u.observe(b"GET / HTTP/1.1\r\n\r\n");
        d.observe(down.as_bytes());
        d.clean_end(delivered).to_vec()
    };
    assert_eq!(clean(h), b"0\r\n\r\n");
    assert_eq!(clean(h + first), b"0\r\n\r\n");
    assert_eq!(clean(h + first - 2), b"\r\n0\r\n\r\n");
    assert_eq!(clean(h + first - 1), b"\n0\r\n\r\n");
    assert_eq!(clean(h + 7 + 7), b"   \r\n0\r\n\r\n");
    assert_eq!(clean(h + 3), b"", "inside a size line");
    let cl = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 9\r\n\r\ndata: a\n\n";
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(3, rec);
    u.observe(b"GET / HTTP/1.1\r\n\r\n");
    d.observe(cl.as_bytes());
    assert!(d.clean_end(cl.len() - 3).is_empty());
}

fn arb_event() -> impl Strategy<Value = String> {
    (
        prop::option::of("[a-z0-9]{1,6}"),
        prop::collection::vec("[ -~]{0,12}", 1..4),
        prop::bool::ANY,
    )
        .prop_map(|(id, lines, crlf)| {
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut s = String::new();
            if let Some(id) = id {
                s.push_str(&format!("id: {id}{eol}"));
            }
            for l in lines {
                s.push_str(&format!("data: {l}{eol}"));
            }
            s.push_str(eol);
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn chunking_never_changes_observations_or_classes(
        events in prop::collection::vec(arb_event(), 1..5),
        split in 1usize..40,
        up_cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        down_cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let stream = events.concat();
        let parts: Vec<&str> = stream.as_bytes().chunks(split).map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
        let down = format!("{SSE_HEAD}{}HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{stream}", chunked(&parts));
        let up = up_requests();
        let pick = |cuts: &[prop::sample::Index], len: usize| {
            let mut v: Vec<usize> = cuts.iter().map(|i| i.index(len + 1)).collect();
            v.sort_unstable();
            v
        };
        let whole = converse(up.as_bytes(), down.as_bytes(), &[], &[]);
        let cut = converse(up.as_bytes(), down.as_bytes(), &pick(&up_cuts, up.len()), &pick(&down_cuts, down.len()));
        prop_assert_eq!(cut, whole);
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..300), cut in any::<prop::sample::Index>()) {
        let mut down = SSE_HEAD.as_bytes().to_vec();
        down.extend_from_slice(&bytes);
        let k = cut.index(down.len() + 1);
        let _ = converse(b"GET / HTTP/1.1\r\n\r\n", &down, &[], &[k]);
        let _ = converse(&bytes, &bytes, &[], &[]);
    }
}

#[test]
fn a_resume_response_classifies_cut_points_inside_events_as_during_replay() {
    let body = chunked(&["id: 5\ndata: {\"a\":1}\n\n", "id: 6\r\ndata: x\r\n\r\n"]);
    let down = format!("{SSE_HEAD}{body}");
    let observed = |req: &str| {
        let rec = Arc::new(Recorder::default());
        let (mut u, mut d) = observer_pair(1, rec);
        u.observe(req.as_bytes());
        let classes = feed(d.as_mut(), down.as_bytes(), &[]);
        (classes, d)
    };
    let (resume, mut rd) = observed("GET /mcp HTTP/1.1\r\nHost: x\r\nLast-Event-ID: 4\r\n\r\n");
    let (fresh, mut fd) = observed("GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        resume.keys().collect::<Vec<_>>(),
        fresh.keys().collect::<Vec<_>>()
    );
    for (k, (c, e, p)) in &fresh {
        let (rc, re, rp) = resume[k];
        assert_eq!((re, rp), (*e, *p), "cut point {k}");
        assert_eq!(rc, c.on_resume(), "cut point {k}: fresh {c}");
        // The clean end depends on where the cut is, not on its name.
        assert_eq!(
            rd.clean_end(*k as usize).to_vec(),
            fd.clean_end(*k as usize).to_vec(),
            "clean end at cut point {k} ({c})"
        );
    }
    let count = |m: &Classes, c: SseClass| m.values().filter(|v| v.0 == c).count();
    assert!(count(&resume, SseClass::DuringReplay) > 10);
    assert_eq!(
        count(&resume, SseClass::Boundary),
        count(&fresh, SseClass::Boundary)
    );
    assert_eq!(count(&fresh, SseClass::DuringReplay), 0);
    assert_eq!(count(&resume, SseClass::MidValue), 0);
}

#[test]
fn cut_point_in_a_json_body_says_how_much_of_the_body_went_out() {
    let body = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let down = format!("{head}{body}");
    let h = head.len();
    for (delivered, want) in [(h - 3, None), (h, Some(0)), (h + 12, Some(12))] {
        let rec = Arc::new(Recorder::default());
        let (mut u, mut d) = observer_pair(3, rec.clone());
        u.observe(b"POST /mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        d.observe(down.as_bytes());
        let point = d.cut_point(delivered);
        assert_eq!(point.class, None, "not an SSE body");
        assert_eq!(point.body_bytes, want, "delivered {delivered}");
    }
    // An SSE body reports its own positions instead.
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(3, rec.clone());
    u.observe(b"GET / HTTP/1.1\r\n\r\n");
    let sse = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: a\n\n";
    d.observe(sse.as_bytes());
    assert_eq!(d.cut_point(sse.len() - 3).body_bytes, None);
}

/// The cut that delivers the first `k` bytes of `down`, read in pieces of `read` bytes (the
/// piece holding byte `k` observed, not delivered: the cut falls in the last observed chunk).
fn cut_after(up: &[u8], down: &[u8], read: usize, k: usize) -> tearline::wire::CutPoint {
    let (mut u, mut d) = observer_pair(1, Arc::new(Recorder::default()));
    u.observe(up);
    u.delivered_through(up.len() as u64);
    let mut at = 0;
    loop {
        let end = (at + read).min(down.len());
        d.observe(&down[at..end]);
        if end >= k || end == down.len() {
            return d.cut_point(k - at);
        }
        d.delivered_through(end as u64);
        at = end;
    }
}

/// What a cut says of the exchange its bytes belong to.
type Owned = (
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u64>,
    Option<u64>,
);

fn owner_facts(p: &tearline::wire::CutPoint) -> Owned {
    (
        p.request.clone(),
        p.session.clone(),
        p.rpc_id.clone(),
        p.body_bytes,
        p.exchange,
    )
}

#[test]
fn a_cut_names_its_exchange_alike_whatever_the_reads_before_it() {
    // A stream's later reads keep the view's owner from the read before (no clone per read):
    // which request, session and body a cut names must not depend on that, nor on whether
    // the read that holds the cut also held the end of the exchange before it. (The class of
    // the last observed byte's cut point may wait for the next byte, so classes are compared
    // by the every-chunking tests above, not here.)
    let (up, down) = (up_requests(), down_responses());
    let (up, down) = (up.as_bytes(), down.as_bytes());
    for k in 1..=down.len() {
        let whole = owner_facts(&cut_after(up, down, down.len(), k));
        for read in [1, 5, 16, 61] {
            assert_eq!(
                owner_facts(&cut_after(up, down, read, k)),
                whole,
                "cut after {k} bytes, reads of {read}"
            );
        }
    }
    // It names the requests it should: the SSE answer's bytes are the POST's, a cut at its
    // end and the next response's head nobody's, the bytes of that response's body the GET's.
    let text = down_responses();
    let sse_end = text
        .find("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length")
        .expect("second response");
    let get_body = text.find("data: x").expect("GET's body");
    for (k, want) in [
        (120, Some("POST /mcp")),
        (sse_end - 1, Some("POST /mcp")),
        (sse_end, None),
        (sse_end + 1, None),
        (get_body - 1, None),
        (get_body + 2, Some("GET /mcp")),
    ] {
        for read in [7, down.len()] {
            let p = cut_after(up, down, read, k);
            assert_eq!(p.request.as_deref(), want, "cut after {k}, reads of {read}");
            assert_eq!(
                p.exchange.is_some(),
                want.is_some(),
                "cut after {k}: exchange"
            );
        }
    }
}

/// A key in the query string (`?key=…`, Gemini's and Azure's style) never reaches a cut record:
/// the record names the parameters, not their values; the request observation keeps the whole
/// target for the audit's matching only (it is never written).
#[test]
fn a_cut_record_names_query_parameters_but_never_their_values() {
    let secret = "AIzaPLANTEDsecret0123456789";
    let up = format!("GET /events?alt=sse&key={secret} HTTP/1.1\r\nHost: x\r\n\r\n");
    let down = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: a\n\ndata: b";
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(3, rec.clone());
    u.observe(up.as_bytes());
    d.observe(down.as_bytes());
    let point = d.cut_point(down.len() - 1);
    assert_eq!(point.request.as_deref(), Some("GET /events?alt=…&key=…"));
    let record = serde_json::to_string(&point).expect("serializes");
    assert!(!record.contains(secret), "{record}");
    // Without a query the target is written as it is.
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(4, rec);
    u.observe(b"GET /events HTTP/1.1\r\n\r\n");
    d.observe(down.as_bytes());
    assert_eq!(
        d.cut_point(down.len() - 1).request.as_deref(),
        Some("GET /events")
    );
}
