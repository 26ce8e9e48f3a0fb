//! Linking a call sent again to the call it replaces, so a client that recovered a lost call is
//! never reported as losing it.
//!
//! A `tools/call` *re-issues* an earlier call if and only if both have the same method and the
//! same params without `_meta` (tool and arguments; a new progress token does not matter), the
//! earlier call is unanswered and not yet replaced, every leg of its stream has ended or its
//! last cut has not been followed by a reconnect (a client may re-issue before the proxy saw its
//! old connection close; a stream being resumed is not abandoned), and one of:
//! - the new request is in the same session with the same JSON-RPC id (sent again as is);
//! - the new request is the first `tools/call` of a session other than the earlier call's (the
//!   client renegotiated a session and re-issued, as tearline's strict client does).
//!
//! MCP 2026-07-28 calls (a new id in the same, session-less, exchange) are linked by the
//! reconnect watch (`watch`); [`Ledger::link_reissue`] skips them. Of several candidates the
//! most recently opened is linked. A linked call counts as answered for `pending-call`,
//! `silent-empty` and watches, and a `reissued` finding (class info) states the link: both ids,
//! both sessions, and how the earlier stream ended.

use super::finding::{Finding, FindingKind};
use super::ledger::Ledger;
use super::rpc::is_stateless_version;
use super::stream::{Origin, StreamKey};
use tokio::time::Instant;

/// The request that may re-issue an earlier call.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// Its session.
    pub session: &'a Option<String>,
    /// Its JSON-RPC id (JSON text).
    pub id: &'a str,
    /// Its method.
    pub method: &'a str,
    /// Hash of its params without `_meta`.
    pub params_hash: u64,
    /// True if it is the first `tools/call` of its session.
    pub first_of_session: bool,
}

impl Ledger {
    /// Links `new` to the call it re-issues, if any (rules in the module doc); returns the
    /// stream and id of the replaced call.
    pub fn link_reissue(
        &mut self,
        now: Instant,
        new: Candidate<'_>,
    ) -> Option<(StreamKey, String)> {
        let mut best: Option<(Instant, StreamKey, String)> = None;
        for (key, s) in &self.streams {
            // A client that saw its stream break may re-issue before the proxy saw the old
            // connection close: a stream cut and not yet reconnected counts as ended for this.
            // A stream whose resume is open is being recovered, not abandoned: an identical
            // call meanwhile (another session's first call with the same arguments) is a new
            // call, not its re-issue.
            let abandoned = s.open_legs == 0 || (s.cut_at.is_some() && s.awaiting_reconnect);
            if s.origin != Origin::Post
                || !abandoned
                || s.version.as_deref().is_some_and(is_stateless_version)
            {
                continue;
            }
            let same_session = s.session == *new.session;
            for c in &s.calls {
                let linkable = c.answers == 0
                    && !c.replaced
                    && c.method == new.method
                    && c.params_hash == new.params_hash
                    && if same_session {
                        c.id == new.id
                    } else {
                        new.first_of_session
                    };
                if linkable && best.as_ref().is_none_or(|b| s.opened_at > b.0) {
                    best = Some((s.opened_at, *key, c.id.clone()));
                }
            }
        }
        let (_, key, old_id) = best?;
        let stream = self.streams.get_mut(&key)?;
        if let Some(c) = stream.calls.iter_mut().find(|c| c.id == old_id) {
            c.replaced = true;
        }
        stream
            .deferred
            .retain(|f| !(f.kind == FindingKind::PendingCall && f.ids.first() == Some(&old_id)));
        let how = if stream.cut_at.is_some() && stream.awaiting_reconnect {
            "was cut and not resumed"
        } else if stream.cut_at.is_some() {
            "was cut, resumed, and ended without its response"
        } else {
            "ended without its response"
        };
        let old_session = stream.session.clone();
        let where_ = if old_session == *new.session {
            "in the same session".to_string()
        } else {
            format!(
                "in new session {}",
                new.session.as_deref().unwrap_or("(none)")
            )
        };
        let f: Finding = self
            .finding(FindingKind::Reissued, key, now)
            .ids(vec![old_id.clone(), new.id.to_string()])
            .detail(format!(
                "{} {old_id} of session {} (its stream {how}) was sent again as {} {where_}, \
                 same tool and arguments: the re-issue replaces it, so it is not pending",
                new.method,
                old_session.as_deref().unwrap_or("(none)"),
                new.id,
            ));
        self.emit(f);
        Some((key, old_id))
    }
}
