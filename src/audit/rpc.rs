//! JSON-RPC facts the audit needs from POST bodies, JSON response bodies and SSE data.
//!
//! Invariants: parsing never fails loudly — bytes that are not JSON-RPC yield no messages;
//! a batch (JSON array) yields its members in order; ids keep their JSON type (`7` and `"7"`
//! are different ids, rendered as JSON text); params are reduced to a 64-bit hash of their
//! serialized form, so a re-issued call is recognised without keeping its payload.

use serde_json::Value;

/// One JSON-RPC message, reduced to what the audit judges.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcMessage {
    /// A request (has `method` and `id`).
    Request {
        /// The id as JSON text (`7`, `"a"`).
        id: String,
        /// The method name.
        method: String,
        /// FNV-1a 64 of the serialized `params` without `_meta` (0 when absent).
        params_hash: u64,
        /// `params.protocolVersion` of an `initialize` request.
        protocol_version: Option<String>,
        /// `params._meta.progressToken`, as JSON text.
        progress_token: Option<String>,
    },
    /// A notification (has `method`, no `id`).
    Notification {
        /// The method name.
        method: String,
        /// `params.requestId` of `notifications/cancelled`, as JSON text.
        cancelled: Option<String>,
        /// `(params.progressToken as JSON text, params.progress)` of
        /// `notifications/progress`.
        progress: Option<(String, f64)>,
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

/// The session handshake's method. Not a call the audit judges for loss or re-sends: every
/// client opens its session with the same `initialize` (the same id, 0 or 1, and the same
/// params from the same SDK) before it has a session id, so on the wire one client's retry of
/// a cut handshake is byte for byte another client's first one; whether a session opened is
/// what that session's later requests show.
pub const INITIALIZE: &str = "initialize";

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

/// Reads the response facts from the head of a message too long to keep whole (a 4 MiB tool
/// result): the top-level `id` and whether `result` or `error` follows, scanning only the
/// object's first level. `None` unless the head shows a response with an id.
pub fn parse_head(bytes: &[u8]) -> Option<RpcMessage> {
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let (mut id, mut kind) = (None, None);
    loop {
        i = skip_ws(bytes, i);
        let (_, after) = string_end(bytes, i)?;
        let key = &bytes[i + 1..after - 1];
        i = skip_ws(bytes, after);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i = skip_ws(bytes, i + 1);
        match key {
            b"result" | b"error" => {
                kind = Some(key == b"error");
                // The value is the large part: what follows it is not needed.
                if id.is_some() {
                    break;
                }
            }
            _ => {}
        }
        let end = value_end(bytes, i)?;
        if key == b"id" {
            let v: Value = serde_json::from_slice(&bytes[i..end]).ok()?;
            id = Some(v.to_string());
        }
        i = skip_ws(bytes, end);
        match bytes.get(i) {
            Some(b',') => i += 1,
            _ => break,
        }
        if id.is_some() && kind.is_some() {
            break;
        }
    }
    Some(RpcMessage::Response {
        id: id?,
        error: kind?,
        protocol_version: None,
    })
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    i
}

/// The index after the JSON string starting at `i`, if it is complete.
fn string_end(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some((i, j + 1)),
            _ => j += 1,
        }
    }
    None
}

/// The index after the JSON value starting at `i`, if it is complete within `b`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i).map(|(_, e)| e),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?.1;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']') && !c.is_ascii_whitespace())
            {
                j += 1;
            }
            (j < b.len()).then_some(j)
        }
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
                params_hash: params.map_or(0, params_hash),
                protocol_version: string_at(params, "protocolVersion"),
                progress_token: params
                    .and_then(|p| p.get("_meta")?.get("progressToken"))
                    .map(Value::to_string),
            },
            None => RpcMessage::Notification {
                progress: (method == "notifications/progress")
                    .then(|| {
                        let p = params?;
                        Some((
                            p.get("progressToken")?.to_string(),
                            p.get("progress")?.as_f64()?,
                        ))
                    })
                    .flatten(),
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

/// The hash a re-issue is matched by: `params` without `_meta`, because a re-issued request
/// legitimately carries a new `progressToken` there (and, in 2026-07-28, per-request
/// client metadata); the call itself is `name` + `arguments`.
fn params_hash(params: &Value) -> u64 {
    match params.as_object() {
        Some(obj) if obj.contains_key("_meta") => {
            let mut p = obj.clone();
            p.remove("_meta");
            crate::units::fnv1a(Value::Object(p).to_string().as_bytes())
        }
        _ => crate::units::fnv1a(params.to_string().as_bytes()),
    }
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
                cancelled: Some("7".into()),
                progress: None,
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
    fn requests_yield_their_progress_token_only_when_they_declare_one() {
        let r = parse(
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"tl-9-4"}}}"#,
        );
        assert!(
            matches!(&r[0], RpcMessage::Request { progress_token: Some(t), .. }
            if t == "\"tl-9-4\"")
        );
        let n = parse(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a"}}"#);
        assert!(matches!(
            &n[0],
            RpcMessage::Request {
                progress_token: None,
                ..
            }
        ));
    }

    #[test]
    fn progress_notifications_yield_token_and_value() {
        let p = parse(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-1","progress":3,"total":9}}"#,
        );
        assert!(
            matches!(&p[0], RpcMessage::Notification { progress: Some((t, v)), .. }
            if t == "\"p-1\"" && *v == 3.0)
        );
        let q = parse(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":3}}"#,
        );
        assert!(matches!(
            &q[0],
            RpcMessage::Notification { progress: None, .. }
        ));
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

    #[test]
    fn head_of_a_long_response_yields_its_id_and_kind() {
        let head = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"abcabc"#;
        assert_eq!(
            parse_head(head),
            Some(RpcMessage::Response {
                id: "7".to_owned(),
                error: false,
                protocol_version: None
            })
        );
        let err = br#"{"error":{"code":-1,"message":"x"},"id":"a-1","jsonrpc":"2.0"#;
        assert_eq!(
            parse_head(err),
            Some(RpcMessage::Response {
                id: "\"a-1\"".to_owned(),
                error: true,
                protocol_version: None
            })
        );
        assert_eq!(
            parse_head(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"#),
            None
        );
        assert_eq!(parse_head(b"not json"), None);
        assert_eq!(parse_head(br#"{"id":"#), None);
    }
}
