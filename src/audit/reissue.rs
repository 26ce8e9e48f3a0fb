//! Linking a call sent again to the call it replaces, so a client that recovered a lost call is
//! never reported as losing it.
//!
//! A `tools/call` *re-issues* an earlier call if and only if both have the same method and the
//! same params without `_meta` (tool and arguments; a new progress token does not matter), the
//! earlier call is unanswered and not yet replaced, every leg of its stream has ended or its
//! last cut has not been followed by a reconnect (a client may re-issue before the proxy saw its
//! old connection close), and one of:
//! - the new request is in the same session with the same JSON-RPC id (sent again as is);
//! - the new request is the first `tools/call` of a session other than the earlier call's (the
//!   client renegotiated a session and re-issued, as tearline's strict client does).
//!
//! A stream whose resume is still open when such a call arrives is being recovered, or the
//! client gave up on it a moment before the proxy saw the resume end (the two travel on
//! different connections): the link is held on the stream ([`Tentative`]) and settled when its
//! last leg ends — made if the call is still unanswered then, dropped if the resume delivered
//! its answer (the new call was another call alike, e.g. another session's first call with the
//! same arguments).
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

/// A possible re-issue of one of a stream's calls, held until that stream's legs end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tentative {
    /// The earlier call's id.
    pub old_id: String,
    /// The new request's session.
    pub session: Option<String>,
    /// The new request's id.
    pub id: String,
    /// The method of both.
    pub method: String,
}

impl Ledger {
    /// Links `new` to the call it re-issues, if any (rules in the module doc); returns the
    /// stream and id of the replaced call.
    pub fn link_reissue(
        &mut self,
        now: Instant,
        new: Candidate<'_>,
    ) -> Option<(StreamKey, String)> {
        // (opened_at, stream, old id, abandoned): the most recently opened candidate.
        let mut best: Option<(Instant, StreamKey, String, bool)> = None;
        for (key, s) in &self.streams {
            // A client that saw its stream break may re-issue before the proxy saw the old
            // connection close: a stream cut and not yet reconnected counts as ended for this.
            // A stream with a resume still open is settled later (module doc).
            let abandoned = s.open_legs == 0 || (s.cut_at.is_some() && s.awaiting_reconnect);
            let resuming = !abandoned && s.cut_at.is_some();
            if s.origin != Origin::Post
                || !(abandoned || resuming)
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
                    best = Some((s.opened_at, *key, c.id.clone(), abandoned));
                }
            }
        }
        let (_, key, old_id, abandoned) = best?;
        let new = Tentative {
            old_id,
            session: new.session.clone(),
            id: new.id.to_owned(),
            method: new.method.to_owned(),
        };
        if !abandoned {
            self.streams.get_mut(&key)?.maybe_reissued.push(new);
            return None;
        }
        self.link(now, key, new)
    }

    /// Settles the links held on stream `key` (its last leg has ended): each call still
    /// unanswered is linked to the request that re-issued it; the others are dropped.
    pub fn settle_reissues(&mut self, now: Instant, key: StreamKey) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        if stream.open_legs > 0 || stream.maybe_reissued.is_empty() {
            return;
        }
        for t in std::mem::take(&mut stream.maybe_reissued) {
            let still_lost = self
                .streams
                .get(&key)
                .is_some_and(|s| s.unanswered().any(|c| c.id == t.old_id));
            if still_lost {
                self.link(now, key, t);
            }
        }
    }

    /// Marks `new.old_id` of stream `key` replaced by `new`, drops its deferred
    /// `pending-call` and reports `reissued`.
    fn link(
        &mut self,
        now: Instant,
        key: StreamKey,
        new: Tentative,
    ) -> Option<(StreamKey, String)> {
        let old_id = new.old_id.clone();
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
        let where_ = if old_session == new.session {
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
