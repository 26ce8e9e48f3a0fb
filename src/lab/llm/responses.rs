//! OpenAI Responses, as `POST /v1/responses` answers it.
//!
//! Stream: typed events, each `event: <type>` + `data: {"type":"<type>",…,"sequence_number":n}`
//! with `n` counting from 0:
//! - text: `response.created`, `response.in_progress`, `response.output_item.added` (a
//!   `message` item), `response.content_part.added` (an `output_text` part), one
//!   `response.output_text.delta` per token, `response.output_text.done`,
//!   `response.content_part.done`, `response.output_item.done`, then the completion signal;
//! - tool call: `response.created`, `response.in_progress`, `response.output_item.added` (a
//!   `function_call` item with `call_id`, `name`, `arguments: ""`), one
//!   `response.function_call_arguments.delta` per piece, `…arguments.done`,
//!   `response.output_item.done`, then the completion signal.
//!
//! The completion signal is `response.completed` (or `response.incomplete` with
//! `incomplete_details.reason = "max_output_tokens"` when the request's limit ended the text)
//! carrying the whole response with `usage`; it is also the stream's last event (Responses
//! streams have no `[DONE]`). Without `stream`, the same final response object as JSON.

use super::answer::{Answer, Finish, Output, text, token};
use super::frame::{Frame, Part, Sse, q};

/// `created_at` of every answer.
const CREATED: u64 = super::chat::CREATED;

fn usage(a: &Answer) -> String {
    let (i, o) = (a.input_tokens, a.output_tokens());
    format!(
        r#"{{"input_tokens":{i},"input_tokens_details":{{"cached_tokens":0}},"output_tokens":{o},"output_tokens_details":{{"reasoning_tokens":0}},"total_tokens":{}}}"#,
        u64::from(i) + u64::from(o)
    )
}

/// The response object in `status` with `output` and `usage` (JSON texts).
fn response(a: &Answer, status: &str, output: &str, usage: &str) -> String {
    let incomplete = if status == "incomplete" {
        r#"{"reason":"max_output_tokens"}"#
    } else {
        "null"
    };
    format!(
        r#"{{"id":"resp_{}","object":"response","created_at":{CREATED},"status":"{status}","background":false,"error":null,"incomplete_details":{incomplete},"instructions":null,"max_output_tokens":null,"model":{},"output":[{output}],"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{{"effort":null,"summary":null}},"service_tier":"default","store":false,"temperature":1.0,"text":{{"format":{{"type":"text"}}}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":{usage},"user":null,"metadata":{{}}}}"#,
        a.suffix(),
        q(&a.model)
    )
}

fn text_part(t: &str) -> String {
    format!(
        r#"{{"type":"output_text","annotations":[],"logprobs":[],"text":{}}}"#,
        q(t)
    )
}

fn message_item(a: &Answer, status: &str, content: &str) -> String {
    format!(
        r#"{{"id":"msg_{}","type":"message","status":"{status}","content":[{content}],"role":"assistant"}}"#,
        a.suffix()
    )
}

fn call_item(a: &Answer, status: &str, name: &str, arguments: &str) -> String {
    format!(
        r#"{{"id":"fc_{}","type":"function_call","status":"{status}","arguments":{},"call_id":"call_{}","name":{}}}"#,
        a.suffix(),
        q(arguments),
        a.suffix(),
        q(name)
    )
}

/// The final output item and the final status.
fn done_item(a: &Answer) -> (String, &'static str) {
    match &a.output {
        Output::Text { tokens } => {
            let status = if a.finish == Finish::Length {
                "incomplete"
            } else {
                "completed"
            };
            (message_item(a, status, &text_part(&text(*tokens))), status)
        }
        Output::Tool {
            name, arguments, ..
        } => (call_item(a, "completed", name, arguments), "completed"),
    }
}

/// The events of a streamed answer.
pub fn stream(a: &Answer, sse: Sse) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut seq = 0u64;
    let mut push = |part: Part, kind: &str, fields: &str| {
        let sep = if fields.is_empty() { "" } else { "," };
        out.push(sse.event(
            part,
            kind,
            &format!(r#"{{"type":"{kind}"{sep}{fields},"sequence_number":{seq}}}"#),
        ));
        seq += 1;
    };
    let live = response(a, "in_progress", "", "null");
    push(
        Part::Preamble,
        "response.created",
        &format!(r#""response":{live}"#),
    );
    push(
        Part::Preamble,
        "response.in_progress",
        &format!(r#""response":{live}"#),
    );
    let (final_item, status) = done_item(a);
    match &a.output {
        Output::Text { tokens } => {
            let id = format!("msg_{}", a.suffix());
            push(
                Part::Preamble,
                "response.output_item.added",
                &format!(
                    r#""output_index":0,"item":{}"#,
                    message_item(a, "in_progress", "")
                ),
            );
            let at = format!(r#""item_id":"{id}","output_index":0,"content_index":0"#);
            push(
                Part::Preamble,
                "response.content_part.added",
                &format!(r#"{at},"part":{}"#, text_part("")),
            );
            for k in 0..*tokens {
                push(
                    Part::Delta,
                    "response.output_text.delta",
                    &format!(r#"{at},"delta":{},"logprobs":[]"#, q(token(k))),
                );
            }
            let full = text(*tokens);
            push(
                Part::Closing,
                "response.output_text.done",
                &format!(r#"{at},"text":{},"logprobs":[]"#, q(&full)),
            );
            push(
                Part::Closing,
                "response.content_part.done",
                &format!(r#"{at},"part":{}"#, text_part(&full)),
            );
        }
        Output::Tool {
            name,
            arguments,
            pieces,
        } => {
            let id = format!("fc_{}", a.suffix());
            push(
                Part::Preamble,
                "response.output_item.added",
                &format!(
                    r#""output_index":0,"item":{}"#,
                    call_item(a, "in_progress", name, "")
                ),
            );
            let at = format!(r#""item_id":"{id}","output_index":0"#);
            for p in pieces {
                push(
                    Part::ToolArgs,
                    "response.function_call_arguments.delta",
                    &format!(r#"{at},"delta":{}"#, q(p)),
                );
            }
            push(
                Part::Closing,
                "response.function_call_arguments.done",
                &format!(r#"{at},"name":{},"arguments":{}"#, q(name), q(arguments)),
            );
        }
    }
    push(
        Part::Closing,
        "response.output_item.done",
        &format!(r#""output_index":0,"item":{final_item}"#),
    );
    let signal = if status == "incomplete" {
        "response.incomplete"
    } else {
        "response.completed"
    };
    let done = response(a, status, &final_item, &usage(a));
    push(Part::Completion, signal, &format!(r#""response":{done}"#));
    out
}

/// The JSON body of an answer without `stream`.
pub fn body(a: &Answer) -> String {
    let (item, status) = done_item(a);
    response(a, status, &item, &usage(a))
}
