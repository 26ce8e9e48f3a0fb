//! Cross-session evidence by name: a replay that delivers an event naming a call of another
//! session.
//!
//! Why: MCP makes event ids unique only within a session, JSON-RPC ids and progress tokens
//! only among one session's requests. Sessions of one client library count alike (`<stream>-<seq>`
//! ids, request ids 1, 2, 3, progress token = request id), and a deterministic tool called
//! alike in two sessions sends identical events. So identical content, or an id another
//! session also used, proves nothing across sessions: with `replay --sessions 4` on a correct
//! server it raised dozens of false `cross-stream` findings. Evidence must be unique by
//! construction; across sessions that is a *name* only one session could have given:
//!
//! - An event of a replay leg names a call when it is a JSON-RPC response (its id) or a
//!   `notifications/progress` (its `progressToken`). The name is evidence if and only if it
//!   looks globally unique ([`is_globally_unique`]: 16+ characters, not a counter, so `1` or
//!   `"tl-1"` never count), a request of another session declared it (its id, or its
//!   `params._meta.progressToken`) and no request of the leg's own session did. The server had
//!   no reason to send that name to this session: it served another session's store here.
//! - Once an event of a leg named another session's call, the leg is proven to replay that
//!   session's stream: a later event of the leg that stream delivered to its own client (same
//!   id, same data, data this stream never delivered) is that stream's event too — how its
//!   response, whose id may equal one of this session's, is recognised (`duplicate-response`).
//!
//! Within one session (ids unique by the spec) and for ids that look globally unique, the id
//! alone is evidence; that is the engine's (`Ledger::classify`). Session-less streams carry no
//! name unique to one client: they are never judged across streams by content.
//!
//! Invariants:
//! - The index holds only names that look globally unique, each with the streams whose POST
//!   declared it; an entry leaves with its stream, so memory follows the streams' own bounds.
//! - A stream's session is read live (a stream re-homed by a late `Mcp-Session-Id` keeps its
//!   key), so the index never holds a stale session.

use super::rpc::{self, RpcMessage};
use super::stream::{Call, Stream, StreamKey, is_globally_unique};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// True if and only if `name` (JSON text of a request id or progress token) looks globally
/// unique: a string or number that is no counter ([`is_globally_unique`] on its text).
pub fn unique_name(name: &str) -> bool {
    is_globally_unique(name.trim_matches('"'))
}

/// The names of `c` that may serve as cross-session evidence.
fn names_of(c: &Call) -> impl Iterator<Item = &str> {
    std::iter::once(c.id.as_str())
        .chain(c.progress_token.as_deref())
        .filter(|n| unique_name(n))
}

/// Globally unique-looking call names (request ids, progress tokens) → the streams whose POST
/// declared them.
#[derive(Debug, Default)]
pub struct CallNames {
    by_name: HashMap<String, Vec<StreamKey>>,
}

impl CallNames {
    /// Indexes the calls of `stream` (keyed `key`).
    pub fn add_stream(&mut self, key: StreamKey, stream: &Stream) {
        for c in &stream.calls {
            for n in names_of(c) {
                let owners = self.by_name.entry(n.to_owned()).or_default();
                if !owners.contains(&key) {
                    owners.push(key);
                }
            }
        }
    }

    /// Forgets the calls of `stream` (keyed `key`).
    pub fn remove_stream(&mut self, key: StreamKey, stream: &Stream) {
        for c in &stream.calls {
            for n in names_of(c) {
                if let Some(owners) = self.by_name.get_mut(n) {
                    owners.retain(|k| *k != key);
                    if owners.is_empty() {
                        self.by_name.remove(n);
                    }
                }
            }
        }
    }

