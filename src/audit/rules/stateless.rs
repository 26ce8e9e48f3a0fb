//! Rules `reexecuted` and `sent-after-cancel` (re-execution and cancel): the two judgements an
//! MCP 2026-07-28 stream adds — a repeated side effect and output after cancellation. They
//! share one state (each 2026-07-28 `tools/call`: its tool, its progress token, whether it
//! visibly started), read from one parse of the POST and of each delivered message.
//!
//! Why: a 2026-07-28 stream cannot be resumed; a client recovers a cut call only by sending it
//! again (`reissued`: only a proven re-send counts, see rule `reissue`). That is safe for a
//! tool whose annotations declare it repeat-safe, and a likely double side effect otherwise.
//! And closing a response stream cancels its request: the server must send nothing more for
//! it, on any stream.
//!
//! Rules (precise):
//! - Tool annotations are read from every `tools/list` result delivered on the wire (any era,
//!   any stream). A tool is *repeat-safe* if and only if its last annotations seen say
//!   `readOnlyHint: true` or `idempotentHint: true` (the spec's `ToolAnnotations`: both default
//!   to false; `idempotentHint` matters only when `readOnlyHint` is false). For a tool never
//!   seen in a `tools/list` (the client may have listed before the proxy started) the proxy
//!   cannot know: the judgement is `unknown`, naming the tool and the spec's defaults.
//! - A 2026-07-28 call has *visibly started* if and only if, before its stream was cut or
//!   closed, that stream delivered a progress notification or any bytes of a response (a whole
//!   event, or the head of a long one), or the cut tore an event after at least one byte, or
//!   the cut fell inside its JSON (non-SSE) response body after some of it was delivered.
//! - The same notion of a visible start is recorded on the ledger's call (`Call::started`) for
//!   every POST call of any era, so that rule `abandoned` can say of an `unproven-resend` that
//!   the tool may have run twice; nothing else here judges legacy streams.
//! - `reexecuted` (class duplicate) iff a call that visibly started is provably re-sent (rule
//!   `reissue`, handed over as a `Resent` ledger event: both the re-send and the first
//!   execution are then proven) and its tool's annotations seen say it is not repeat-safe.
//!   Evidence: both ids, the tool, what was delivered first. A call cut before any byte
//!   reached the client is never `reexecuted`: from the wire, its first execution is not
//!   visible (the server may still have run it: a lost acknowledgement).
//! - A 2026-07-28 stream is *closed* when its last leg ends without a clean body end (a proxy
//!   cut, or the connection closed by either side); its unanswered calls are then cancelled.
//! - `sent-after-cancel` (class server-bug) iff, after a call was cancelled, a stream delivers a
//!   response with its id or a progress notification with its progress token, and that stream
//!   carries no call of its own with that id or token (request ids and tokens repeat across
//!   session-less clients). Reported once per cancelled call.
//!
//! Invariants: memory is bounded — at most [`MAX_TOOLS`] tools, [`MAX_CALL_STREAMS`] streams'
//! calls (those of forgotten streams are dropped first) and [`MAX_CANCELLED`] cancelled calls,
//! each kept for the audit's `grace`. Nothing here parses bytes that are not 2026-07-28 POST
//! bodies or delivered server messages.

use std::collections::{HashMap, VecDeque};

use crate::wire::CutPoint;
use serde_json::Value;
use tokio::time::Instant;

use crate::audit::finding::{Finding, FindingKind, StreamRef};
use crate::audit::ledger::{Ledger, Resent};
use crate::audit::rpc::{self, RpcMessage, TOOLS_CALL, is_stateless_version};
use crate::audit::rule::{CutSeen, LegEnded, RequestView, Rule};
use crate::audit::stream::{Origin, StreamKey};

