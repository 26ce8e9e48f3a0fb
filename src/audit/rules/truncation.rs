//! Rule `truncation-accepted`: whether a client took a TLS truncation for the end of its call.
//!
//! A `fin` cut on a TLS client side without `close_notify` ([`TlsEnd::Truncated`]) is a
//! truncation: the TCP stream ends, but the TLS session never said so. A careful client treats
//! it as a broken connection and recovers the call whose response was cut (resume, re-issue,
//! or cancel); a careless one takes the end of the bytes for the end of the response and goes
//! on with its next request. What the wire shows of the second case is the rule here.
//!
//! Precise rules:
//! - A truncation watch is armed if and only if a downstream `fin` cut with
//!   `tls_end = truncated` ends a response leg of a stream that belongs to an MCP session
//!   (`Mcp-Session-Id`: requests of one client are attributed to it only through the session)
//!   and has unanswered calls. A `reset` is not a truncation a client can mistake for an end
//!   (it reads a connection error), and a cut with `close_notify` is a clean TLS end: neither
//!   arms a watch.
//! - The watch is cleared (no finding) if the client was already recovering that stream or
//!   call from an earlier truncation (a resume or re-sent call that was cut again: giving up
//!   after trying is not taking the cut for an end), or if, before it settles, the client
//!   resumes the stream
//!   (a GET with `Last-Event-ID` naming an id the stream delivered or tore), re-sends one of
//!   the cut calls (same method and params hash, any id), cancels one of them
//!   (`notifications/cancelled`), or one of them is answered after all.
//! - `truncation-accepted` (class `client-bug`) if and only if the watch was not cleared and,
//!   after the cut, the client sent another request in the same session (it moved on); the
//!   finding names the cut calls and the requests that followed, the raw offset and SSE class
//!   of the cut. A client that sent nothing more is not judged (it may be waiting, or have
//!   given up loudly), so nothing is reported for it.
//! - A watch settles `grace` after the cut, or at `finish` (a client that re-sends and resumes
//!   concurrently is not reported).

use crate::audit::finding::{Finding, FindingCut, FindingKind, StreamRef};
use crate::audit::ledger::Ledger;
use crate::audit::rpc::RpcMessage;
use crate::audit::rule::{CutSeen, RequestView, Rule};
use crate::audit::stream::{CallShape, StreamKey};
use crate::tls::TlsEnd;
use crate::vocab::CutAction;
use crate::wire::CutPoint;
use std::collections::HashMap;
use tokio::time::Instant;

/// Requests remembered per watch as evidence that the client moved on, at most.
const MAX_MOVED_ON: usize = 8;

/// A truncated cut of a stream with unanswered calls, waiting for what the client does next.
#[derive(Debug, Clone)]
pub struct Truncation {
    pub stream: StreamKey,
    pub reference: StreamRef,
    pub session: Option<String>,
    pub calls: Vec<CallShape>,
    pub cut_at: Instant,
    pub raw_offset: u64,
    /// The cut as the pump recorded it.
    pub cut: FindingCut,
    /// `method id` of the requests the client sent after the cut.
    pub moved_on: Vec<String>,
    /// The client recovered the call (resume, re-issue, cancel): nothing to report.
    pub recovered: bool,
}

/// The `truncation-accepted` rule: the truncation watches, per session (a session with a
/// watch is not forgotten).
#[derive(Debug, Default)]
pub struct TruncationAccepted {
    watches: HashMap<Option<String>, Vec<Truncation>>,
}

impl TruncationAccepted {
    /// Arms a truncation watch for stream `key` if the cut qualifies (see the module doc).
    fn arm_truncation(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        key: StreamKey,
        (action, p): (CutAction, &CutPoint),
    ) {
        if action != CutAction::Fin || p.tls_end != Some(TlsEnd::Truncated) {
            return;
        }
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        if stream.session.is_none() {
            return;
        }
        let calls = stream.unanswered_shapes();
        if calls.is_empty() {
            return;
        }
        let mut t = Truncation {
            stream: key,
            reference: stream.reference.clone(),
            session: stream.session.clone(),
            calls,
            cut_at: now,
            raw_offset: p.raw_offset,
            cut: FindingCut::from_point(p),
            moved_on: Vec::new(),
            recovered: false,
        };
        let session = stream.session.clone();
        l.session_mut(&session, now);
        let s = self.watches.entry(session).or_default();
        // A client already recovering this stream or call (a cut resume, a re-sent call that
        // was cut again) did not take the first truncation for an end; giving up later is
        // not judged.
        t.recovered = s.iter().any(|w| {
            w.recovered
                && (w.stream == key
                    || w.calls.iter().any(|c| {
                        t.calls
                            .iter()
                            .any(|n| n.method == c.method && n.params_hash == c.params_hash)
                    }))
        });
        s.retain(|w| w.stream != key);
        s.push(t);
        l.deadlines.arm_after(now, l.cfg.grace);
    }

