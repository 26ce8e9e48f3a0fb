//! Where the lab's answer puts its deltas and its completion signal, read off one raw stream per
//! API and mode (HTTP/1.0, so the body is plain SSE): the test's own, independent map of the
//! stream, used to place each truncation kind's cut by event index and to state what the
//! client could have seen before it.
//!
//! Invariant: the map comes from the lab's bytes, parsed here with the WHATWG rules the tests
//! need (LF or CRLF line ends, `data:` lines), never from tearline's observer.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::drivers::{Api, Mode};

/// Event indexes (0-based, per stream) of one answer.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Text deltas (text mode) or tool-call argument deltas (tool mode).
    pub deltas: Vec<u64>,
    /// The completion signal (`finish_reason`, `response.completed`, `message_delta`).
    pub signal: u64,
    /// Events in the stream.
    pub events: u64,
}

impl Layout {
    /// The delta in the middle of the answer.
    pub fn middle(&self) -> u64 {
        self.deltas[self.deltas.len() / 2]
    }
}

fn body(api: Api, mode: Mode) -> (&'static str, serde_json::Value) {
    let tools = matches!(mode, Mode::Tool);
    let schema = serde_json::json!({"type": "object", "properties": {"city": {"type": "string"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city", "unit"],
        "additionalProperties": false});
    match api {
        Api::Chat => {
            let mut b = serde_json::json!({"model": "lab-gpt", "stream": true,
                "messages": [{"role": "user", "content": "x"}]});
            if tools {
                b["tools"] = serde_json::json!([{"type": "function", "function":
                    {"name": "get_weather", "parameters": schema, "strict": true}}]);
            }
            ("/v1/chat/completions", b)
        }
        Api::Responses => {
            let mut b = serde_json::json!({"model": "lab-gpt", "stream": true, "input": "x"});
            if tools {
                b["tools"] = serde_json::json!([{"type": "function", "name": "get_weather",
                    "parameters": schema, "strict": true}]);
            }
            ("/v1/responses", b)
        }
        Api::Messages => {
            let mut b = serde_json::json!({"model": "lab-claude", "stream": true,
                "max_tokens": 256, "messages": [{"role": "user", "content": "x"}]});
            if tools {
                b["tools"] = serde_json::json!([{"name": "get_weather", "input_schema": schema}]);
            }
            ("/v1/messages", b)
        }
    }
}

/// The `data:` values of each event of an SSE body.
fn events(sse: &str) -> Vec<String> {
    let sse = sse.replace("\r\n", "\n");
    sse.split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|v| v.strip_prefix(' ').unwrap_or(v))
                .collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .collect()
}

/// Reads the lab's stream for `api` and `mode` and maps it.
pub async fn layout(lab: SocketAddr, api: Api, mode: Mode) -> Layout {
    let (path, body) = body(api, mode);
    let body = body.to_string();
    let mut s = TcpStream::connect(lab).await.expect("connect to the lab");
    let head = format!(
        "POST {path} HTTP/1.0\r\nHost: {lab}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("send");
    s.write_all(body.as_bytes()).await.expect("send");
    let mut raw = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(20), s.read_to_end(&mut raw))
        .await
        .expect("the lab answers within 20 s")
        .expect("read");
    let raw = String::from_utf8_lossy(&raw);
    let (_, sse) = raw.split_once("\r\n\r\n").expect("a response head");
    let evs = events(sse);
    let mut deltas = Vec::new();
    let mut signal = None;
    for (i, data) in evs.iter().enumerate() {
        let i = i as u64;
        let v: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
        let t = v["type"].as_str().unwrap_or("");
        let is_delta = match (api, mode) {
            (Api::Chat, Mode::Text) => v["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|c| !c.is_empty()),
            (Api::Chat, Mode::Tool) => {
                v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .is_some_and(|c| !c.is_empty())
            }
            (Api::Responses, Mode::Text) => t == "response.output_text.delta",
            (Api::Responses, Mode::Tool) => t == "response.function_call_arguments.delta",
            (Api::Messages, Mode::Text) => v["delta"]["type"] == "text_delta",
            (Api::Messages, Mode::Tool) => v["delta"]["type"] == "input_json_delta",
        };
        if is_delta {
            deltas.push(i);
        }
        let is_signal = match api {
            Api::Chat => v["choices"][0]["finish_reason"].is_string(),
            Api::Responses => t == "response.completed",
            Api::Messages => t == "message_delta",
        };
        if is_signal && signal.is_none() {
            signal = Some(i);
        }
    }
    assert!(
        deltas.len() >= 3,
        "{api:?} {mode:?}: too few deltas in {evs:?}"
    );
    Layout {
        deltas,
        signal: signal.unwrap_or_else(|| panic!("{api:?} {mode:?}: no completion signal")),
        events: evs.len() as u64,
    }
}
