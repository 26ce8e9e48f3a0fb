//! The HTTP/1.1 observer on LLM streams: recognised by request path and SSE content type only;
//! per dispatched event it reports what the event contributed (`Observation::LlmEvent`), only
//! once the event reached the client; cut points carry their LLM position; every result is the
//! same under every chunking (every single split, 1-byte pieces, random pieces).

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use tearline::lab::llm::answer::Answer;
use tearline::lab::llm::frame::{Frame, Part};
use tearline::lab::llm::knobs::Knobs;
use tearline::lab::llm::request::LlmRequest;
use tearline::vocab::LlmApi;
use tearline::wire::http1::observer_pair;
use tearline::wire::llm_args::ArgsStatus;
use tearline::wire::{LlmPos, Observation, ObservationSink, WireObserver};

#[derive(Default)]
struct Recorder(Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

const WEATHER: &str = r#"{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}"#;

/// The request body an SDK sends for `api` (with a tool when `tool`).
fn request_body(api: LlmApi, tool: bool) -> String {
    let tools = match (api, tool) {
        (_, false) => String::new(),
        (LlmApi::ChatCompletions, true) => format!(
            r#","tools":[{{"type":"function","function":{{"name":"get_weather","parameters":{WEATHER}}}}}]"#
        ),
        (LlmApi::Responses, true) => {
            format!(
                r#","tools":[{{"type":"function","name":"get_weather","parameters":{WEATHER}}}]"#
            )
        }
        (LlmApi::Messages, true) => {
            format!(r#","tools":[{{"name":"get_weather","input_schema":{WEATHER}}}]"#)
        }
    };
    format!(
        r#"{{"model":"m","stream":true,"max_tokens":100,"stream_options":{{"include_usage":true}},"messages":[{{"role":"user","content":"hi"}}]{tools}}}"#
    )
}

/// The lab's frames for a request, and the request and response bytes on the wire.
fn conversation(api: LlmApi, tool: bool, path: &str) -> (Vec<Frame>, Vec<u8>, Vec<u8>) {
    let (frames, up, down, _) = conversation_ends(api, tool, path);
    (frames, up, down)
}

/// [`conversation`], and the raw offset just after each frame's bytes in the response.
fn conversation_ends(
    api: LlmApi,
    tool: bool,
    path: &str,
) -> (Vec<Frame>, Vec<u8>, Vec<u8>, Vec<usize>) {
    let body = request_body(api, tool);
    let req = LlmRequest::parse(api, body.as_bytes()).expect("request");
    let knobs = Knobs {
        tokens: 2,
        args_chunk: 9,
        ..Knobs::default()
    };
    let a = Answer::plan(&req, &knobs, 1).expect("answer");
    let frames = tearline::lab::llm::frames(&req, &a, &knobs, b"\n");
    let up = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-planted\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes();
    let mut down = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut ends = Vec::new();
    for f in &frames {
        down.extend_from_slice(format!("{:x}\r\n", f.bytes.len()).as_bytes());
        down.extend_from_slice(&f.bytes);
        ends.push(down.len());
        down.extend_from_slice(b"\r\n");
    }
    down.extend_from_slice(b"0\r\n\r\n");
    (frames, up, down, ends)
}

/// Raw cut points `start..end` with one LLM position, merged (only cut points that have one).
type Marks = Vec<(u64, u64, LlmPos)>;

fn feed(obs: &mut dyn WireObserver, input: &[u8], cuts: &[usize]) -> Marks {
    let mut marks = Marks::new();
    let mut prev = 0;
    let mut bounds: Vec<usize> = cuts.iter().copied().filter(|&c| c <= input.len()).collect();
    bounds.sort_unstable();
    bounds.push(input.len());
    for b in bounds {
        if let Some(p) = obs.observe(&input[prev..b]) {
            for r in &p.runs {
                if let Some(m) = r.llm {
                    let (a, b) = ((prev + r.start) as u64, (prev + r.end) as u64);
                    match marks.last_mut() {
                        Some(last) if last.1 == a && last.2 == m => last.1 = b,
                        // A cut point at a chunk's start may be reported by the chunk before.
                        Some(last) if last.1 > a => panic!("cut point {a} classified twice"),
                        _ => marks.push((a, b, m)),
                    }
                }
            }
        }
        prev = b;
        obs.delivered_through(prev as u64);
    }
    obs.eof();
    marks
}

fn converse(up: &[u8], down: &[u8], down_cuts: &[usize]) -> (Vec<Observation>, Marks) {
    let rec = Arc::new(Recorder::default());
    let (mut u, mut d) = observer_pair(1, rec.clone());
    feed(&mut *u, up, &[]);
    let marks = feed(&mut *d, down, down_cuts);
    let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
    (obs, marks)
}

fn llm_events(obs: &[Observation]) -> Vec<tearline::wire::LlmEventSeen> {
    obs.iter()
        .filter_map(|o| match o {
            Observation::LlmEvent(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// Whole, every single split and 1-byte pieces of the response agree.
fn same_under_every_split(api: LlmApi) {
    for tool in [false, true] {
        let (_, up, down) = conversation(api, tool, api.endpoint());
        let whole = converse(&up, &down, &[]);
        assert!(!llm_events(&whole.0).is_empty(), "{api}");
        assert!(!whole.1.is_empty(), "{api}");
        for k in 0..=down.len() {
            assert_eq!(
                converse(&up, &down, &[k]),
                whole,
                "{api} tool={tool} split {k}"
            );
        }
        let ones: Vec<usize> = (1..down.len()).collect();
        assert_eq!(converse(&up, &down, &ones), whole, "{api} 1-byte pieces");
    }
}

#[test]
fn chat_completions_observations_and_positions_are_the_same_under_every_split() {
    same_under_every_split(LlmApi::ChatCompletions);
}

#[test]
fn responses_observations_and_positions_are_the_same_under_every_split() {
    same_under_every_split(LlmApi::Responses);
}

#[test]
fn messages_observations_and_positions_are_the_same_under_every_split() {
    same_under_every_split(LlmApi::Messages);
}

#[test]
fn llm_events_say_what_each_part_of_the_answer_contributed() {
    for api in LlmApi::ALL {
        let (frames, up, down) = conversation(api, true, api.endpoint());
        let (obs, _) = converse(&up, &down, &[]);
        let events = llm_events(&obs);
        assert!(events.iter().all(|e| e.api == api && e.conn == 1));
        let start = events.iter().find_map(|e| e.facts.tool_start.clone());
        assert_eq!(start.and_then(|s| s.name).as_deref(), Some("get_weather"));
        let args: Vec<_> = events.iter().filter_map(|e| e.facts.args).collect();
        assert_eq!(
            args.len(),
            frames.iter().filter(|f| f.part == Part::ToolArgs).count()
        );
        assert_eq!(args.last().map(|a| a.status), Some(ArgsStatus::Complete));
        assert!(events.iter().any(|e| e.facts.completion.is_some()));
        assert!(events.iter().any(|e| e.facts.terminal));
        // Each LLM event follows the SSE event it describes.
        for e in &events {
            let i = obs
                .iter()
                .position(|o| matches!(o, Observation::LlmEvent(x) if x == e))
                .expect("present");
            assert!(
                matches!(&obs[i - 1], Observation::SseEvent { index, raw_end, .. } if *index == e.index && *raw_end == e.raw_end),
                "{api}: {:?}",
                obs[i - 1]
            );
        }
    }
}

#[test]
fn only_llm_request_paths_are_read_as_llm_streams() {
    for api in LlmApi::ALL {
        // The same bytes answering another path: an SSE stream like any other.
        let (_, up, down) = conversation(api, true, "/mcp");
        let (obs, marks) = converse(&up, &down, &[]);
        assert!(llm_events(&obs).is_empty(), "{api}");
        assert!(marks.is_empty(), "{api}");
        assert!(
            obs.iter()
                .any(|o| matches!(o, Observation::SseEvent { .. }))
        );
        // A prefix before the endpoint is still the API.
        let (_, up, down) = conversation(api, false, &format!("/openai{}?x=1", api.endpoint()));
        assert!(
            !llm_events(&converse(&up, &down, &[]).0).is_empty(),
            "{api}"
        );
    }
}

/// The data of each SSE event in `obs`, in order.
fn event_data(obs: &[Observation]) -> Vec<Option<bytes::Bytes>> {
    obs.iter()
        .filter_map(|o| match o {
            Observation::SseEvent { data, .. } => Some(data.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_llm_streams_events_carry_no_data_copy_while_the_same_bytes_elsewhere_do() {
    for api in LlmApi::ALL {
        let (_, up, down) = conversation(api, true, api.endpoint());
        let llm = event_data(&converse(&up, &down, &[]).0);
        assert!(!llm.is_empty(), "{api}");
        assert!(llm.iter().all(Option::is_none), "{api}: {llm:?}");
        // Answering `/mcp`, the same events keep their (short) data for the JSON-RPC rules.
        let (_, up, down) = conversation(api, true, "/mcp");
        let plain = event_data(&converse(&up, &down, &[]).0);
        assert_eq!(plain.len(), llm.len(), "{api}");
        assert!(
            plain
                .iter()
                .all(|d| d.as_ref().is_some_and(|d| !d.is_empty())),
            "{api}: {plain:?}"
        );
    }
}

#[test]
fn events_the_client_did_not_receive_are_not_reported() {
    for api in LlmApi::ALL {
        let (frames, up, down, ends) = conversation_ends(api, false, api.endpoint());
        let rec = Arc::new(Recorder::default());
        let (mut u, mut d) = observer_pair(1, rec.clone());
        u.observe(&up);
        u.delivered_through(up.len() as u64);
        d.observe(&down);
        // Deliver only through the end of the second delta's event, then cut: the whole
        // response was observed, only that much reached the client.
        let second_delta = frames
            .iter()
            .enumerate()
            .filter(|(_, f)| f.part == Part::Delta)
            .nth(1)
            .map(|(i, _)| i)
            .expect("two deltas");
        let through = ends[second_delta];
        d.delivered_through(through as u64);
        let _ = d.cut_at(through as u64);
        let obs = rec.0.lock().map(|v| v.clone()).unwrap_or_default();
        let events = llm_events(&obs);
        assert_eq!(events.iter().filter(|e| e.facts.text).count(), 2, "{api}");
        assert!(events.iter().all(|e| e.facts.completion.is_none()), "{api}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_pieces_agree_with_the_whole(
        api in prop_oneof![
            Just(LlmApi::ChatCompletions),
            Just(LlmApi::Responses),
            Just(LlmApi::Messages)
        ],
        tool in any::<bool>(),
        cuts in proptest::collection::vec(0usize..6000, 0..40),
    ) {
        let (_, up, down) = conversation(api, tool, api.endpoint());
        let whole = converse(&up, &down, &[]);
        prop_assert_eq!(converse(&up, &down, &cuts), whole);
    }
}