    /// A request of `session` after a truncation: a resume GET (`cursor`) or a POST's
    /// messages. Other requests (a standalone GET, a DELETE) are neither recovery nor a new
    /// call.
    fn note_after_truncation(
        &mut self,
        l: &Ledger,
        session: &Option<String>,
        cursor: Option<&str>,
        msgs: &[RpcMessage],
    ) {
        let Some(s) = l.sessions.get(session) else {
            return;
        };
        let Some(ws) = self.watches.get_mut(session).filter(|ws| !ws.is_empty()) else {
            return;
        };
        let owners = cursor
            .and_then(|c| s.ids.get(c))
            .cloned()
            .unwrap_or_default();
        for w in ws.iter_mut().filter(|w| !w.recovered) {
            if owners.contains(&w.stream) {
                w.recovered = true;
                continue;
            }
            for m in msgs {
                match m {
                    RpcMessage::Request {
                        id,
                        method,
                        params_hash,
                        ..
                    } => {
                        if w.calls
                            .iter()
                            .any(|c| &c.method == method && c.params_hash == *params_hash)
                        {
                            w.recovered = true;
                        } else if w.moved_on.len() < MAX_MOVED_ON {
                            w.moved_on.push(format!("{method} {id}"));
                        }
                    }
                    RpcMessage::Notification {
                        cancelled: Some(id),
                        ..
                    } if w.calls.iter().any(|c| &c.id == id) => w.recovered = true,
                    _ => {}
                }
            }
        }
    }

    /// Settles truncation watches older than `grace` (all of them at `finish`).
    fn settle_truncations(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        let grace = l.cfg.grace;
        let mut due = Vec::new();
        for ws in self.watches.values_mut() {
            ws.retain(|w| {
                let settle = finish || now.saturating_duration_since(w.cut_at) >= grace;
                if settle {
                    due.push(w.clone());
                }
                !settle
            });
        }
        self.watches.retain(|_, ws| !ws.is_empty());
        for w in due {
            let answered = l.streams.get(&w.stream).is_some_and(|st| {
                st.calls
                    .iter()
                    .filter(|c| w.calls.iter().any(|wc| wc.id == c.id))
                    .any(|c| c.answers > 0 || c.replaced)
            });
            if w.recovered || answered || w.moved_on.is_empty() {
                continue;
            }
            let call_ids: Vec<String> = w.calls.iter().map(|c| c.id.clone()).collect();
            let detail = format!(
                "TLS session truncated (fin without close_notify) in {} at raw offset {} with \
                 call(s) {} unanswered; the client neither resumed, re-sent nor cancelled them \
                 and went on with {}",
                w.cut.class_name().unwrap_or("-"),
                w.raw_offset,
                call_ids.join(", "),
                w.moved_on.join(", ")
            );
            let mut f = Finding::new(
                FindingKind::TruncationAccepted,
                l.ms(now),
                w.session,
                w.reference,
            )
            .ids(call_ids)
            .offsets(vec![w.raw_offset])
            .detail(detail);
            f.cut = w.cut;
            l.emit(f);
        }
    }
}

impl Rule for TruncationAccepted {
    fn name(&self) -> &'static str {
        "truncation"
    }

    /// A resume GET (its cursor) or a POST's messages may recover or move on.
    fn on_request(&mut self, l: &mut Ledger, r: &RequestView<'_>) {
        let cursor = r.last_event_id.filter(|_| r.method == "GET");
        self.note_after_truncation(l, r.session, cursor, r.msgs);
    }

    fn on_cut(&mut self, l: &mut Ledger, c: &CutSeen<'_>) {
        if c.in_flight {
            self.arm_truncation(l, c.now, c.key, (c.action, c.point));
        }
    }

    fn on_sweep(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        self.settle_truncations(l, now, finish);
    }

    fn holds_session(&self, session: &Option<String>) -> bool {
        crate::audit::gauges::holds_items(&self.watches, session)
    }

    fn shrink(&mut self) {
        crate::audit::gauges::shrink(&mut self.watches);
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        vec![("truncations", crate::audit::gauges::items(&self.watches))]
    }
}