/// Tools whose annotations are remembered, at most.
pub const MAX_TOOLS: usize = 4096;
/// Streams whose 2026-07-28 calls are remembered, at most.
pub const MAX_CALL_STREAMS: usize = 65_536;
/// Cancelled calls remembered, at most (oldest forgotten first).
pub const MAX_CANCELLED: usize = 4096;

/// What a `tools/list` said about one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// `annotations.readOnlyHint` (default false).
    pub read_only: bool,
    /// `annotations.idempotentHint` (default false).
    pub idempotent: bool,
}

impl Hints {
    /// True if and only if calling the tool again cannot add a side effect.
    pub fn repeat_safe(self) -> bool {
        self.read_only || self.idempotent
    }
}

/// One 2026-07-28 call, as its POST showed it.
#[derive(Debug, Clone)]
struct ModernCall {
    id: String,
    tool: Option<String>,
    /// `_meta.progressToken` as JSON text.
    token: Option<String>,
    /// What visibly started it, if anything did.
    started: Option<&'static str>,
}

/// A call whose response stream was closed.
#[derive(Debug, Clone)]
struct Cancelled {
    stream: StreamKey,
    session: Option<String>,
    reference: StreamRef,
    id: String,
    token: Option<String>,
    at: Instant,
    reported: bool,
}

/// The 2026-07-28 rules' state (one state: the calls' tools and tokens serve both judgements).
#[derive(Debug, Default)]
pub struct Stateless {
    hints: HashMap<String, Hints>,
    calls: HashMap<StreamKey, Vec<ModernCall>>,
    cancelled: VecDeque<Cancelled>,
}

impl Stateless {
    /// The annotations seen for `tool`, if any.
    pub fn hints(&self, tool: &str) -> Option<Hints> {
        self.hints.get(tool).copied()
    }
}

/// Reads `tools/list` results: (tool name, hints) for every tool listed.
fn listed_tools(v: &Value) -> Vec<(String, Hints)> {
    let items: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    let flag = |a: &Value, k: &str| a.get(k).and_then(Value::as_bool).unwrap_or(false);
    items
        .into_iter()
        .filter_map(|m| m.get("result")?.get("tools")?.as_array())
        .flatten()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?.to_owned();
            let a = t.get("annotations").cloned().unwrap_or(Value::Null);
            Some((
                name,
                Hints {
                    read_only: flag(&a, "readOnlyHint"),
                    idempotent: flag(&a, "idempotentHint"),
                },
            ))
        })
        .collect()
}

/// Reads the `tools/call` requests of a POST body: (id, tool, progress token).
fn tool_calls(body: &[u8]) -> Vec<ModernCall> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Vec::new();
    };
    let items: Vec<&Value> = match &v {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    items
        .into_iter()
        .filter(|m| m.get("method").and_then(Value::as_str) == Some(TOOLS_CALL))
        .filter_map(|m| {
            let id = m.get("id").filter(|i| !i.is_null())?.to_string();
            let params = m.get("params");
            Some(ModernCall {
                id,
                tool: params
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                token: params
                    .and_then(|p| p.get("_meta"))
                    .and_then(|m| m.get("progressToken"))
                    .map(Value::to_string),
                started: None,
            })
        })
        .collect()
}

/// Marks every call of stream `key` not yet started as visibly started by `what` (the ledger's
/// record, any era: rule `abandoned` reads it for `unproven-resend`).
fn mark_started(l: &mut Ledger, key: StreamKey, what: &'static str) {
    if let Some(s) = l.streams.get_mut(&key) {
        for c in s.calls.iter_mut().filter(|c| c.started.is_none()) {
            c.started = Some(what);
        }
    }
}

impl Stateless {
    fn is_post(l: &Ledger, key: StreamKey) -> bool {
        l.streams
            .get(&key)
            .is_some_and(|s| s.origin == Origin::Post)
    }

    fn is_modern_post(l: &Ledger, key: StreamKey) -> bool {
        l.streams.get(&key).is_some_and(|s| {
            s.origin == Origin::Post && s.version.as_deref().is_some_and(is_stateless_version)
        })
    }

