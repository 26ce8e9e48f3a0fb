//! What the client does after a cut, and the judgements that wait for it.
//!
//! A cut arms a [`Watch`] on the stream's session for a resumable stream (before MCP
//! 2026-07-28) that delivered ids: a resume is expected. (Whether the cut calls are answered,
//! resumed or provably re-sent at all is `unanswered`'s watch, in both eras.)
//!
//! Precise rules:
//! - `cursor-missing` iff, after the cut, the client re-opened a standalone GET stream of the
//!   same URL without `Last-Event-ID` (only for a cut GET stream) or re-sent one of the cut POST's unanswered
//!   calls (same method and params hash) without resuming, AND no resume GET for that stream
//!   arrived before the watch settled (`grace` after the cut, or `finish`). A client that
//!   re-issues *and* resumes is not reported; a concurrent identical call is not a re-issue
//!   once the resume arrives.
//! - A `notifications/cancelled` for a cut call ends its wait (`unanswered`).
//! - Findings deferred at a clean stream end (`pending-call`, `silent-empty`) are dropped if a
//!   resume of that stream follows (a polling server may end a response without ending the
//!   stream), and reported when the stream is forgotten or at `finish`.

use super::finding::{Finding, FindingKind, StreamRef};
use super::ledger::Ledger;
use super::rpc::{RpcMessage, is_stateless_version};
use super::stream::{Origin, Stream, StreamKey};
use tokio::time::Instant;

/// One call a watch waits for the client to re-issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchCall {
    pub id: String,
    pub method: String,
    pub params_hash: u64,
}

impl WatchCall {
    /// The calls of `stream` still waiting for an answer (no re-issue replaced them).
    pub fn unanswered(stream: &Stream) -> Vec<WatchCall> {
        stream
            .unanswered()
            .map(|c| WatchCall {
                id: c.id.clone(),
                method: c.method.clone(),
                params_hash: c.params_hash,
            })
            .collect()
    }
}

/// What a watch waits for after a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    /// A resumable stream with delivered ids: a resume GET is expected; a re-open (GET) or a
    /// re-issue (POST) without `Last-Event-ID` and no resume at all is `cursor-missing`.
    Resume { get: bool },
}

/// A judgement pending on what the client does after a cut.
#[derive(Debug, Clone)]
pub struct Watch {
    pub stream: StreamKey,
    pub reference: StreamRef,
    pub session: Option<String>,
    pub cursor: Option<String>,
    pub kind: WatchKind,
    pub calls: Vec<WatchCall>,
    pub cut_at: Instant,
    /// Ids of the re-open / re-issue seen without `Last-Event-ID` (Resume watches).
    pub reopened: Option<Vec<String>>,
}

impl Ledger {
    pub fn arm_watch(&mut self, now: Instant, key: StreamKey) {
        let Some(stream) = self.streams.get(&key) else {
            return;
        };
        let calls = WatchCall::unanswered(stream);
        let stateless = stream.version.as_deref().is_some_and(is_stateless_version);
        let get = stream.origin == Origin::Get;
        if stateless || stream.last_event_id.is_none() || (calls.is_empty() && !get) {
            return;
        }
        let kind = WatchKind::Resume { get };
        let watch = Watch {
            stream: key,
            reference: stream.reference.clone(),
            session: stream.session.clone(),
            cursor: stream.last_event_id.clone(),
            kind,
            calls,
            cut_at: now,
            reopened: None,
        };
        let session = stream.session.clone();
        let s = self.session_mut(&session, now);
        s.watches.retain(|w| w.stream != key);
        s.watches.push(watch);
    }

    /// A GET without `Last-Event-ID` (`post` = None) or a POST's calls: marks re-opens of cut
    /// streams that are awaiting a resume, and re-issues of 2026-07-28 calls.
    pub fn note_reopen(
        &mut self,
        now: Instant,
        session: &Option<String>,
        call: Option<(&str, &str, u64)>,
        path: Option<&str>,
        new_ids: &[String],
    ) {
        let mut reconnect = Vec::new();
        let Some(s) = self.sessions.get_mut(session) else {
            return;
        };
        for w in s.watches.iter_mut() {
            match (w.kind, call) {
                (WatchKind::Resume { get: true }, None)
                    if w.reopened.is_none()
                        && w.reference.request.split_once(' ').map(|p| p.1) == path =>
                {
                    w.reopened = Some(new_ids.to_vec());
                    reconnect.push(w.stream);
                }
                (WatchKind::Resume { .. }, Some((_, m, h)))
                    if w.reopened.is_none()
                        && w.calls.iter().any(|c| c.method == m && c.params_hash == h) =>
                {
                    w.reopened = Some(new_ids.to_vec());
                    reconnect.push(w.stream);
                }
                _ => {}
            }
        }
        for key in reconnect {
            if let Some(st) = self.streams.get_mut(&key)
                && st.awaiting_reconnect
            {
                st.awaiting_reconnect = false;
                if let Some(cut) = st.cut_at {
                    self.histos
                        .record("client-reconnect", now.saturating_duration_since(cut));
                }
            }
        }
    }

    pub fn note_post(&mut self, now: Instant, session: &Option<String>, msgs: &[RpcMessage]) {
        for m in msgs {
            match m {
                RpcMessage::Request {
                    id,
                    method,
                    params_hash,
                    ..
                } => self.note_reopen(
                    now,
                    session,
                    Some((id, method, *params_hash)),
                    None,
                    std::slice::from_ref(id),
                ),
                RpcMessage::Notification {
                    cancelled: Some(id),
                    ..
                } => self.drop_reissue_call(session, id),
                _ => {}
            }
        }
    }

    /// The client cancelled call `id`: nothing waits for it.
    pub fn drop_reissue_call(&mut self, session: &Option<String>, id: &str) {
        self.lost_resolved_by_id(session, id);
    }

    /// Settles watches: `cursor-missing` for re-opened resume watches older than the grace
    /// period (or all of them at `finish`), then the lost-call and truncation watches.
    pub fn settle_watches(&mut self, now: Instant, finish: bool) {
        let grace = self.cfg.grace;
        let mut out = Vec::new();
        for s in self.sessions.values_mut() {
            s.watches.retain_mut(|w| {
                let age = now.saturating_duration_since(w.cut_at);
                match w.kind {
                    WatchKind::Resume { .. } if finish || age >= grace => {
                        if let Some(new_ids) = w.reopened.take() {
                            out.push((FindingKind::CursorMissing, w.clone(), new_ids, age));
                        }
                        false
                    }
                    _ => true,
                }
            });
        }
        for (kind, w, new_ids, _age) in out {
            let detail = format!(
                "stream cut after id {}; the client re-opened/re-issued ({}) without \
                 Last-Event-ID and never resumed",
                w.cursor.as_deref().unwrap_or("-"),
                new_ids.join(", ")
            );
            let ids = w.cursor.iter().cloned().chain(new_ids).collect();
            let f = Finding::new(kind, self.ms(now), w.session, w.reference)
                .ids(ids)
                .detail(detail);
            self.emit(f);
        }
        self.settle_lost(now, finish);
        self.settle_truncations(now, finish);
    }
}