    fn owners(&self, name: &str) -> &[StreamKey] {
        self.by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// Gives back table capacity once most entries are gone.
    pub fn shrink(&mut self) {
        super::gauges::shrink(&mut self.by_name);
    }

    /// Names held (for tests and memory checks).
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True if nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// The call names an event's data carries: response ids and progress tokens (JSON text).
/// `whole`: the data is complete (else only a response's head is read).
pub fn names_in(data: &[u8], whole: bool) -> Vec<String> {
    let msgs = if whole {
        rpc::parse(data)
    } else {
        rpc::parse_head(data).into_iter().collect()
    };
    msgs.into_iter()
        .filter_map(|m| match m {
            RpcMessage::Response { id, .. } => Some(id),
            RpcMessage::Notification {
                progress: Some((token, _)),
                ..
            } => Some(token),
            _ => None,
        })
        .collect()
}

/// An event that names another session's call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The other session's stream whose POST declared the name.
    pub source: StreamKey,
    /// The name (JSON text).
    pub name: String,
}

/// The stream of another session whose call one of `names` names, if the evidence of the
/// module doc holds for stream `key`.
pub fn named_source(
    streams: &FxHashMap<StreamKey, Stream>,
    index: &CallNames,
    key: StreamKey,
    names: &[String],
) -> Option<Named> {
    let home = streams.get(&key)?;
    home.session.as_ref()?;
    let session_of = |k: &StreamKey| streams.get(k).map(|s| &s.session);
    names.iter().filter(|n| unique_name(n)).find_map(|n| {
        let owners = index.owners(n);
        if owners.iter().any(|k| session_of(k) == Some(&home.session)) {
            return None;
        }
        owners
            .iter()
            .find(|k| session_of(k).is_some_and(Option::is_some))
            .map(|k| Named {
                source: *k,
                name: n.clone(),
            })
    })
}

/// True if and only if, on a leg proven to replay stream `source`, the event (`id`, `hash`,
/// `len`) is `source`'s: it delivered that id with that data, and stream `key` never delivered
/// that data.
pub fn from_source(
    streams: &FxHashMap<StreamKey, Stream>,
    (key, source): (StreamKey, StreamKey),
    id: &str,
    hash: u64,
    len: u64,
) -> bool {
    if len == 0 || key == source {
        return false;
    }
    let (Some(home), Some(src)) = (streams.get(&key), streams.get(&source)) else {
        return false;
    };
    !home.has_hash(hash)
        && src
            .entry_of(id)
            .is_some_and(|e| e.dispatched && e.hash == hash)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditConfig;
    use crate::audit::finding::StreamRef;
    use crate::audit::ledger::Ledger;
    use crate::audit::stream::Origin;
    use tokio::time::Instant;

    const TOKEN_A: &str = "\"tl-00000000000000aa-1\"";
    const TOKEN_B: &str = "\"tl-00000000000000bb-1\"";

    fn call(id: &str, token: Option<&str>) -> Call {
        Call {
            id: id.to_owned(),
            method: "tools/call".to_owned(),
            params_hash: 0,
            answers: 0,
            reported: false,
            replaced: false,
            key: None,
            progress_token: token.map(str::to_owned),
            started: None,
        }
    }

    /// One POST stream: its session, its call, the events `(id, hash)` it delivered.
    type Spec<'a> = (Option<&'a str>, Call, &'a [(&'a str, u64)]);

    /// A ledger with one POST stream per spec.
    fn ledger(streams: &[Spec<'_>]) -> (Ledger, Vec<StreamKey>) {
        let now = Instant::now();
        let mut l = Ledger::new(AuditConfig::default(), now);
        let mut keys = Vec::new();
        for (session, c, events) in streams {
            let mut s = Stream::new(
                session.map(str::to_owned),
                StreamRef::default(),
                Origin::Post,
                None,
                now,
                64,
            );
            s.calls = vec![c.clone()];
            let key = l.add_stream(s, now);
            for (id, hash) in *events {
                l.push_event(key, Some((*id).to_owned()), *hash, 10, true, Instant::now());
            }
            keys.push(key);
        }
        (l, keys)
    }

    #[test]
    fn a_progress_token_only_another_session_declared_names_that_sessions_call() {
        let (l, k) = ledger(&[
            (Some("a"), call("1", Some(TOKEN_A)), &[("1-1", 11)]),
            (Some("b"), call("1", Some(TOKEN_B)), &[("1-1", 21)]),
        ]);
        let named = l.named_source(k[1], &[TOKEN_A.to_owned()]);
        assert_eq!(
            named,
            Some(Named {
                source: k[0],
                name: TOKEN_A.to_owned()
            })
        );
        assert_eq!(l.named_source(k[1], &[TOKEN_B.to_owned()]), None, "its own");
    }

    #[test]
    fn counter_names_and_names_the_home_session_declared_are_no_evidence() {
        // Request id 1 and token "tl-1" repeat in every session of a client library.
        let (l, k) = ledger(&[
            (Some("a"), call("1", Some("\"tl-1\"")), &[]),
            (Some("b"), call("2", Some("\"tl-2\"")), &[]),
        ]);
        assert_eq!(l.named_source(k[1], &["1".to_owned()]), None);
        assert_eq!(l.named_source(k[1], &["\"tl-1\"".to_owned()]), None);
        // A re-send in a new session declares the same token: both sessions own it.
        let (l, k) = ledger(&[
            (Some("a"), call("1", Some(TOKEN_A)), &[]),
            (Some("b"), call("1", Some(TOKEN_A)), &[]),
        ]);
        assert_eq!(l.named_source(k[1], &[TOKEN_A.to_owned()]), None);
        // Without a session nothing is unique to one client.
        let (l, k) = ledger(&[
            (Some("a"), call("1", Some(TOKEN_A)), &[]),
            (None, call("1", None), &[]),
        ]);
        assert_eq!(l.named_source(k[1], &[TOKEN_A.to_owned()]), None);
    }

    #[test]
    fn identical_content_of_another_session_is_no_evidence_by_itself() {
        // Two sessions that differ at 1-1 and deliver the same 1-2: twins of a deterministic
        // tool, not a leak, unless a leg was proven to replay the other stream.
        let (l, k) = ledger(&[
            (
                Some("a"),
                call("1", Some(TOKEN_A)),
                &[("1-1", 11), ("1-2", 12)],
            ),
            (Some("b"), call("1", Some(TOKEN_B)), &[("1-1", 21)]),
        ]);
        assert_eq!(l.named_source(k[1], &[]), None);
        assert!(l.from_source(k[1], k[0], "1-2", 12, 10), "proven leg");
        assert!(!l.from_source(k[1], k[0], "1-2", 13, 10), "other data");
        assert!(!l.from_source(k[1], k[0], "1-2", 12, 0), "no data");
        assert!(!l.from_source(k[1], k[0], "1-1", 21, 10), "its own data");
    }

    #[test]
    fn responses_and_progress_name_calls_other_messages_do_not() {
        let p = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t-1","progress":1}}"#;
        assert_eq!(names_in(p, true), vec!["\"t-1\"".to_owned()]);
        let r = br#"{"jsonrpc":"2.0","id":"abc","result":{"content":[]}}"#;
        assert_eq!(names_in(r, true), vec!["\"abc\"".to_owned()]);
        let head = br#"{"jsonrpc":"2.0","id":"abc","result":{"content":[{"type":"te"#;
        assert_eq!(names_in(head, false), vec!["\"abc\"".to_owned()]);
        let other = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#;
        assert!(names_in(other, true).is_empty());
    }

    #[test]
    fn the_index_forgets_names_with_their_stream() {
        let (mut l, k) = ledger(&[
            (Some("a"), call("1", Some(TOKEN_A)), &[]),
            (Some("b"), call("\"9b2f4c1e-7d3a-4e0b\"", None), &[]),
            (Some("c"), call("3", Some("\"tl-3\"")), &[]),
        ]);
        assert_eq!(l.call_names.len(), 2);
        for key in k {
            l.remove_stream(key);
        }
        assert!(l.call_names.is_empty());
    }
}