    /// A POST opened stream `key`: remembers its 2026-07-28 tool calls (tool and token).
    fn modern_request(&mut self, l: &Ledger, key: StreamKey, body: &[u8]) {
        if !Self::is_modern_post(l, key) {
            return;
        }
        let calls = tool_calls(body);
        if calls.is_empty() {
            return;
        }
        if self.calls.len() >= MAX_CALL_STREAMS {
            let live = &l.streams;
            self.calls.retain(|k, _| live.contains_key(k));
            if self.calls.len() >= MAX_CALL_STREAMS
                && let Some(oldest) = self.calls.keys().min().copied()
            {
                self.calls.remove(&oldest);
            }
        }
        self.calls.insert(key, calls);
    }

    /// Server messages delivered on stream `key` (`whole`: `data` is the whole message, else
    /// its head): reads `tools/list` annotations, marks the stream's calls as visibly started,
    /// and judges `sent-after-cancel`.
    fn modern_delivery(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        key: StreamKey,
        data: &[u8],
        whole: bool,
    ) {
        let parsed: Option<Value> = if whole {
            serde_json::from_slice(data).ok()
        } else {
            None
        };
        if let Some(v) = &parsed {
            for (name, hints) in listed_tools(v) {
                if self.hints.len() < MAX_TOOLS || self.hints.contains_key(&name) {
                    self.hints.insert(name, hints);
                }
            }
        }
        let msgs = if whole {
            rpc::parse(data)
        } else {
            rpc::parse_head(data).into_iter().collect()
        };
        let what = if !whole {
            Some("the head of a long response")
        } else if msgs
            .iter()
            .any(|m| matches!(m, RpcMessage::Response { .. }))
        {
            Some("a response")
        } else if msgs.iter().any(|m| {
            matches!(
                m,
                RpcMessage::Notification {
                    progress: Some(_),
                    ..
                }
            )
        }) {
            Some("a progress notification")
        } else {
            None
        };
        if let Some(what) = what {
            if let Some(calls) = self.calls.get_mut(&key) {
                for c in calls.iter_mut().filter(|c| c.started.is_none()) {
                    c.started = Some(what);
                }
            }
            mark_started(l, key, what);
        }
        if self.cancelled.is_empty() {
            return;
        }
        for m in msgs {
            let (id, token) = match m {
                RpcMessage::Response { id, .. } => (Some(id), None),
                RpcMessage::Notification {
                    progress: Some((token, _)),
                    ..
                } => (None, Some(token)),
                _ => continue,
            };
            self.judge_sent_after_cancel(l, now, key, id, token);
        }
    }

    fn judge_sent_after_cancel(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        key: StreamKey,
        id: Option<String>,
        token: Option<String>,
    ) {
        let own = self.calls.get(&key);
        let owns_id = |i: &String| {
            own.is_some_and(|cs| cs.iter().any(|c| &c.id == i))
                || l.streams
                    .get(&key)
                    .is_some_and(|s| s.calls.iter().any(|c| &c.id == i))
        };
        let owns_token =
            |t: &String| own.is_some_and(|cs| cs.iter().any(|c| c.token.as_ref() == Some(t)));
        if id.as_ref().is_some_and(owns_id) || token.as_ref().is_some_and(owns_token) {
            return;
        }
        let Some(c) = self.cancelled.iter_mut().find(|c| {
            !c.reported
                && c.stream != key
                && (id.as_ref().is_some_and(|i| *i == c.id) || token.is_some() && c.token == token)
        }) else {
            return;
        };
        c.reported = true;
        let c = c.clone();
        let on = l
            .streams
            .get(&key)
            .map_or("another stream".to_owned(), |s| {
                format!("stream {}", s.reference.request)
            });
        let what = match (&id, &token) {
            (Some(i), _) => format!("its response (id {i})"),
            (_, Some(t)) => format!("a progress notification for its token {t}"),
            _ => "a message".to_owned(),
        };
        let f = Finding::new(
            FindingKind::SentAfterCancel,
            l.ms(now),
            c.session,
            c.reference,
        )
        .ids(vec![c.id.clone()])
        .detail(format!(
            "the response stream of request {} was closed {} ms earlier, which cancels it; the \
             server then sent {what} on {on} (connection {})",
            c.id,
            crate::units::millis(now.saturating_duration_since(c.at)),
            l.streams.get(&key).map_or(0, |s| s.reference.conn),
        ));
        l.emit(f);
    }

