//! Rule `cursor-missing`: what the client does after a cut of a resumable stream.
//!
//! A cut arms a watch on the stream's session for a resumable stream (before MCP
//! 2026-07-28) that delivered ids: a resume is expected. (Whether the cut calls are answered,
//! resumed or provably re-sent at all is the `abandoned` rule's watch, in both eras.)
//!
//! Precise rules:
//! - `cursor-missing` iff, after the cut, the client re-opened a standalone GET stream of the
//!   same URL without `Last-Event-ID` (only for a cut GET stream) or re-sent one of the cut
//!   POST's unanswered calls (same method and params hash) without resuming, AND no resume GET for that stream
//!   arrived before the watch settled (`grace` after the cut, or `finish`). A client that
//!   re-issues *and* resumes is not reported; a concurrent identical call is not a re-issue
//!   once the resume arrives.
//! - A GET whose `Accept` names no `text/event-stream` (a browser's `favicon.ico` fetch) is no
//!   re-open: it is not an `EventSource`, so it never carried a cursor to lose.
//! - No watch is armed after a `reset` cut that may have discarded every event the stream
//!   delivered (all written less than `rst_unread` before the reset): that client may hold
//!   no cursor, and reconnecting without one is correct.
//!
//! State: the watches, per session (a session with a watch is not forgotten).

use crate::audit::finding::{Finding, FindingKind, StreamRef};
use crate::audit::ledger::Ledger;
use crate::audit::rpc::{RpcMessage, is_stateless_version};
use crate::audit::rule::{LegEnded, RequestView, Rule};
use crate::audit::stream::{CallShape, Origin, StreamKey};
use std::collections::HashMap;
use tokio::time::Instant;

/// A resume expected after a cut of a resumable stream with delivered ids: a re-open (GET,
/// `get`) or a re-issue (POST) without `Last-Event-ID` and no resume at all is
/// `cursor-missing`.
#[derive(Debug, Clone)]
struct Watch {
    stream: StreamKey,
    reference: StreamRef,
    session: Option<String>,
    cursor: Option<String>,
    get: bool,
    calls: Vec<CallShape>,
    cut_at: Instant,
    /// Ids of the re-open / re-issue seen without `Last-Event-ID`.
    reopened: Option<Vec<String>>,
}

/// The `cursor-missing` rule.
#[derive(Debug, Default)]
pub struct CursorMissing {
    watches: HashMap<Option<String>, Vec<Watch>>,
}

impl CursorMissing {
    fn arm(&mut self, l: &mut Ledger, now: Instant, key: StreamKey) {
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        let calls = stream.unanswered_shapes();
        let stateless = stream.version.as_deref().is_some_and(is_stateless_version);
        let get = stream.origin == Origin::Get;
        // After a reset that may have discarded everything the stream delivered (all of it
        // written less than `rst_unread` before the reset), the client may hold no cursor: a
        // reconnect without `Last-Event-ID` is then what a conformant client does.
        let read_nothing = stream.unread.is_some_and(|(from, _)| from.is_none());
        if stateless || read_nothing || stream.last_event_id.is_none() || (calls.is_empty() && !get)
        {
            return;
        }
        let watch = Watch {
            stream: key,
            reference: stream.reference.clone(),
            session: stream.session.clone(),
            cursor: stream.last_event_id.clone(),
            get,
            calls,
            cut_at: now,
            reopened: None,
        };
        let session = stream.session.clone();
        l.session_mut(&session, now);
        let ws = self.watches.entry(session).or_default();
        ws.retain(|w| w.stream != key);
        ws.push(watch);
        l.deadlines.arm_after(now, l.cfg.grace);
    }

    /// A GET without `Last-Event-ID` (`call` = None) or a POST's call: marks re-opens of cut
    /// streams that are awaiting a resume.
    fn note_reopen(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        session: &Option<String>,
        call: Option<(&str, u64)>,
        path: Option<&str>,
        new_ids: &[String],
    ) {
        let mut reconnect = Vec::new();
        if !l.sessions.contains_key(session) {
            return;
        }
        let Some(ws) = self.watches.get_mut(session) else {
            return;
        };
        for w in ws.iter_mut() {
            match call {
                None if w.get
                    && w.reopened.is_none()
                    && w.reference.request.split_once(' ').map(|p| p.1) == path =>
                {
                    w.reopened = Some(new_ids.to_vec());
                    reconnect.push(w.stream);
                }
                Some((m, h))
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
            if let Some(st) = l.streams.get_mut(&key)
                && st.awaiting_reconnect
            {
                st.awaiting_reconnect = false;
                if let Some(cut) = st.cut_at {
                    l.histos
                        .record("client-reconnect", now.saturating_duration_since(cut));
                }
            }
        }
    }
}

impl Rule for CursorMissing {
    fn name(&self) -> &'static str {
        "cursor_missing"
    }

    fn on_request(&mut self, l: &mut Ledger, r: &RequestView<'_>) {
        match (r.method, r.last_event_id) {
            // A request that does not ask for an event stream (a second tab's `favicon.ico`)
            // re-opens nothing.
            ("GET", None) if r.accepts_event_stream => self.note_reopen(
                l,
                r.now,
                r.session,
                None,
                Some(r.path),
                &[format!(
                    "GET {} seq {}",
                    crate::wire::redact::target(r.path),
                    r.seq
                )],
            ),
            ("POST", _) => {
                for m in r.msgs {
                    if let RpcMessage::Request {
                        id,
                        method,
                        params_hash,
                        ..
                    } = m
                    {
                        self.note_reopen(
                            l,
                            r.now,
                            r.session,
                            Some((method, *params_hash)),
                            None,
                            std::slice::from_ref(id),
                        );
                    }
                }
            }
            _ => {}
        }
    }

    fn on_resume(&mut self, _l: &mut Ledger, key: StreamKey, session: &Option<String>) {
        if let Some(ws) = self.watches.get_mut(session) {
            ws.retain(|w| w.stream != key);
        }
    }

    fn on_leg_end(&mut self, l: &mut Ledger, e: &LegEnded) {
        if e.cut {
            self.arm(l, e.now, e.key);
        }
    }

    /// `cursor-missing` for re-opened watches older than the grace period (or all at `finish`).
    fn on_sweep(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        let grace = l.cfg.grace;
        let mut out = Vec::new();
        for ws in self.watches.values_mut() {
            ws.retain_mut(|w| {
                let age = now.saturating_duration_since(w.cut_at);
                if finish || age >= grace {
                    if let Some(new_ids) = w.reopened.take() {
                        out.push((w.clone(), new_ids));
                    }
                    false
                } else {
                    true
                }
            });
        }
        self.watches.retain(|_, ws| !ws.is_empty());
        for (w, new_ids) in out {
            let detail = format!(
                "stream cut after id {}; the client re-opened/re-issued ({}) without \
                 Last-Event-ID and never resumed",
                w.cursor.as_deref().unwrap_or("-"),
                new_ids.join(", ")
            );
            let ids = w.cursor.iter().cloned().chain(new_ids).collect();
            let f = Finding::new(
                FindingKind::CursorMissing,
                l.ms(now),
                w.session,
                w.reference,
            )
            .ids(ids)
            .detail(detail);
            l.emit(f);
        }
    }

    fn holds_session(&self, session: &Option<String>) -> bool {
        crate::audit::gauges::holds_items(&self.watches, session)
    }

    fn shrink(&mut self) {
        crate::audit::gauges::shrink(&mut self.watches);
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        vec![("watches", crate::audit::gauges::items(&self.watches))]
    }
}
