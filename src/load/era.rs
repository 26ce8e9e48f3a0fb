//! Which MCP era the load client speaks, and how it speaks 2026-07-28.
//!
//! Why: a 2026-07-28 server has no `initialize`, no session and no resumption, so a cut call
//! can only be re-issued with a new id — and that is safe only for a tool declared idempotent.
//! This module keeps every era difference of the load client in one place; `session.rs` and
//! `call.rs` hold one small hook each.
//!
//! Invariants:
//! - Detection ([`EraChoice::Auto`], the default) follows the spec's backward-compatibility
//!   rule: `server/discover` is sent first as a modern request; a result listing 2026-07-28
//!   makes the session modern; any other HTTP answer (4xx, a body that is not a modern result)
//!   falls back to `initialize`. A failure below HTTP (refused, timeout, not HTTP) is the
//!   target's failure, not an era verdict, and is returned as is.
//! - Every modern POST carries `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` (for
//!   `tools/call`, Base64-sentinel encoded when not plain ASCII) and the three
//!   `io.modelcontextprotocol/*` `_meta` keys; never `Mcp-Session-Id` or `Last-Event-ID`.
//! - After a cut of a modern call (no cursor to resume from): strict re-sends it with a new id
//!   (and the call's `Idempotency-Key`) iff the tool's `tools/list` annotations declare
//!   `idempotentHint: true`, else the call fails with the reason `not-idempotent`; retry
//!   re-sends whatever the annotations say; naive takes the truncated stream as the answer.

use base64::Engine as _;
use serde_json::{Value, json};

use super::config::Policy;
use super::policy::Judgement;
use super::stats::CallEnd;

/// The modern revision the client speaks.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Which era `tearline load` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EraChoice {
    /// Probe with `server/discover`, fall back to `initialize` (the spec's dual-era client).
    #[default]
    Auto,
    /// Always `initialize` (2025-11-25 offered): sessions and `Last-Event-ID` resumption.
    Legacy,
    /// Always 2026-07-28: fail if the server does not discover as modern.
    Modern,
}

/// The `server/discover` request body (id 0).
pub fn discover_body() -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {}})
        .to_string()
        .into_bytes()
}

/// The `tools/list` request body.
pub fn list_body(id: u64) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}})
        .to_string()
        .into_bytes()
}

/// Whether a `server/discover` answer proves a modern server.
pub fn is_modern_discover(answer: &Value) -> bool {
    answer["result"]["supportedVersions"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == MODERN_VERSION))
}

/// Whether `tool` is declared idempotent in a `tools/list` answer (absent: not idempotent,
/// the spec's default for `idempotentHint`).
pub fn declared_idempotent(list_answer: &Value, tool: &str) -> bool {
    list_answer["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
        .is_some_and(|t| t["annotations"]["idempotentHint"] == json!(true))
}

/// A POST body made modern: the `_meta` keys added, plus the `Mcp-Method` and `Mcp-Name`
/// header values. `None` if `body` is not a JSON-RPC object (sent unchanged).
pub fn modernize(body: &[u8]) -> Option<(Vec<u8>, String, Option<String>)> {
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let method = v["method"].as_str()?.to_owned();
    if !v["params"].is_object() {
        v["params"] = json!({});
    }
    if !v["params"]["_meta"].is_object() {
        v["params"]["_meta"] = json!({});
    }
    let meta = &mut v["params"]["_meta"];
    meta["io.modelcontextprotocol/protocolVersion"] = json!(MODERN_VERSION);
    meta["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "tearline-load", "version": env!("CARGO_PKG_VERSION")});
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let name = match method.as_str() {
        "tools/call" | "prompts/get" => v["params"]["name"].as_str().map(header_value),
        "resources/read" => v["params"]["uri"].as_str().map(header_value),
        _ => None,
    };
    Some((v.to_string().into_bytes(), method, name))
}

/// A header value per the spec's Value Encoding: plain if visible ASCII without surrounding
/// whitespace and not itself sentinel-shaped, else `=?base64?…?=`.
pub fn header_value(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes().all(|b| (0x20..0x7f).contains(&b))
        && s.trim() == s
        && !(s.starts_with("=?base64?") && s.ends_with("?="));
    if plain {
        s.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(s)
        )
    }
}

/// What a modern call does after its stream stopped without the answer (no cursor: 2026-07-28
/// streams cannot be resumed). `None`: re-issue with a new id. `Some`: the call ends, with the
/// reason to count when it failed.
pub fn after_cut(
    policy: Policy,
    repeat_safe: bool,
    judged: Judgement,
) -> Option<(CallEnd, Option<&'static str>)> {
    match policy {
        // A careless client: whatever arrived is the answer.
        Policy::Naive => Some(match judged {
            Judgement::Valid => (CallEnd::Ok, None),
            _ => (CallEnd::SilentlyLost, None),
        }),
        Policy::Retry => None,
        Policy::Strict if repeat_safe => None,
        Policy::Strict => Some((CallEnd::Failed, Some("not-idempotent"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modernize_adds_meta_and_header_values() {
        let body = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"caf\u00e9","arguments":{}}}"#;
        let (b, method, name) = modernize(body).expect("json-rpc");
        let v: Value = serde_json::from_slice(&b).unwrap_or_default();
        assert_eq!(method, "tools/call");
        assert_eq!(name.as_deref(), Some("=?base64?Y2Fmw6k=?="));
        assert_eq!(
            v["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            MODERN_VERSION
        );
        assert_eq!(header_value("search"), "search");
        assert_eq!(header_value(" x"), "=?base64?IHg=?=");
    }

    #[test]
    fn strict_reissues_only_idempotent_calls_retry_all_and_naive_accepts_the_cut() {
        assert!(after_cut(Policy::Strict, true, Judgement::Missing).is_none());
        assert!(after_cut(Policy::Retry, false, Judgement::Missing).is_none());
        assert_eq!(
            after_cut(Policy::Strict, false, Judgement::Missing),
            Some((CallEnd::Failed, Some("not-idempotent")))
        );
        assert_eq!(
            after_cut(Policy::Naive, false, Judgement::Missing),
            Some((CallEnd::SilentlyLost, None))
        );
    }

    #[test]
    fn idempotency_is_read_from_annotations() {
        let list = json!({"result": {"tools": [
            {"name": "a", "annotations": {"idempotentHint": true}},
            {"name": "b", "annotations": {"idempotentHint": false}},
            {"name": "c"}]}});
        assert!(declared_idempotent(&list, "a"));
        assert!(!declared_idempotent(&list, "b"));
        assert!(!declared_idempotent(&list, "c"));
        assert!(!declared_idempotent(&list, "zz"));
    }
}