    /// A cut inside the JSON (non-SSE) response body of an MCP 2026-07-28 POST: body bytes
    /// that reached the client show that the call ran (a server writes a JSON answer once it
    /// has the result), so its execution was visible, as a progress or result event would be.
    fn modern_body_cut(&mut self, l: &mut Ledger, key: StreamKey, p: &CutPoint) {
        if p.class.is_some() || p.body_bytes.is_none_or(|b| b == 0) || !Self::is_post(l, key) {
            return;
        }
        let what = "part of its JSON response body";
        if let Some(calls) = self.calls.get_mut(&key) {
            for c in calls.iter_mut().filter(|c| c.started.is_none()) {
                c.started = Some(what);
            }
        }
        mark_started(l, key, what);
    }

    /// The last leg of stream `key` ended; `clean` if its body ended cleanly. A 2026-07-28
    /// stream closed otherwise cancels its unanswered calls (and a torn event started them).
    fn modern_closed(&mut self, l: &mut Ledger, now: Instant, key: StreamKey, clean: bool) {
        if clean || !Self::is_post(l, key) {
            return;
        }
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        if stream.open_legs > 0 {
            return;
        }
        let torn = stream
            .torn
            .as_ref()
            .is_some_and(|t| t.cut.torn_bytes.is_some_and(|b| b > 0));
        let torn_what = "part of an event torn by the cut";
        if torn {
            mark_started(l, key, torn_what);
        }
        if !Self::is_modern_post(l, key) {
            return;
        }
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        let unanswered: Vec<String> = stream.unanswered_ids();
        let (session, reference) = (stream.session.clone(), stream.reference.clone());
        let calls = self.calls.get_mut(&key);
        let mut tokens: HashMap<String, Option<String>> = HashMap::new();
        if let Some(calls) = calls {
            for c in calls.iter_mut() {
                if torn && c.started.is_none() {
                    c.started = Some(torn_what);
                }
                tokens.insert(c.id.clone(), c.token.clone());
            }
        }
        let grace = l.cfg.grace;
        self.cancelled
            .retain(|c| now.saturating_duration_since(c.at) < grace);
        for id in unanswered {
            if self.cancelled.len() >= MAX_CANCELLED {
                self.cancelled.pop_front();
            }
            let token = tokens.get(&id).cloned().flatten();
            self.cancelled.push_back(Cancelled {
                stream: key,
                session: session.clone(),
                reference: reference.clone(),
                id,
                token,
                at: now,
                reported: false,
            });
        }
    }

