//! The lab's LLM endpoints over raw sockets: each API's stream has the provider's event
//! sequence (completion signal, terminal event, usage), tool calls stream arguments that
//! concatenate to valid JSON, non-stream answers match the streamed ones, and bad requests get
//! the provider's error shape with a message that says what is wrong.

use crate::common::lab_client::{self as lab_client, Ev, JSON, Lab, scan, within};
use serde_json::{Value, json};
use tearline::lab::LabConfig;
use tearline::lab::llm::answer::text;

const TOOLS_CHAT: &str = r#"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}}]"#;
const TOOLS_RESPONSES: &str = r#"[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}]"#;
const TOOLS_MESSAGES: &str = r#"[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}}]"#;

/// The expected arguments of the lab's call of `get_weather` above.
fn weather_args() -> Value {
    json!({"city": "lab-city", "days": 3})
}

async fn post(lab: &Lab, path: &str, knobs: &str, body: &str) -> lab_client::Full {
    let mut c = lab.connect().await;
    let mut h = vec![JSON, ("Authorization", "Bearer sk-test-not-a-key")];
    if !knobs.is_empty() {
        h.push(("x-tearline-lab", knobs));
    }
    c.request("POST", path, &h, body.as_bytes()).await
}

fn data(e: &Ev) -> Value {
    serde_json::from_slice(&e.data).expect("event data is JSON")
}

