//! What the lab reads from an LLM request body: the few fields that shape its answer, per API,
//! as the official SDKs send them.
//!
//! Invariants: parsing is lenient where providers are (absent `model` or `max_tokens` get
//! defaults) and strict only where the answer would otherwise be a guess (the body must be a
//! JSON object; a tool the knobs name must be offered). Only function tools count: provider
//! built-in tools (`web_search`, …) are ignored.

use serde_json::Value;

use crate::vocab::LlmApi;

/// A function tool the request offers.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    /// Its name.
    pub name: String,
    /// Its JSON Schema for the arguments (`{}` when absent).
    pub schema: Value,
}

/// What `tool_choice` asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// `auto` or absent: a tool call when tools are offered and no tool result ends the turn.
    #[default]
    Auto,
    /// `none`: text only.
    None,
    /// `required` / `any`: some tool, always.
    Required,
    /// This tool, always.
    Named(String),
}

/// The request fields the lab's answer depends on.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    /// Which API.
    pub api: LlmApi,
    /// `model` (default `tearline-lab`).
    pub model: String,
    /// `stream: true`.
    pub stream: bool,
    /// Chat Completions `stream_options.include_usage: true`.
    pub include_usage: bool,
    /// The output token limit (`max_completion_tokens`/`max_tokens`/`max_output_tokens`).
    pub max_tokens: Option<u32>,
    /// Function tools offered, in order.
    pub tools: Vec<OfferedTool>,
    /// `tool_choice`.
    pub choice: ToolChoice,
    /// Whether the last input item is a tool result (the second turn of a tool loop).
    pub after_tool_result: bool,
    /// A deterministic estimate of the prompt's tokens (a quarter of the body's bytes, at
    /// least 1): the usage blocks' input count.
    pub prompt_tokens: u32,
}

/// A request the lab cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

impl LlmRequest {
    /// Parses a request body of `api`.
    pub fn parse(api: LlmApi, body: &[u8]) -> Result<LlmRequest, RequestError> {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| RequestError(format!("the request body is not valid JSON: {e}")))?;
        let Value::Object(o) = &v else {
            return Err(RequestError(
                "the request body must be a JSON object".into(),
            ));
        };
        let num = |k: &str| {
            o.get(k)
                .and_then(Value::as_u64)
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
        };
        let max_tokens = match api {
            LlmApi::ChatCompletions => num("max_completion_tokens").or_else(|| num("max_tokens")),
            LlmApi::Responses => num("max_output_tokens"),
            LlmApi::Messages => num("max_tokens"),
        };
        let tools = o
            .get("tools")
            .and_then(Value::as_array)
            .map(|ts| ts.iter().filter_map(|t| offered(api, t)).collect())
            .unwrap_or_default();
        let after_tool_result = match api {
            LlmApi::ChatCompletions => last(o.get("messages"))
                .is_some_and(|m| m.get("role").and_then(Value::as_str) == Some("tool")),
            LlmApi::Responses => last(o.get("input")).is_some_and(|m| {
                m.get("type").and_then(Value::as_str) == Some("function_call_output")
            }),
            LlmApi::Messages => last(o.get("messages")).is_some_and(|m| {
                m.get("content").and_then(Value::as_array).is_some_and(|c| {
                    c.iter()
                        .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                })
            }),
        };
        Ok(LlmRequest {
            api,
            model: o
                .get("model")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .unwrap_or("tearline-lab")
                .to_owned(),
            stream: o.get("stream").and_then(Value::as_bool).unwrap_or(false),
            include_usage: o
                .get("stream_options")
                .and_then(|s| s.get("include_usage"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            max_tokens,
            tools,
            choice: choice(api, o.get("tool_choice")),
            after_tool_result,
            prompt_tokens: u32::try_from(body.len() / 4 + 1).unwrap_or(u32::MAX),
        })
    }
}

fn last(list: Option<&Value>) -> Option<&Value> {
    list.and_then(Value::as_array).and_then(|a| a.last())
}

/// A function tool of one API's `tools` array, or `None` for built-in tools.
fn offered(api: LlmApi, t: &Value) -> Option<OfferedTool> {
    let kind = t.get("type").and_then(Value::as_str);
    let (name, schema) = match api {
        LlmApi::ChatCompletions => {
            if kind.is_some_and(|k| k != "function") {
                return None;
            }
            let f = t.get("function")?;
            (f.get("name")?, f.get("parameters"))
        }
        LlmApi::Responses => {
            if kind != Some("function") {
                return None;
            }
            (t.get("name")?, t.get("parameters"))
        }
        LlmApi::Messages => {
            if kind.is_some_and(|k| k != "custom") {
                return None;
            }
            (t.get("name")?, t.get("input_schema"))
        }
    };
    Some(OfferedTool {
        name: name.as_str()?.to_owned(),
        schema: schema
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default())),
    })
}

