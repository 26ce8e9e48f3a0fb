//! JSON-RPC facts the audit needs from POST bodies, JSON response bodies and SSE data.
//!
//! Invariants: parsing never fails loudly — bytes that are not JSON-RPC yield no messages;
//! a batch (JSON array) yields its members in order; ids keep their JSON type (`7` and `"7"`
//! are different ids, rendered as JSON text); params are reduced to a 64-bit hash of their
//! serialized form, so a re-issued call is recognised without keeping its payload.

use serde_json::Value;

/// One JSON-RPC message, reduced to what the audit judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcMessage {
    /// A request (has `method` and `id`).
    Request {
        /// The id as JSON text (`7`, `"a"`).
        id: String,
        /// The method name.
        method: String,
        /// FNV-1a 64 of the serialized `params` (0 when absent).
        params_hash: u64,
        /// `params.protocolVersion` of an `initialize` request.
        protocol_version: Option<String>,
    },
    /// A notification (has `method`, no `id`).
    Notification {
        /// The method name.
        method: String,
        /// `params.requestId` of `notifications/cancelled`, as JSON text.
        cancelled: Option<String>,
    },
    /// A response (has `result` or `error`, and an `id`).
    Response {
        /// The id as JSON text.
        id: String,
        /// True if and only if it carries `error`.
        error: bool,
        /// `result.protocolVersion` (the negotiated version of an `initialize` response).
        protocol_version: Option<String>,
    },
}

/// The method MCP uses for tool calls; only these calls yield `pending-call`.
pub const TOOLS_CALL: &str = "tools/call";

/// Parses a JSON-RPC message or batch; anything else yields an empty list.
pub fn parse(bytes: &[u8]) -> Vec<RpcMessage> {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return Vec::new();
    };
    match value {
        Value::Array(items) => items.iter().filter_map(message).collect(),
        other => message(&other).into_iter().collect(),
    }
}

fn message(v: &Value) -> Option<RpcMessage> {
    let obj = v.as_object()?;
    let id = obj
        .get("id")
        .filter(|id| !id.is_null())
        .map(Value::to_string);
    if let Some(method) = obj.get("method").and_then(Value::as_str) {
        let params = obj.get("params");
        return Some(match id {
            Some(id) => RpcMessage::Request {
                id,
                method: method.to_string(),
                params_hash: params.map_or(0, |p| fnv1a(p.to_string().as_bytes())),
                protocol_version: string_at(params, "protocolVersion"),
            },
            None => RpcMessage::Notification {
                method: method.to_string(),
                cancelled: (method == "notifications/cancelled")
                    .then(|| {
                        params
                            .and_then(|p| p.get("requestId"))
                            .map(Value::to_string)
                    })
                    .flatten(),
            },
        });
    }
    let id = id?;
    if let Some(result) = obj.get("result") {
        return Some(RpcMessage::Response {
            id,
            error: false,
            protocol_version: string_at(Some(result), "protocolVersion"),
        });
    }
    obj.get("error").map(|_| RpcMessage::Response {
        id,
        error: true,
        protocol_version: None,
    })
}

fn string_at(v: Option<&Value>, key: &str) -> Option<String> {
    v?.get(key)?.as_str().map(str::to_string)
}

/// FNV-1a 64-bit hash.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// True if and only if `version` is MCP 2026-07-28 or later (no resumption: re-issue instead).
/// Versions are ISO dates, so they order as strings.
pub fn is_stateless_version(version: &str) -> bool {
    version >= "2026-07-28"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_yields_requests_notifications_and_keeps_id_types() {
        let body = br#"[{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a"}},
            {"jsonrpc":"2.0","id":"7","method":"ping"},
            {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}]"#;
        let msgs = parse(body);
        assert_eq!(msgs.len(), 3);
        assert!(
            matches!(&msgs[0], RpcMessage::Request { id, method, .. } if id == "7" && method == "tools/call")
        );
        assert!(matches!(&msgs[1], RpcMessage::Request { id, .. } if id == "\"7\""));
        assert_eq!(
            msgs[2],
            RpcMessage::Notification {
                method: "notifications/cancelled".into(),
                cancelled: Some("7".into())
            }
        );
    }

    #[test]
    fn responses_and_initialize_versions_are_read() {
        let r = parse(br#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}"#);
        assert_eq!(
            r,
            vec![RpcMessage::Response {
                id: "1".into(),
                error: false,
                protocol_version: Some("2025-11-25".into())
            }]
        );
        let e = parse(br#"{"jsonrpc":"2.0","id":"x","error":{"code":-1,"message":"m"}}"#);
        assert!(matches!(&e[0], RpcMessage::Response { error: true, .. }));
        let i =
            parse(br#"{"id":0,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}"#);
        assert!(
            matches!(&i[0], RpcMessage::Request { protocol_version: Some(v), .. } if v == "2026-07-28")
        );
    }

    #[test]
    fn garbage_and_partial_json_yield_nothing() {
        assert!(parse(b"{\"id\":1,\"resu").is_empty());
        assert!(parse(b"not json").is_empty());
        assert!(parse(b"{\"id\":1}").is_empty());
    }

    #[test]
    fn same_params_hash_equal_and_versions_order() {
        let a =
            parse(br#"{"id":1,"method":"tools/call","params":{"name":"f","arguments":{"u":1}}}"#);
        let b =
            parse(br#"{"id":2,"method":"tools/call","params":{"name":"f","arguments":{"u":1}}}"#);
        let ha = match &a[0] {
            RpcMessage::Request { params_hash, .. } => *params_hash,
            _ => 0,
        };
        let hb = match &b[0] {
            RpcMessage::Request { params_hash, .. } => *params_hash,
            _ => 1,
        };
        assert_eq!(ha, hb);
        assert!(is_stateless_version("2026-07-28"));
        assert!(!is_stateless_version("2025-11-25"));
    }
}
