//! The LLM reader against the lab's own bytes: every API's text and tool-call answers give
//! the facts the lab wrote, under every split, and the cut points of each part of the stream
//! get the position the module doc defines.

use super::*;
use crate::lab::llm::answer::Answer;
use crate::lab::llm::frame::{Frame, Part};
use crate::lab::llm::knobs::Knobs;
use crate::lab::llm::request::LlmRequest;
use crate::wire::sse::SseScanner;
use crate::wire::sse_class::Classified;

const TOOLS: &str = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}}}}}]"#;

/// The lab's frames for `api`, a text answer of `tokens` tokens or (with `tool`) a tool call.
fn frames(api: LlmApi, tokens: u32, tool: bool, eol: &'static [u8]) -> Vec<Frame> {
    let tools = match (api, tool) {
        (_, false) => String::new(),
        (LlmApi::ChatCompletions, true) => format!(r#","tools":{TOOLS}"#),
        (LlmApi::Responses, true) => r#","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}}}}]"#.to_owned(),
        (LlmApi::Messages, true) => r#","tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}}}}]"#.to_owned(),
    };
    let body = format!(
        r#"{{"model":"m","stream":true,"stream_options":{{"include_usage":true}}{tools}}}"#
    );
    let req = LlmRequest::parse(api, body.as_bytes()).expect("request");
    let knobs = Knobs {
        tokens,
        args_chunk: 5,
        ..Knobs::default()
    };
    let a = Answer::plan(&req, &knobs, 1).expect("answer");
    crate::lab::llm::frames(&req, &a, &knobs, eol)
}

/// Feeds `parts` in order; returns every dispatched event's facts and the LLM position of
/// every payload cut point `0..=n`.
fn read(api: LlmApi, parts: &[&[u8]]) -> (Vec<LlmEventFacts>, Vec<Option<LlmPos>>) {
    read_with(api, parts, false)
}

/// [`read`], with the JSON reader reporting every path when `every_path`.
fn read_with(
    api: LlmApi,
    parts: &[&[u8]],
    every_path: bool,
) -> (Vec<LlmEventFacts>, Vec<Option<LlmPos>>) {
    let mut sc = SseScanner::bounded(4096, 1 << 20);
    if every_path {
        sc.set_llm_reading_every_path(api);
    } else {
        sc.set_llm(api);
    }
    let mut facts = Vec::new();
    let mut out = Classified::default();
    for p in parts {
        sc.feed_classified(
            p,
            &mut |e, _| {
                facts.push(e.llm.cloned().unwrap_or_default());
                false
            },
            &mut out,
        );
    }
    sc.flush_pending(&mut out);
    let n = out.runs.last().map_or(0, |r| r.end);
    let mut marks = vec![None; n as usize];
    for r in &out.runs {
        for p in r.start..r.end {
            marks[p as usize] = r.llm;
        }
    }
    (facts, marks)
}

fn concat(frames: &[Frame]) -> Vec<u8> {
    frames
        .iter()
        .flat_map(|f| f.bytes.iter().copied())
        .collect()
}

/// Payload offsets where each frame starts, and the total.
fn starts(frames: &[Frame]) -> (Vec<usize>, usize) {
    let mut at = 0;
    let mut v = Vec::new();
    for f in frames {
        v.push(at);
        at += f.bytes.len();
    }
    (v, at)
}

#[test]
fn text_answers_give_one_delta_per_token_then_completion_and_terminal() {
    for api in LlmApi::ALL {
        let fs = frames(api, 7, false, b"\n");
        let (facts, _) = read(api, &[&concat(&fs)]);
        assert_eq!(facts.len(), fs.len(), "{api}");
        for (f, frame) in facts.iter().zip(&fs) {
            assert_eq!(f.text, frame.part == Part::Delta, "{api}: {frame:?} {f:?}");
            assert_eq!(
                f.completion.is_some(),
                frame.part == Part::Completion,
                "{api}: {f:?}"
            );
            let terminal = frame.part == Part::Terminal
                || (api == LlmApi::Responses && frame.part == Part::Completion);
            assert_eq!(f.terminal, terminal, "{api}: {f:?}");
            assert_eq!(f.usage, frame.part == Part::Usage, "{api}: {f:?}");
            assert!(f.tool_start.is_none() && f.args.is_none());
        }
        let reason = facts.iter().find_map(|f| f.completion.clone());
        let want = match api {
            LlmApi::ChatCompletions => "stop",
            LlmApi::Responses => "completed",
            LlmApi::Messages => "end_turn",
        };
        assert_eq!(reason.as_deref(), Some(want));
    }
}

#[test]
fn tool_calls_give_the_start_and_argument_pieces_that_end_complete() {
    for api in LlmApi::ALL {
        let fs = frames(api, 7, true, b"\n");
        let (facts, _) = read(api, &[&concat(&fs)]);
        let start = facts.iter().find_map(|f| f.tool_start.clone());
        assert_eq!(
            start.and_then(|s| s.name).as_deref(),
            Some("get_weather"),
            "{api}"
        );
        let pieces: Vec<ArgsProgress> = facts.iter().filter_map(|f| f.args).collect();
        let arg_frames = fs.iter().filter(|f| f.part == Part::ToolArgs).count();
        assert_eq!(pieces.len(), arg_frames, "{api}");
        let args = r#"{"city":"lab-city","unit":"c"}"#;
        let last = pieces.last().expect("pieces");
        assert_eq!(
            (last.bytes, last.status),
            (args.len() as u64, ArgsStatus::Complete)
        );
        assert!(
            pieces[..pieces.len() - 1]
                .iter()
                .all(|p| p.status == ArgsStatus::Partial),
            "{api}: {pieces:?}"
        );
        assert!(facts.iter().any(|f| f.completion.is_some()));
        assert!(!facts.iter().any(|f| f.text));
    }
}

#[test]
fn every_split_gives_the_same_facts_and_positions() {
    for api in LlmApi::ALL {
        for tool in [false, true] {
            for eol in [&b"\n"[..], b"\r\n"] {
                let eol: &'static [u8] = if eol == b"\n" { b"\n" } else { b"\r\n" };
                let bytes = concat(&frames(api, 3, tool, eol));
                let whole = read(api, &[&bytes]);
                for k in 0..=bytes.len() {
                    assert_eq!(
                        read(api, &[&bytes[..k], &bytes[k..]]),
                        whole,
                        "{api} tool={tool} split at {k}"
                    );
                }
                let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
                assert_eq!(
                    read(api, &bytewise),
                    whole,
                    "{api} tool={tool} byte by byte"
                );
            }
        }
    }
}

/// The JSON reader reports only the paths `read` acts on: over the lab's answers and over
/// events that put the same keys at other places, other types and other depths, the facts and
/// every cut point's position are those of a reader that sees every path, under every split.
#[test]
fn the_path_filter_changes_no_fact() {
    let odd: &[u8] = br#"data: {"choices":[{"index":0,"delta":{"content":{"text":"x"},"tool_calls":[{"index":"1","function":{"name":{"a":1},"arguments":7}}]},"finish_reason":["stop"]}],"usage":null,"error":"e"}

data: {"delta":{"choices":[{"delta":{"content":"hidden"}}],"text":"t","partial_json":"{\"a\""},"type":"content_block_delta","index":3}

data: {"type":"response.output_item.added","output_index":"2","item":{"type":"function_call","name":"f","item":{"type":"x"}},"delta":"{\"k\":"}

data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_reason":null},"content_block":{"type":"tool_use","name":"g"}}

data: {"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"choices":[{"delta":{"content":"deep"}}]}}}}}}}},"choices":[{"delta":{"content":"\u00e9\"","tool_calls":[{"index":0,"function":{"arguments":"{\"q\":[1,"}},{"index":1,"function":{"name":"n2","arguments":""}}]}}]}

