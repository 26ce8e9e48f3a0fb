//! Anthropic Messages, as `POST /v1/messages` answers it.
//!
//! Stream, every event `event: <type>` + `data: {"type":"<type>",…}`: `message_start` (the
//! message with empty `content`, `stop_reason: null` and input usage), `content_block_start`
//! (a `text` block, or a `tool_use` block with `id`, `name` and `input: {}`), `ping`, one
//! `content_block_delta` per token (`text_delta`, or `input_json_delta` with `partial_json`),
//! `content_block_stop`, the completion signal `message_delta` (`stop_reason` `end_turn`,
//! `max_tokens` or `tool_use`, and output usage), then the terminal `message_stop`.
//! Without `stream`, one `message` JSON object.

use super::answer::{Answer, Finish, Output, text, token};
use super::frame::{Frame, Part, Sse, q};

fn stop_reason(f: Finish) -> &'static str {
    match f {
        Finish::Stop => "end_turn",
        Finish::Length => "max_tokens",
        Finish::ToolCall => "tool_use",
    }
}

fn usage(input: u32, output: u32) -> String {
    format!(
        r#"{{"input_tokens":{input},"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":{output},"service_tier":"standard"}}"#
    )
}

fn message(a: &Answer, content: &str, stop: Option<&str>, output_tokens: u32) -> String {
    format!(
        r#"{{"id":"msg_{}","type":"message","role":"assistant","model":{},"content":[{content}],"stop_reason":{},"stop_sequence":null,"usage":{}}}"#,
        a.suffix(),
        q(&a.model),
        stop.map_or_else(|| "null".to_owned(), q),
        usage(a.input_tokens, output_tokens)
    )
}

/// The events of a streamed answer.
pub fn stream(a: &Answer, sse: Sse) -> Vec<Frame> {
    let mut out = Vec::new();
    out.push(sse.event(
        Part::Preamble,
        "message_start",
        &format!(
            r#"{{"type":"message_start","message":{}}}"#,
            message(a, "", None, 1)
        ),
    ));
    let block = match &a.output {
        Output::Text { .. } => r#"{"type":"text","text":""}"#.to_owned(),
        Output::Tool { name, .. } => format!(
            r#"{{"type":"tool_use","id":"toolu_{}","name":{},"input":{{}}}}"#,
            a.suffix(),
            q(name)
        ),
    };
    out.push(sse.event(
        Part::Preamble,
        "content_block_start",
        &format!(r#"{{"type":"content_block_start","index":0,"content_block":{block}}}"#),
    ));
    out.push(sse.event(Part::Preamble, "ping", r#"{"type": "ping"}"#));
    let delta = |part: Part, d: &str| {
        sse.event(
            part,
            "content_block_delta",
            &format!(r#"{{"type":"content_block_delta","index":0,"delta":{d}}}"#),
        )
    };
    match &a.output {
        Output::Text { tokens } => {
            for k in 0..*tokens {
                out.push(delta(
                    Part::Delta,
                    &format!(r#"{{"type":"text_delta","text":{}}}"#, q(token(k))),
                ));
            }
        }
        Output::Tool { pieces, .. } => {
            for p in pieces {
                out.push(delta(
                    Part::ToolArgs,
                    &format!(r#"{{"type":"input_json_delta","partial_json":{}}}"#, q(p)),
                ));
            }
        }
    }
    out.push(sse.event(
        Part::Closing,
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ));
    out.push(sse.event(
        Part::Completion,
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{}","stop_sequence":null}},"usage":{{"output_tokens":{}}}}}"#,
            stop_reason(a.finish),
            a.output_tokens()
        ),
    ));
    out.push(sse.event(Part::Terminal, "message_stop", r#"{"type":"message_stop"}"#));
    out
}

/// The JSON body of an answer without `stream`.
pub fn body(a: &Answer) -> String {
    let content = match &a.output {
        Output::Text { tokens } => format!(r#"{{"type":"text","text":{}}}"#, q(&text(*tokens))),
        Output::Tool {
            name, arguments, ..
        } => format!(
            r#"{{"type":"tool_use","id":"toolu_{}","name":{},"input":{arguments}}}"#,
            a.suffix(),
            q(name)
        ),
    };
    message(a, &content, Some(stop_reason(a.finish)), a.output_tokens())
}
