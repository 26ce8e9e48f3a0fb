//! The lab's 2026-07-28 surface over raw sockets, the way a user checks it with curl: a
//! dual-era server (the default) answers a modern `tools/list` with cache hints, rejects a
//! header that disagrees with the body with the spec's -32020, still negotiates a legacy
//! revision for `initialize`, runs the `input_required` round trip, acknowledges
//! `subscriptions/listen`, counts `append` side effects and keeps events under a size cap.

use crate::common::lab_client::{ACCEPT_BOTH, JSON, Lab, event_id, within};
use serde_json::{Value, json};
use tearline::lab::LabConfig;

const V: &str = "2026-07-28";

/// Extra request headers of one case.
type Headers<'a> = &'a [(&'a str, &'a str)];

fn modern_body(id: u64, method: &str, params: Value) -> Vec<u8> {
    let mut params = params;
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(V);
    params["_meta"]["io.modelcontextprotocol/clientInfo"] = json!({"name": "t", "version": "1"});
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        .to_string()
        .into_bytes()
}

#[tokio::test]
async fn modern_tools_list_gets_cache_hints_and_annotations_without_a_session() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let mut c = lab.connect().await;
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/list"),
        ];
        let r = c
            .request("POST", "/mcp", &h, &modern_body(1, "tools/list", json!({})))
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(r.header("mcp-session-id").is_none());
        let v = r.json();
        assert_eq!(v["id"], 1);
        assert_eq!(v["result"]["resultType"], "complete");
        assert!(v["result"]["ttlMs"].as_u64().is_some(), "{v}");
        assert!(matches!(
            v["result"]["cacheScope"].as_str(),
            Some("public" | "private")
        ));
        let tools = v["result"]["tools"].as_array().cloned().unwrap_or_default();
        let hint = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["annotations"]["idempotentHint"].clone())
        };
        assert_eq!(hint("append"), Some(json!(false)));
        assert_eq!(hint("search"), Some(json!(true)));
        assert_eq!(hint("confirm"), Some(json!(true)));
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_header_that_disagrees_with_the_body_gets_400_header_mismatch() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let mut c = lab.connect().await;
        let list = modern_body(2, "tools/list", json!({}));
        let cases: [(Headers, &[u8]); 4] = [
            (
                &[("MCP-Protocol-Version", V), ("Mcp-Method", "tools/call")],
                &list,
            ),
            (&[("MCP-Protocol-Version", V)], &list),
            (&[("Mcp-Method", "tools/list")], &list),
            (
                &[
                    ("MCP-Protocol-Version", V),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "fetch"),
                ],
                &modern_body(2, "tools/call", json!({"name": "search", "arguments": {}})),
            ),
        ];
        for (extra, body) in cases {
            let mut h = vec![ACCEPT_BOTH, JSON];
            h.extend_from_slice(extra);
            let r = c.request("POST", "/mcp", &h, body).await;
            assert_eq!(r.status, 400, "{extra:?}");
            assert_eq!(r.json()["error"]["code"], -32020, "{extra:?}");
            assert_eq!(r.json()["id"], 2);
        }
        // The Base64 sentinel is decoded before comparing.
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "=?base64?c2VhcmNo?="),
        ];
        let body = modern_body(
            3,
            "tools/call",
            json!({"name": "search", "arguments": {"query": "q"}}),
        );
        let r = c.request("POST", "/mcp", &h, &body).await;
        assert_eq!(r.status, 200);
        assert!(
            r.chunks.iter().all(|e| event_id(e).is_none()),
            "no event ids in 2026-07-28"
        );
        // A version the lab does not serve: -32022 listing what it does.
        let mut body: Value =
            serde_json::from_slice(&modern_body(4, "tools/list", json!({}))).unwrap_or_default();
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", "2099-01-01"),
            ("Mcp-Method", "tools/list"),
        ];
        let r = c
            .request("POST", "/mcp", &h, body.to_string().as_bytes())
            .await;
        assert_eq!(r.status, 400);
        assert_eq!(r.json()["error"]["code"], -32022);
        assert_eq!(r.json()["error"]["data"]["supported"][0], V);
        // An unknown method: 404 with -32601.
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "ping"),
        ];
        let r = c
            .request("POST", "/mcp", &h, &modern_body(5, "ping", json!({})))
            .await;
        assert_eq!(r.status, 404);
        assert_eq!(r.json()["error"]["code"], -32601);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_dual_era_lab_negotiates_the_legacy_revision_asked_for_and_discovers_both() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let mut c = lab.connect().await;
        for asked in ["2025-03-26", "2025-06-18", "2025-11-25"] {
            let init = format!(r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{asked}"}}}}"#);
            let r = c.request("POST", "/mcp", &[ACCEPT_BOTH, JSON], init.as_bytes()).await;
            assert_eq!(r.status, 200);
            assert_eq!(r.json()["result"]["protocolVersion"], asked);
            assert!(r.header("mcp-session-id").is_some());
        }
        let h = [ACCEPT_BOTH, JSON, ("MCP-Protocol-Version", V), ("Mcp-Method", "server/discover")];
        let r = c.request("POST", "/mcp", &h, &modern_body(1, "server/discover", json!({}))).await;
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["result"]["supportedVersions"][0], V);
        assert!(v["result"]["supportedVersions"].as_array().is_some_and(|a| a.contains(&json!("2025-11-25"))));
        assert!(v["result"]["ttlMs"].is_u64());
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn confirm_answers_input_required_then_the_retry_gets_the_result() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let mut c = lab.connect().await;
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "confirm"),
        ];
        let first = modern_body(
            1,
            "tools/call",
            json!({"name": "confirm", "arguments": {"message": "go?"}}),
        );
        let r = c.request("POST", "/mcp", &h, &first).await;
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["result"]["resultType"], "input_required");
        assert_eq!(
            v["result"]["inputRequests"]["confirm"]["method"],
            "elicitation/create"
        );
        let state = v["result"]["requestState"].clone();
        let retry = modern_body(
            2,
            "tools/call",
            json!({"name": "confirm", "arguments": {"message": "go?"},
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}},
            "requestState": state}),
        );
        let r = c.request("POST", "/mcp", &h, &retry).await;
        assert_eq!(r.json()["result"]["content"][0]["text"], "confirmed: go?");
        assert_eq!(r.json()["result"]["resultType"], "complete");
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn subscriptions_listen_is_acknowledged_first_with_the_honoured_filter() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let mut c = lab.connect().await;
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "subscriptions/listen"),
        ];
        let body = modern_body(
            7,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        );
        c.send("POST", "/mcp", &h, &body).await;
        let head = c.head().await;
        assert_eq!(head.status, 200);
        assert_eq!(head.header("content-type"), Some("text/event-stream"));
        let first = c.chunk().await.expect("acknowledgement event");
        let text = String::from_utf8_lossy(&first);
        let data = text
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or("");
        let v: Value = serde_json::from_str(data).unwrap_or_default();
        assert_eq!(v["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            7
        );
        assert_eq!(
            v["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        drop(c);
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn append_counts_each_execution_and_a_blob_fits_the_event_cap() {
    within(async {
        let cfg = LabConfig {
            max_event_bytes: Some(1 << 20),
            ..LabConfig::default()
        };
        let effects = cfg.side_effects.clone();
        let lab = Lab::start(cfg).await;
        let mut c = lab.connect().await;
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "append"),
        ];
        for want in 1..=2u64 {
            let body = modern_body(
                want,
                "tools/call",
                json!({"name": "append", "arguments": {}}),
            );
            let r = c.request("POST", "/mcp", &h, &body).await;
            assert_eq!(r.status, 200);
            assert_eq!(effects.get(), want);
            let last =
                String::from_utf8_lossy(r.chunks.last().map(Vec::as_slice).unwrap_or_default())
                    .into_owned();
            assert!(last.contains(&format!("appended: {want}")), "{last}");
        }
        let h = [
            ACCEPT_BOTH,
            JSON,
            ("MCP-Protocol-Version", V),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "blob"),
        ];
        let body = modern_body(9, "tools/call", json!({"name": "blob", "arguments": {}}));
        let r = c.request("POST", "/mcp", &h, &body).await;
        assert_eq!(r.status, 200);
        let biggest = r.chunks.iter().map(Vec::len).max().unwrap_or(0);
        assert!(
            (900_000..=1 << 20).contains(&biggest),
            "largest event {biggest} bytes"
        );
        let body = modern_body(
            10,
            "tools/call",
            json!({"name": "blob", "arguments": {"size": 2_000_000}}),
        );
        let r = c.request("POST", "/mcp", &h, &body).await;
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["error"]["code"], -32602);
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("--max-event-bytes")),
            "{v}"
        );
        lab.stop().await;
    })
    .await;
}
