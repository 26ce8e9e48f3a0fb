//! Rule `duplicate-response`: one call's answer reached the client twice.
//!
//! Rules (precise):
//! - A second (or later) answer to a call, matched by JSON-RPC id within the session (the
//!   stream's own call first: session-less clients reuse ids), is `duplicate-response`, unless
//!   it came in a byte-identical copy of an event already delivered under the same id (a replay
//!   artefact: `replay-duplicate`, or explained by `cursor-behind`).
//! - A response event that another stream delivered to its own client and that a replay
//!   delivered again here (the engine classified it as another stream's, `cross-stream`) is
//!   also `duplicate-response`: one response reached clients twice. Evidence: the JSON-RPC id,
//!   the event id, the other stream and, for per-session ids, that the leg was proven to
//!   replay that stream (an event named one of its calls; see `leak`).
//!
//! State: none.

use crate::audit::finding::FindingKind;
use crate::audit::ledger::Ledger;
use crate::audit::rpc::{self, RpcMessage};
use crate::audit::rule::{AnswerSeen, CrossEvent, Rule};

/// The `duplicate-response` rule.
#[derive(Debug, Default)]
pub struct DuplicateResponse;

impl Rule for DuplicateResponse {
    fn name(&self) -> &'static str {
        "duplicate_response"
    }

    fn on_answer(&mut self, l: &mut Ledger, a: &AnswerSeen<'_>) {
        if a.answers < 2 || a.replayed_copy {
            return;
        }
        let (answers, id) = (a.answers, a.id);
        let f = l
            .finding(FindingKind::DuplicateResponse, a.key, a.now)
            .ids(vec![id.to_owned()])
            .detail(format!("response #{answers} for request id {id}"));
        l.emit(f);
    }

    /// A response event another stream delivered to its own client came again here: one
    /// response reached clients twice (`duplicate-response`, besides `cross-stream`).
    fn on_cross_event(&mut self, l: &mut Ledger, c: &CrossEvent<'_>) {
        let (now, key, id, data, hash) = (c.now, c.key, c.id, c.data, c.hash);
        let whole = c.whole;
        let msgs = if whole {
            rpc::parse(data)
        } else {
            rpc::parse_head(data).into_iter().collect()
        };
        let Some(rpc_id) = msgs.into_iter().find_map(|m| match m {
            RpcMessage::Response { id, .. } => Some(id),
            _ => None,
        }) else {
            return;
        };
        let by_source = c.source.filter(|s| l.from_source(key, *s, id, hash, c.len));
        let owner = by_source.or_else(|| l.opaque.get(id).copied()).or_else(|| {
            let session = l.streams.get(&key)?.session.clone();
            l.sessions
                .get(&session)?
                .ids
                .get(id)?
                .iter()
                .copied()
                .find(|k| *k != key)
        });
        let Some(other) = owner.and_then(|k| l.streams.get(&k)) else {
            return;
        };
        if other.entry_of(id).is_none_or(|e| !e.dispatched) {
            return;
        }
        let why = if by_source.is_some() {
            " (same id and data; the replay was shown to serve that session's stream: one of \
             its messages named a call only that session declared)"
        } else {
            ""
        };
        let detail = format!(
            "response event {id} (JSON-RPC id {rpc_id}) was delivered on stream {} of session {} \
             and again on this stream{why}",
            other.reference.request,
            other.session.as_deref().unwrap_or("(none)")
        );
        let f = l
            .finding(FindingKind::DuplicateResponse, key, now)
            .ids(vec![rpc_id, id.to_string()])
            .detail(detail);
        l.emit(f);
    }
}
