//! One logical LLM request of the load client: attempts under a policy, the stream read as the
//! API's events (the same reader the proxy's observer uses), and the latencies users feel.
//!
//! Policies: `strict` takes an answer only with its completion signal; a stream that ends
//! without it (clean end, reset, stall past the timeout, an error status) is a failed attempt,
//! re-sent with the same `Idempotency-Key` (and `X-Stainless-Retry-Count` = attempt number, as
//! the OpenAI and Anthropic SDKs do) after a backoff, up to `max_attempts`. `naive` sends once:
//! a body that ends cleanly is its answer, whatever it holds (a truncated one is a silent loss);
//! a broken body or an error status is a visible failure. Both send a fresh key per logical
//! request.
//!
//! Metrics (the names vLLM's and NVIDIA's benchmark tools use), from the request's *intended*
//! start, of the attempt whose answer the client keeps: time to first token (first text or
//! argument delta), inter-token latency (each gap between deltas), time per output token
//! ((end − first token) / (tokens − 1)), end-to-end (to the completion signal, or to the end of
//! a kept truncated answer). Tokens are the deltas received.

use std::time::Duration;

use tokio::time::Instant;

use super::config::Target;
use super::http::{Conn, HttpError, Next, Request};
use crate::vocab::LlmApi;
use crate::wire::llm_args::ArgsStatus;
use crate::wire::sse::SseScanner;

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum AttemptEnd {
    /// The completion signal arrived (the body's end may or may not have followed).
    Complete,
    /// The body ended by its framing without the completion signal.
    CleanEnd,
    /// The body or the connection broke (reset, FIN mid-body, bad framing).
    Broken {
        /// [`HttpError::kind`].
        error: &'static str,
    },
    /// Nothing arrived within the timeout (a stall).
    Timeout,
    /// A non-2xx status or a non-SSE answer.
    Status {
        /// The status code.
        status: u16,
    },
}

/// What one attempt got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Attempt {
    /// How it ended.
    pub end: AttemptEnd,
    /// Text deltas received.
    pub deltas: u64,
    /// Tool-call argument pieces received.
    pub arg_pieces: u64,
    /// The arguments' status at the end (when a tool call began).
    pub args: Option<ArgsStatus>,
    /// The completion reason, if the completion signal arrived.
    pub completion: Option<String>,
    /// The terminal event arrived.
    pub terminal: bool,
    /// The answer's text as received (first 4 KiB), for the story.
    pub text: String,
}

/// What a logical request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// A complete answer (its completion signal arrived).
    Complete,
    /// A truncated answer taken as complete (naive): a silent loss.
    AcceptedPartial,
    /// The client gave up visibly.
    Failed,
}

/// One logical request, as the client lived it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CallRecord {
    /// Index of the request in the run (plan-wide, per session: session × 2³² + k).
    pub call: u64,
    /// Its `Idempotency-Key`.
    pub key: String,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
    /// What it came to.
    pub outcome: Outcome,
}

/// Latencies of the kept answer, from the intended start (µs durations).
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// Time to first token.
    pub ttft: Option<Duration>,
    /// Gaps between consecutive deltas.
    pub itl: Vec<Duration>,
    /// Time per output token.
    pub tpot: Option<Duration>,
    /// End to end.
    pub e2e: Option<Duration>,
    /// Output tokens (deltas) of the kept answer.
    pub tokens: u64,
}

/// What sending one request needs.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// Where.
    pub target: &'a Target,
    /// Which API.
    pub api: LlmApi,
    /// The JSON body.
    pub body: &'a [u8],
    /// The logical request's key.
    pub key: &'a str,
    /// Bearer key to send (as `Authorization`, and `x-api-key` for Messages), if any.
    pub api_key: Option<&'a str>,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// Longest wait for any byte (head or body): a stall beyond it ends the attempt.
    pub idle_timeout: Duration,
}