data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}],"usage":{"completion_tokens":3}}

data: [DONE]

"#;
    for api in LlmApi::ALL {
        let mut streams = vec![odd.to_vec()];
        for tool in [false, true] {
            streams.push(concat(&frames(api, 3, tool, b"\n")));
        }
        for bytes in &streams {
            let filtered = read(api, &[bytes]);
            assert_eq!(read_with(api, &[bytes], true), filtered, "{api}: whole");
            assert!(
                filtered.1.iter().any(Option::is_some),
                "{api}: the stream has LLM positions at all"
            );
            for k in 0..=bytes.len() {
                assert_eq!(
                    read_with(api, &[&bytes[..k], &bytes[k..]], true),
                    filtered,
                    "{api}: split at {k}"
                );
            }
        }
    }
}

/// Positions at frame boundaries and inside frames, as the module doc defines them.
#[test]
fn positions_follow_the_parts_of_the_answer() {
    for api in LlmApi::ALL {
        for tool in [false, true] {
            let fs = frames(api, 4, tool, b"\n");
            let (_, marks) = read(api, &[&concat(&fs)]);
            let (st, end) = starts(&fs);
            let label = format!("{api} tool={tool}");
            // Payload 0: nothing yet.
            assert_eq!(marks[0], None, "{label}");
            let first_delta = fs.iter().position(|f| f.part.is_delta()).expect("a delta");
            for (i, f) in fs.iter().enumerate() {
                let (a, b) = (st[i], st.get(i + 1).copied().unwrap_or(end));
                let inside: Vec<Option<LlmPos>> = marks[a + 1..b].to_vec();
                let boundary_after = marks[b];
                match f.part {
                    Part::Preamble => {
                        // Before the first delta: after the first event, no token yet.
                        if i < first_delta && i > 0 {
                            assert_eq!(marks[a], Some(LlmPos::BeforeFirstDelta), "{label} {i}");
                        }
                        assert!(
                            inside
                                .iter()
                                .all(|m| m.is_none_or(|m| m == LlmPos::BeforeFirstDelta)),
                            "{label} {i}: {inside:?}"
                        );
                    }
                    Part::Delta => {
                        assert!(inside.contains(&Some(LlmPos::MidDelta)), "{label} {i}");
                        // Once recognised, to the dispatch.
                        let from = inside.iter().position(|m| *m == Some(LlmPos::MidDelta));
                        let from = from.expect("recognised");
                        assert!(
                            inside[from..inside.len() - 1]
                                .iter()
                                .all(|m| *m == Some(LlmPos::MidDelta)),
                            "{label} {i}: {inside:?}"
                        );
                        assert_eq!(boundary_after, None, "{label} {i}");
                    }
                    Part::ToolArgs => {
                        assert!(inside.contains(&Some(LlmPos::MidToolArgs)), "{label} {i}");
                        let last_piece = fs[i + 1..].iter().all(|g| g.part != Part::ToolArgs);
                        let want = if last_piece {
                            None
                        } else {
                            Some(LlmPos::MidToolArgs)
                        };
                        assert_eq!(boundary_after, want, "{label} {i}");
                        if i > first_delta {
                            // Between pieces the arguments are a proper prefix.
                            assert!(
                                inside.iter().all(|m| *m == Some(LlmPos::MidToolArgs)),
                                "{label} {i}: {inside:?}"
                            );
                        }
                    }
                    Part::Closing => {
                        assert!(
                            inside.iter().all(Option::is_none),
                            "{label} {i}: {inside:?}"
                        );
                    }
                    Part::Completion => {
                        assert!(inside.contains(&Some(LlmPos::BeforeCompletion)), "{label}");
                        assert!(
                            inside
                                .iter()
                                .all(|m| m.is_none_or(|m| m == LlmPos::BeforeCompletion)),
                            "{label} {i}: {inside:?}"
                        );
                        let want = (api != LlmApi::Responses).then_some(LlmPos::AfterCompletion);
                        assert_eq!(boundary_after, want, "{label} {i}");
                    }
                    Part::Usage => {
                        assert!(
                            inside.iter().all(|m| *m == Some(LlmPos::AfterCompletion)),
                            "{label} {i}"
                        );
                    }
                    Part::Terminal => {
                        assert!(
                            inside.iter().all(|m| *m == Some(LlmPos::AfterCompletion)),
                            "{label} {i}"
                        );
                        assert_eq!(boundary_after, None, "{label} {i}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_torn_event_contributes_nothing() {
    let fs = frames(LlmApi::Messages, 3, true, b"\n");
    let bytes = concat(&fs);
    let (st, _) = starts(&fs);
    let args_frame = fs
        .iter()
        .position(|f| f.part == Part::ToolArgs)
        .expect("args");
    // Cut in the middle of the first argument piece: the reader reports the earlier events
    // only, and the tool call's arguments as empty.
    let cut = st[args_frame] + fs[args_frame].bytes.len() / 2 + 8;
    let (facts, _) = read(LlmApi::Messages, &[&bytes[..cut]]);
    assert_eq!(facts.len(), args_frame);
    assert!(facts.iter().all(|f| f.args.is_none()));
    assert!(facts.iter().any(|f| f.tool_start.is_some()));
}

#[test]
fn data_that_is_not_the_apis_json_contributes_nothing() {
    for api in LlmApi::ALL {
        let junk = b"data: not json {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n\
                     data: {\"unrelated\": [1, 2, {\"text\": \"y\"}]}\n\n\
                     event: ping\ndata: {\"type\": \"ping\"}\n\n: comment\n\n";
        let (facts, marks) = read(api, &[junk]);
        assert_eq!(facts.len(), 3);
        assert!(
            facts.iter().all(LlmEventFacts::is_empty),
            "{api}: {facts:?}"
        );
        assert!(
            marks
                .iter()
                .all(|m| m.is_none_or(|m| m == LlmPos::BeforeFirstDelta)),
            "{api}"
        );
    }
}

#[test]
fn many_tool_calls_are_counted_beyond_the_ones_followed() {
    let mut stream = Vec::new();
    for i in 0..(MAX_TOOLS as u32 + 3) {
        stream.extend_from_slice(
            format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"t\",\"arguments\":\"{{}}\"}}}}]}}}}]}}\n\n"
            )
            .as_bytes(),
        );
    }
    let mut sc = SseScanner::bounded(4096, 1 << 20);
    sc.set_llm(LlmApi::ChatCompletions);
    let mut starts = 0;
    sc.feed(&stream, &mut |e| {
        starts += usize::from(e.llm.is_some_and(|f| f.tool_start.is_some()));
    });
    assert_eq!(starts, MAX_TOOLS);
    assert_eq!(sc.llm().map(LlmTracker::tools_over), Some(3));
}

#[test]
fn a_finish_reason_cut_before_its_quote_is_read_alike_under_every_split() {
    // Found by the `llm` fuzz target (seed `fuzz/corpus/llm/regress-unclosed-stop-reason`): the
    // event dispatches with the reason's string still open; its text used to be what the first
    // piece held ("en" or "end", by split).
    for (api, input, reason) in [
        (
            LlmApi::Messages,
            &b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end\n\n"[..],
            "end",
        ),
        (
            LlmApi::ChatCompletions,
            b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_ca\n\n",
            "tool_ca",
        ),
    ] {
        let whole = read(api, &[input]);
        assert_eq!(
            whole.0.iter().filter_map(|f| f.completion.as_deref()).collect::<Vec<_>>(),
            [reason],
            "{api}"
        );
        for k in 1..input.len() {
            assert_eq!(read(api, &[&input[..k], &input[k..]]), whole, "{api}: split at {k}");
        }
        let ones: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(read(api, &ones), whole, "{api}: 1-byte pieces");
    }
}

/// A Chat Completions stream of two choices (`n = 2`), one chunk per choice as OpenAI sends
/// them; choice 1 gets its finish reason only when `both_finish`.
fn two_choices(both_finish: bool) -> Vec<u8> {
    let mut s = String::new();
    let mut chunk = |choice: u32, delta: &str, finish: &str| {
        s.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":{choice},\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        ));
    };
    chunk(0, r#"{"role":"assistant","content":""}"#, "null");
    chunk(1, r#"{"role":"assistant","content":""}"#, "null");
    chunk(0, r#"{"content":"a"}"#, "null");
    chunk(1, r#"{"content":"b"}"#, "null");
    chunk(0, "{}", r#""stop""#);
    chunk(1, r#"{"content":"c"}"#, "null");
    if both_finish {
        chunk(1, "{}", r#""length""#);
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

#[test]
fn with_several_choices_the_answer_is_complete_only_when_every_choice_finished() {
    let api = LlmApi::ChatCompletions;
    // Choice 1 never finishes: no completion signal, whatever the split.
    let unfinished = two_choices(false);
    let (facts, _) = read(api, &[&unfinished]);
    assert!(facts.iter().all(|f| f.completion.is_none()), "{facts:?}");
    assert_eq!(facts.iter().filter(|f| f.text).count(), 3);
    assert!(facts.last().is_some_and(|f| f.terminal));
    // Both finish: the completion signal is the last finish reason, and only it.
    let whole = two_choices(true);
    let (facts, marks) = read(api, &[&whole]);
    let completions: Vec<(usize, &str)> = facts
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.completion.as_deref().map(|c| (i, c)))
        .collect();
    assert_eq!(completions, [(6, "length")], "{facts:?}");
    // Choice 0's finish reason is not "before-completion"; choice 1's is.
    let text = String::from_utf8_lossy(&whole);
    let stop = text.find("\"stop\"").expect("stop") + 2;
    let length = text.find("\"length\"").expect("length") + 2;
    assert_ne!(marks[stop], Some(LlmPos::BeforeCompletion));
    assert_eq!(marks[length], Some(LlmPos::BeforeCompletion));
    for bytes in [&unfinished, &whole] {
        for k in 0..=bytes.len() {
            assert_eq!(
                read(api, &[&bytes[..k], &bytes[k..]]),
                read(api, &[bytes]),
                "split at {k}"
            );
            assert_eq!(
                read_with(api, &[&bytes[..k], &bytes[k..]], true),
                read(api, &[bytes]),
                "every path, split at {k}"
            );
        }
    }
}

#[test]
fn one_choice_finishing_completes_the_answer_as_before() {
    let one = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let (facts, _) = read(LlmApi::ChatCompletions, &[one]);
    assert_eq!(facts[1].completion.as_deref(), Some("stop"));
    // A chunk without an index is choice 0.
    let bare = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n";
    let (facts, _) = read(LlmApi::ChatCompletions, &[bare]);
    assert_eq!(facts[1].completion.as_deref(), Some("stop"));
}