    /// Call `old_id` of stream `key` was re-issued as `new_id`: `reexecuted` if it had
    /// visibly started and its tool is not repeat-safe.
    fn judge_reexecution(&mut self, l: &mut Ledger, now: Instant, r: &Resent) {
        let (key, old_id, new_id, proof) = (r.key, r.old_id.as_str(), r.new_id.as_str(), r.proof);
        let Some(call) = self
            .calls
            .get(&key)
            .and_then(|cs| cs.iter().find(|c| c.id == old_id))
            .cloned()
        else {
            return;
        };
        let Some(started) = call.started else {
            return;
        };
        let tool = call.tool.as_deref().unwrap_or("(unnamed)");
        let hints = self.hints(tool);
        if hints.is_some_and(Hints::repeat_safe) {
            return;
        }
        if hints.is_none() {
            let f = l
                .finding(FindingKind::Unknown, key, now)
                .ids(vec![old_id.to_owned(), new_id.to_owned()])
                .detail(format!(
                    "reexecuted not judged: tools/call {old_id} of tool {tool:?} had visibly \
                     started ({started} reached the client) and was re-issued as {new_id}, but \
                     no tools/list seen on the wire named the tool; by the spec's defaults \
                     (readOnlyHint and idempotentHint false) its side effect may have run twice"
                ));
            l.emit(f);
            return;
        }
        let why = "its tools/list annotations declare it neither readOnlyHint nor idempotentHint";
        let mut f = l
            .finding(FindingKind::Reexecuted, key, now)
            .ids(vec![old_id.to_owned(), new_id.to_owned()])
            .detail(format!(
                "tools/call {old_id} of tool {tool:?} had visibly started ({started} reached \
                 the client before the cut) and was re-issued as {new_id}, but the tool is not \
                 repeat-safe: {why}; its side effect likely ran twice (re-send proven by {})",
                proof.as_str()
            ));
        f.proof = Some(proof.as_str().to_owned());
        l.emit(f);
    }
}

impl Rule for Stateless {
    fn name(&self) -> &'static str {
        "stateless"
    }

    fn on_resent(&mut self, l: &mut Ledger, r: &Resent) {
        if r.stateless {
            self.judge_reexecution(l, r.at, r);
        }
    }

    fn on_stream_opened(&mut self, l: &mut Ledger, key: StreamKey, r: &RequestView<'_>) {
        if let Some(b) = r.body {
            self.modern_request(l, key, b);
        }
    }

    fn on_delivery(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        key: StreamKey,
        data: &[u8],
        whole: bool,
    ) {
        self.modern_delivery(l, now, key, data, whole);
    }

    /// A cut of the leg in flight may show the call started (see `modern_body_cut`).
    fn on_cut(&mut self, l: &mut Ledger, c: &CutSeen<'_>) {
        if c.in_flight {
            self.modern_body_cut(l, c.key, c.point);
        }
    }

    fn on_leg_end(&mut self, l: &mut Ledger, e: &LegEnded) {
        self.modern_closed(l, e.now, e.key, e.clean);
    }

    fn shrink(&mut self) {
        crate::audit::gauges::shrink(&mut self.calls);
        self.cancelled
            .shrink_to(crate::audit::gauges::room_for(self.cancelled.len()));
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        vec![
            ("modern_calls", n(self.calls.len())),
            ("cancelled_calls", n(self.cancelled.len())),
            ("tool_hints", n(self.hints.len())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_default_to_not_repeat_safe_and_read_only_counts() {
        let list = serde_json::json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [
            {"name": "a", "annotations": {"idempotentHint": true}},
            {"name": "b", "annotations": {"readOnlyHint": true}},
            {"name": "c", "annotations": {"idempotentHint": false, "destructiveHint": false}},
            {"name": "d"}]}});
        let got: HashMap<String, bool> = listed_tools(&list)
            .into_iter()
            .map(|(n, h)| (n, h.repeat_safe()))
            .collect();
        assert_eq!(got.get("a"), Some(&true));
        assert_eq!(got.get("b"), Some(&true));
        assert_eq!(got.get("c"), Some(&false));
        assert_eq!(got.get("d"), Some(&false));
    }

    #[test]
    fn tool_calls_yield_name_and_progress_token_as_json_text() {
        let body = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"append","arguments":{},"_meta":{"progressToken":"p-4"}}}"#;
        let calls = tool_calls(body);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].id, "4");
        assert_eq!(calls[0].tool.as_deref(), Some("append"));
        assert_eq!(calls[0].token.as_deref(), Some("\"p-4\""));
        assert!(tool_calls(b"not json").is_empty());
    }
}