#[tokio::test]
async fn chat_stream_has_role_deltas_finish_usage_and_done_in_order() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = r#"{"model":"gpt-lab","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
        let r = post(&lab, "/v1/chat/completions", "tokens=5", body).await;
        assert_eq!(r.status, 200);
        assert!(r.header("content-type").is_some_and(|c| c.starts_with("text/event-stream")));
        let evs = scan(&r.chunks);
        assert_eq!(evs.len(), 1 + 5 + 1 + 1 + 1, "{evs:?}");
        assert!(evs.iter().all(|e| e.event_type == "message"));
        assert_eq!(evs.last().expect("events").data, b"[DONE]");
        let chunks: Vec<Value> = evs[..evs.len() - 1].iter().map(data).collect();
        assert!(chunks.iter().all(|c| c["id"] == chunks[0]["id"]));
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        let streamed: String = chunks[1..6]
            .iter()
            .map(|c| c["choices"][0]["delta"]["content"].as_str().expect("content"))
            .collect();
        assert_eq!(streamed, text(5));
        assert!(chunks[..6].iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
        assert_eq!(chunks[6]["choices"][0]["finish_reason"], "stop");
        assert_eq!(chunks[7]["choices"], json!([]));
        assert_eq!(chunks[7]["usage"]["completion_tokens"], 5);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn chat_stream_without_include_usage_has_no_usage_chunk() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = r#"{"stream":true,"messages":[]}"#;
        let evs = scan(
            &post(&lab, "/v1/chat/completions", "tokens=2", body)
                .await
                .chunks,
        );
        assert_eq!(evs.len(), 1 + 2 + 1 + 1);
        assert!(evs[..4].iter().all(|e| data(e).get("usage").is_none()));
        let forced = scan(
            &post(&lab, "/v1/chat/completions", "tokens=2,usage=always", body)
                .await
                .chunks,
        );
        assert_eq!(forced.len(), 1 + 2 + 1 + 1 + 1);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn chat_tool_call_streams_arguments_in_several_deltas_that_parse_whole() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = format!(r#"{{"stream":true,"messages":[{{"role":"user","content":"weather?"}}],"tools":{TOOLS_CHAT}}}"#);
        let evs = scan(&post(&lab, "/v1/chat/completions", "args-chunk=4", &body).await.chunks);
        let chunks: Vec<Value> = evs[..evs.len() - 1].iter().map(data).collect();
        let first = &chunks[0]["choices"][0]["delta"]["tool_calls"][0];
        assert_eq!(first["function"]["name"], "get_weather");
        assert_eq!(first["type"], "function");
        assert!(first["id"].as_str().is_some_and(|id| id.starts_with("call_")));
        let pieces: Vec<&str> = chunks[1..chunks.len() - 1]
            .iter()
            .map(|c| {
                c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .expect("arguments piece")
            })
            .collect();
        assert!(pieces.len() >= 3, "{pieces:?}");
        let args: Value = serde_json::from_str(&pieces.concat()).expect("arguments parse whole");
        assert_eq!(args, weather_args());
        assert!(serde_json::from_str::<Value>(&pieces[..pieces.len() - 1].concat()).is_err());
        assert_eq!(chunks.last().expect("chunks")["choices"][0]["finish_reason"], "tool_calls");
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn chat_without_stream_answers_one_completion_with_the_same_text() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let r = post(
            &lab,
            "/v1/chat/completions",
            "tokens=7",
            r#"{"messages":[]}"#,
        )
        .await;
        assert_eq!(r.header("content-type"), Some("application/json"));
        let v = r.json();
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["choices"][0]["message"]["content"], text(7));
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], 7);
        let tool = post(
            &lab,
            "/v1/chat/completions",
            "",
            &format!(r#"{{"tools":{TOOLS_CHAT}}}"#),
        )
        .await
        .json();
        let call = &tool["choices"][0]["message"]["tool_calls"][0]["function"];
        let args: Value =
            serde_json::from_str(call["arguments"].as_str().expect("args")).expect("JSON");
        assert_eq!(args, weather_args());
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn responses_stream_is_typed_events_numbered_from_zero_ending_in_completed() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let r = post(
            &lab,
            "/v1/responses",
            "tokens=4",
            r#"{"model":"m","stream":true,"input":"hi"}"#,
        )
        .await;
        let evs = scan(&r.chunks);
        let types: Vec<&str> = evs.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(
            types,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (n, e) in evs.iter().enumerate() {
            let d = data(e);
            assert_eq!(d["type"], e.event_type.as_str());
            assert_eq!(d["sequence_number"], n);
        }
        let done = data(evs.last().expect("events"));
        assert_eq!(done["response"]["status"], "completed");
        assert_eq!(done["response"]["output"][0]["content"][0]["text"], text(4));
        assert_eq!(done["response"]["usage"]["output_tokens"], 4);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn responses_max_output_tokens_ends_with_response_incomplete() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = r#"{"stream":true,"input":"hi","max_output_tokens":2}"#;
        let evs = scan(&post(&lab, "/v1/responses", "tokens=9", body).await.chunks);
        let last = evs.last().expect("events");
        assert_eq!(last.event_type, "response.incomplete");
        let d = data(last);
        assert_eq!(
            d["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );
        assert_eq!(d["response"]["output"][0]["content"][0]["text"], text(2));
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn responses_function_call_arguments_stream_and_finish_in_the_item() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = format!(r#"{{"stream":true,"input":"weather?","tools":{TOOLS_RESPONSES}}}"#);
        let evs = scan(&post(&lab, "/v1/responses", "", &body).await.chunks);
        let added = evs
            .iter()
            .find(|e| e.event_type == "response.output_item.added")
            .expect("added");
        let item = data(added)["item"].clone();
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["name"], "get_weather");
        let pieces: String = evs
            .iter()
            .filter(|e| e.event_type == "response.function_call_arguments.delta")
            .map(|e| {
                let d = data(e);
                assert_eq!(d["item_id"], item["id"]);
                d["delta"].as_str().expect("delta").to_owned()
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<Value>(&pieces).expect("JSON"),
            weather_args()
        );
        let done = data(evs.last().expect("events"));
        assert_eq!(done["type"], "response.completed");
        assert_eq!(done["response"]["output"][0]["arguments"], pieces.as_str());
        assert_eq!(done["response"]["output"][0]["call_id"], item["call_id"]);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn messages_stream_has_start_blocks_ping_delta_with_stop_reason_and_stop() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = r#"{"model":"claude-lab","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
        let evs = scan(&post(&lab, "/v1/messages", "tokens=3", body).await.chunks);
        let types: Vec<&str> = evs.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(
            types,
            [
                "message_start",
                "content_block_start",
                "ping",
                "content_block_delta",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert!(evs.iter().all(|e| data(e)["type"] == e.event_type.as_str()));
        let text3: String = evs[3..6]
            .iter()
            .map(|e| data(e)["delta"]["text"].as_str().expect("text").to_owned())
            .collect();
        assert_eq!(text3, text(3));
        let delta = data(&evs[7]);
        assert_eq!(delta["delta"]["stop_reason"], "end_turn");
        assert_eq!(delta["usage"]["output_tokens"], 3);
        assert_eq!(data(&evs[0])["message"]["model"], "claude-lab");
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn messages_tool_use_streams_input_json_deltas_and_stops_for_tool_use() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let body = format!(r#"{{"max_tokens":64,"stream":true,"messages":[{{"role":"user","content":"w"}}],"tools":{TOOLS_MESSAGES}}}"#);
        let evs = scan(&post(&lab, "/v1/messages", "", &body).await.chunks);
        let block = data(&evs[1])["content_block"].clone();
        assert_eq!(block["type"], "tool_use");
        assert_eq!(block["name"], "get_weather");
        let partial: String = evs
            .iter()
            .filter(|e| e.event_type == "content_block_delta")
            .map(|e| {
                let d = data(e);
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"].as_str().expect("partial").to_owned()
            })
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&partial).expect("JSON"), weather_args());
        let stop = evs.iter().find(|e| e.event_type == "message_delta").expect("delta");
        assert_eq!(data(stop)["delta"]["stop_reason"], "tool_use");
        // The second turn (a tool result last) is answered with text.
        let second = format!(r#"{{"max_tokens":64,"messages":[{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t","content":"sunny"}}]}}],"tools":{TOOLS_MESSAGES}}}"#);
        let v = post(&lab, "/v1/messages", "tokens=2", &second).await.json();
        assert_eq!(v["content"][0]["text"], text(2));
        assert_eq!(v["stop_reason"], "end_turn");
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn bad_requests_get_the_providers_error_shape_with_the_reason() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let r = post(&lab, "/v1/chat/completions", "", "[]").await;
        assert_eq!(r.status, 400);
        let v = r.json();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("JSON object"))
        );
        let r = post(&lab, "/v1/messages", "tokns=3", "{}").await;
        assert_eq!(r.status, 400);
        let v = r.json();
        assert_eq!(v["type"], "error");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown key 'tokns'"))
        );
        let mut c = lab.connect().await;
        let r = c.request("GET", "/v1/responses", &[], b"").await;
        assert_eq!(r.status, 405);
        assert_eq!(r.header("allow"), Some("POST"));
        lab.stop().await;
    })
    .await;
}