/// Sends one attempt (number `n`, 0-based) and reads its answer; `timings` gets the attempt's
/// latencies measured from `intended`.
pub async fn attempt(ask: &Ask<'_>, n: u32, intended: Instant, timings: &mut Timings) -> Attempt {
    let mut out = Attempt {
        end: AttemptEnd::Timeout,
        deltas: 0,
        arg_pieces: 0,
        args: None,
        completion: None,
        terminal: false,
        text: String::new(),
    };
    *timings = Timings::default();
    let conn = match Conn::connect(ask.target, ask.connect_timeout).await {
        Ok(c) => c,
        Err(e) => {
            out.end = end_of(&e);
            return out;
        }
    };
    let retry = n.to_string();
    let bearer = ask.api_key.map(|k| format!("Bearer {k}"));
    let mut headers: Vec<(&str, &str)> = vec![
        ("Content-Type", "application/json"),
        ("Accept", "text/event-stream"),
        ("Idempotency-Key", ask.key),
        ("X-Stainless-Retry-Count", &retry),
    ];
    if let Some(b) = &bearer {
        headers.push(("Authorization", b));
    }
    if let (LlmApi::Messages, Some(k)) = (ask.api, ask.api_key) {
        headers.push(("x-api-key", k));
        headers.push(("anthropic-version", "2023-06-01"));
    }
    let req = Request {
        method: "POST",
        headers: &headers,
        body: ask.body,
    };
    let mut resp = match conn
        .send(ask.target, &req, Instant::now() + ask.idle_timeout)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            out.end = end_of(&e);
            return out;
        }
    };
    if !(200..300).contains(&resp.status) || !resp.is_event_stream() {
        out.end = AttemptEnd::Status {
            status: resp.status,
        };
        let _ = resp.body.read_all(Instant::now() + ask.idle_timeout).await;
        return out;
    }
    let mut scanner = SseScanner::new();
    scanner.set_llm(ask.api);
    let mut last_token: Option<Instant> = None;
    let mut first_token: Option<Instant> = None;
    loop {
        let next = resp.body.next(Instant::now() + ask.idle_timeout).await;
        let bytes = match next {
            Ok(Next::Data(d)) => d,
            Ok(Next::End) => {
                if out.end != AttemptEnd::Complete {
                    out.end = AttemptEnd::CleanEnd;
                }
                break;
            }
            Err(e) => {
                if out.end != AttemptEnd::Complete {
                    out.end = end_of(&e);
                }
                break;
            }
        };
        let now = Instant::now();
        scanner.feed(bytes, &mut |e| {
            let Some(f) = e.llm else { return };
            let token = f.text || f.args.is_some_and(|a| a.bytes > 0);
            if token {
                if let Some(prev) = last_token {
                    timings.itl.push(now.saturating_duration_since(prev));
                }
                first_token.get_or_insert(now);
                last_token = Some(now);
                timings.tokens += 1;
            }
            if f.text {
                out.deltas += 1;
                if out.text.len() < 4096 {
                    out.text.push_str(&text_of(ask.api, e.data));
                }
            }
            if let Some(a) = f.args {
                out.arg_pieces += 1;
                out.args = Some(a.status);
            }
            if f.tool_start.is_some() && out.args.is_none() {
                out.args = Some(ArgsStatus::Empty);
            }
            if f.completion.is_some() {
                out.completion = f.completion.clone();
                out.end = AttemptEnd::Complete;
            }
            out.terminal |= f.terminal;
        });
        if out.end == AttemptEnd::Complete && timings.e2e.is_none() {
            timings.e2e = Some(now.saturating_duration_since(intended));
        }
    }
    let end = Instant::now();
    timings.ttft = first_token.map(|t| t.saturating_duration_since(intended));
    if timings.e2e.is_none() {
        timings.e2e = Some(end.saturating_duration_since(intended));
    }
    if let (Some(first), Some(last)) = (first_token, last_token)
        && timings.tokens >= 2
    {
        let per = last.saturating_duration_since(first) / (timings.tokens - 1) as u32;
        timings.tpot = Some(per);
    }
    out
}

fn end_of(e: &HttpError) -> AttemptEnd {
    match e {
        HttpError::Timeout => AttemptEnd::Timeout,
        other => AttemptEnd::Broken {
            error: other.kind(),
        },
    }
}

/// The text a delta event carries (the lab's and the providers' shapes), for the story only.
fn text_of(api: LlmApi, data: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return String::new();
    };
    let t = match api {
        LlmApi::ChatCompletions => v.pointer("/choices/0/delta/content"),
        LlmApi::Responses => v.get("delta"),
        LlmApi::Messages => v.pointer("/delta/text"),
    };
    t.and_then(|t| t.as_str()).unwrap_or("").to_owned()
}

/// The JSON body of one request: a user message, streaming, at most `max_tokens` tokens, and
/// with `tool` one function tool (`get_weather`, a strict schema) the answer must call. The
/// prompt names the request (`name`, its key), so two requests share a body only when they
/// are one request's attempts.
pub fn request_body(api: LlmApi, model: &str, max_tokens: u32, tool: bool, name: &str) -> Vec<u8> {
    let prompt = format!("Request {name}: tell me about tearline.");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": false
    });
    let mut v = match api {
        LlmApi::ChatCompletions => serde_json::json!({
            "model": model, "stream": true, "stream_options": {"include_usage": true},
            "max_completion_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }),
        LlmApi::Responses => serde_json::json!({
            "model": model, "stream": true, "max_output_tokens": max_tokens, "input": prompt,
        }),
        LlmApi::Messages => serde_json::json!({
            "model": model, "stream": true, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        }),
    };
    if tool {
        v["tools"] = match api {
            LlmApi::ChatCompletions => serde_json::json!([{"type": "function", "function":
                {"name": "get_weather", "description": "weather in a city", "parameters": schema}}]),
            LlmApi::Responses => serde_json::json!([{"type": "function", "name": "get_weather",
                "description": "weather in a city", "parameters": schema}]),
            LlmApi::Messages => serde_json::json!([{"name": "get_weather",
                "description": "weather in a city", "input_schema": schema}]),
        };
        v["tool_choice"] = match api {
            LlmApi::Messages => serde_json::json!({"type": "any"}),
            _ => serde_json::json!("required"),
        };
    }
    v.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::llm::request::LlmRequest;

    #[test]
    fn bodies_are_what_the_lab_reads_as_each_api() {
        for api in LlmApi::ALL {
            for tool in [false, true] {
                let body = request_body(api, "m", 77, tool, "tl-llm-0-naive-3");
                let r = LlmRequest::parse(api, &body).expect("parses");
                assert!(r.stream && r.max_tokens == Some(77), "{api}");
                assert_eq!(r.tools.len(), usize::from(tool), "{api}");
                if api == LlmApi::ChatCompletions {
                    assert!(r.include_usage);
                }
            }
        }
    }
}