fn choice(api: LlmApi, v: Option<&Value>) -> ToolChoice {
    let Some(v) = v else {
        return ToolChoice::Auto;
    };
    if let Some(s) = v.as_str() {
        return match s {
            "none" => ToolChoice::None,
            "required" | "any" => ToolChoice::Required,
            _ => ToolChoice::Auto,
        };
    }
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let name = match api {
        LlmApi::ChatCompletions => v.get("function").and_then(|f| f.get("name")),
        LlmApi::Responses | LlmApi::Messages => v.get("name"),
    }
    .and_then(Value::as_str);
    match (kind, name) {
        ("function" | "tool", Some(n)) => ToolChoice::Named(n.to_owned()),
        ("none", _) => ToolChoice::None,
        ("any" | "required", _) => ToolChoice::Required,
        _ => ToolChoice::Auto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_fields_as_the_openai_sdk_sends_them() {
        let body = br#"{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},
            "max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}],
            "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
            "tool_choice":{"type":"function","function":{"name":"get_weather"}}}"#;
        let r = LlmRequest::parse(LlmApi::ChatCompletions, body).expect("parses");
        assert_eq!(r.model, "gpt-x");
        assert!(r.stream && r.include_usage && !r.after_tool_result);
        assert_eq!(r.max_tokens, Some(5));
        assert_eq!(r.tools[0].name, "get_weather");
        assert_eq!(r.choice, ToolChoice::Named("get_weather".into()));
    }

    #[test]
    fn a_tool_result_last_is_seen_in_each_api() {
        let chat = br#"{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c","content":"r"}]}"#;
        let resp = br#"{"input":[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"c","output":"r"}]}"#;
        let msgs = br#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}"#;
        assert!(
            LlmRequest::parse(LlmApi::ChatCompletions, chat)
                .expect("c")
                .after_tool_result
        );
        assert!(
            LlmRequest::parse(LlmApi::Responses, resp)
                .expect("r")
                .after_tool_result
        );
        assert!(
            LlmRequest::parse(LlmApi::Messages, msgs)
                .expect("m")
                .after_tool_result
        );
    }

    #[test]
    fn built_in_tools_are_not_function_tools() {
        let body = br#"{"tools":[{"type":"web_search_20250305","name":"web_search"},{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}"#;
        let r = LlmRequest::parse(LlmApi::Messages, body).expect("parses");
        assert_eq!(r.tools.len(), 1);
        assert_eq!(r.tools[0].name, "f");
        assert_eq!(r.choice, ToolChoice::Required);
    }

    #[test]
    fn a_body_that_is_not_an_object_is_refused_with_the_reason() {
        let e = LlmRequest::parse(LlmApi::Responses, b"[1]").expect_err("array");
        assert!(e.0.contains("JSON object"), "{e}");
        let e = LlmRequest::parse(LlmApi::Responses, b"{").expect_err("truncated");
        assert!(e.0.contains("not valid JSON"), "{e}");
    }
}
