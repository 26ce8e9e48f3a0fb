//! OpenAI Chat Completions, as `POST /v1/chat/completions` answers it.
//!
//! Stream (`stream: true`), every event `data: <chunk>` with no `event:` field:
//! 1. the role chunk: `delta: {"role":"assistant","content":""}` (tool calls: `content: null`
//!    and the first `tool_calls` entry with `index`, `id`, `type: "function"`, `name`,
//!    `arguments: ""`);
//! 2. one chunk per token: `delta: {"content": "<token>"}` or
//!    `delta: {"tool_calls":[{"index":0,"function":{"arguments":"<piece>"}}]}`;
//! 3. the completion signal: `delta: {}` with `finish_reason` `stop`, `length` or
//!    `tool_calls`;
//! 4. with `stream_options.include_usage` (or the `always` knob) the usage chunk, `choices: []`
//!    and `usage` (every earlier chunk then carries `"usage": null`, as OpenAI's do);
//! 5. the terminal event `data: [DONE]`.
//!
//! Without `stream`, one `chat.completion` JSON object. Invariants: every chunk has the same
//! `id`, `created`, `model` and `system_fingerprint`; `choices[0].index` is 0.

use super::answer::{Answer, Finish, Output, text};
use super::frame::{Frame, Part, Sse, q};
use super::knobs::UsageMode;

/// `created` of every answer (fixed: the lab's bytes are deterministic).
pub const CREATED: u64 = 1_767_225_600;

fn finish_reason(f: Finish) -> &'static str {
    match f {
        Finish::Stop => "stop",
        Finish::Length => "length",
        Finish::ToolCall => "tool_calls",
    }
}

fn usage(a: &Answer) -> String {
    let (i, o) = (a.input_tokens, a.output_tokens());
    format!(
        r#"{{"prompt_tokens":{i},"completion_tokens":{o},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":0,"audio_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}}"#,
        u64::from(i) + u64::from(o)
    )
}

/// The events of a streamed answer.
pub fn stream(a: &Answer, sse: Sse, include_usage: bool, mode: UsageMode) -> Vec<Frame> {
    let with_usage = match mode {
        UsageMode::Requested => include_usage,
        UsageMode::Always => true,
        UsageMode::Never => false,
    };
    let head = format!(
        r#"{{"id":"chatcmpl-{}","object":"chat.completion.chunk","created":{CREATED},"model":{},"service_tier":"default","system_fingerprint":"fp_lab","choices":"#,
        a.suffix(),
        q(&a.model)
    );
    let tail = if with_usage { r#","usage":null}"# } else { "}" };
    let chunk = |part: Part, delta: &str, finish: Option<&str>| {
        let finish = finish.map_or_else(|| "null".to_owned(), q);
        sse.data(
            part,
            &format!(
                r#"{head}[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]{tail}"#
            ),
        )
    };
    let mut out = Vec::new();
    match &a.output {
        Output::Text { tokens } => {
            out.push(chunk(
                Part::Preamble,
                r#"{"role":"assistant","content":"","refusal":null}"#,
                None,
            ));
            for k in 0..*tokens {
                let delta = format!(r#"{{"content":{}}}"#, q(super::answer::token(k)));
                out.push(chunk(Part::Delta, &delta, None));
            }
        }
        Output::Tool { name, pieces, .. } => {
            let first = format!(
                r#"{{"role":"assistant","content":null,"tool_calls":[{{"index":0,"id":"call_{}","type":"function","function":{{"name":{},"arguments":""}}}}],"refusal":null}}"#,
                a.suffix(),
                q(name)
            );
            out.push(chunk(Part::Preamble, &first, None));
            for p in pieces {
                let delta = format!(
                    r#"{{"tool_calls":[{{"index":0,"function":{{"arguments":{}}}}}]}}"#,
                    q(p)
                );
                out.push(chunk(Part::ToolArgs, &delta, None));
            }
        }
    }
    out.push(chunk(Part::Completion, "{}", Some(finish_reason(a.finish))));
    if with_usage {
        out.push(sse.data(Part::Usage, &format!(r#"{head}[],"usage":{}}}"#, usage(a))));
    }
    out.push(sse.data(Part::Terminal, "[DONE]"));
    out
}

/// The JSON body of an answer without `stream`.
pub fn body(a: &Answer) -> String {
    let message = match &a.output {
        Output::Text { tokens } => format!(
            r#"{{"role":"assistant","content":{},"refusal":null,"annotations":[]}}"#,
            q(&text(*tokens))
        ),
        Output::Tool {
            name, arguments, ..
        } => format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_{}","type":"function","function":{{"name":{},"arguments":{}}}}}],"refusal":null,"annotations":[]}}"#,
            a.suffix(),
            q(name),
            q(arguments)
        ),
    };
    format!(
        r#"{{"id":"chatcmpl-{}","object":"chat.completion","created":{CREATED},"model":{},"choices":[{{"index":0,"message":{message},"logprobs":null,"finish_reason":"{}"}}],"usage":{},"service_tier":"default","system_fingerprint":"fp_lab"}}"#,
        a.suffix(),
        q(&a.model),
        finish_reason(a.finish),
        usage(a)
    )
}
