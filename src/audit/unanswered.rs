//! Unanswered means lost: a call the proxy cut that nobody answered, resumed or provably re-sent
//! is reported `abandoned` (class loss), in both MCP eras, when its wait ends.
//!
//! Why: a cut call that hangs is the silent loss this proxy exists to show. A legacy client may
//! resume (and see its resumes cut until it gives up), may have had nothing to resume from (cut
//! in the priming event, before any id), or may re-issue without proof; a 2026-07-28 client
//! cannot resume at all. Whatever the reason, the call never got its answer.
//!
//! Precise rules:
//! - A *lost-call watch* is armed on a stream, for each of its calls without an answer, a
//!   proven re-send (`reissue`) or a cancellation, when its last open leg ends by a proxy cut,
//!   or when a resume of a stream cut before ends without the answer and not cleanly (a refused
//!   resume — `explicit-loss` — or a connection that closed). A resume that ends cleanly without
//!   the answer is `pending-call`'s (`events`), never both.
//! - Opening a resume of the stream pauses the watch (removes it); the resume's end arms it
//!   again, its clock restarting at that end.
//! - A call leaves the watch when it is answered (result or error), provably re-sent,
//!   or cancelled (`notifications/cancelled`).
//! - `abandoned` (one finding per call, class loss) when the watch is `abandon_after` old with
//!   the stream still not reopened (sweep), at `finish` (the end of the run, whatever the age),
//!   or when the stream is forgotten (grace or the ended-stream cap). `waited_ms` is the time
//!   since the last cut or failed resume; the detail says how many times it was cut and why
//!   the wait ended.
//! - Candidates: every later call with the same method and params (any session) that did not
//!   prove a re-send is named in `candidates` (at most [`MAX_CANDIDATES`] per call), and the
//!   detail says that the wire cannot tell it from the application's next identical call. The
//!   same holds for a `pending-call` still deferred (its stream ended cleanly without the answer).
//!
//! Invariant: watches are keyed by stream and dropped with it; each holds only ids, hashes and
//! at most [`MAX_CANDIDATES`] candidates per call.

use std::collections::HashMap;

use tokio::time::Instant;

use super::finding::{CandidateCall, Finding, FindingKind, StreamRef};
use super::ledger::Ledger;
use super::stream::StreamKey;

/// Candidates named per lost call, at most.
pub const MAX_CANDIDATES: usize = 8;

/// One call a watch waits for.
#[derive(Debug, Clone)]
struct LostCall {
    id: String,
    method: String,
    params_hash: u64,
    candidates: Vec<CandidateCall>,
}

/// The wait of one stream's unanswered calls.
#[derive(Debug, Clone)]
struct LostWatch {
    session: Option<String>,
    reference: StreamRef,
    since: Instant,
    cuts: u32,
    calls: Vec<LostCall>,
}

/// Every armed lost-call watch.
#[derive(Debug, Default)]
pub struct Lost {
    watches: HashMap<StreamKey, LostWatch>,
    /// Times each stream was cut (kept while the stream is remembered).
    cuts: HashMap<StreamKey, u32>,
    /// Streams holding deferred findings (a `pending-call` may name candidates too).
    deferring: std::collections::HashSet<StreamKey>,
}

impl Lost {
    /// Watches armed.
    pub fn len(&self) -> usize {
        self.watches.len()
    }

    /// True if no watch is armed.
    pub fn is_empty(&self) -> bool {
        self.watches.is_empty()
    }

    /// Call `id` of stream `key` was answered, re-sent or cancelled: it is not waited for.
    pub fn resolved(&mut self, key: StreamKey, id: &str) {
        if let Some(w) = self.watches.get_mut(&key) {
            w.calls.retain(|c| c.id != id);
            if w.calls.is_empty() {
                self.watches.remove(&key);
            }
        }
    }

    /// A resume of stream `key` opened: its wait pauses until the resume ends.
    pub fn pause(&mut self, key: StreamKey) {
        self.watches.remove(&key);
    }

    /// Stream `key` is forgotten.
    pub fn forget(&mut self, key: StreamKey) {
        self.watches.remove(&key);
        self.cuts.remove(&key);
        self.deferring.remove(&key);
    }

    /// Stream `key` holds deferred findings.
    pub fn deferring(&mut self, key: StreamKey) {
        self.deferring.insert(key);
    }

    /// Stream `key`'s deferred findings were reported or dropped.
    pub fn settled(&mut self, key: StreamKey) {
        self.deferring.remove(&key);
    }

    /// Notes a cut of stream `key`.
    pub fn count_cut(&mut self, key: StreamKey) {
        *self.cuts.entry(key).or_insert(0) += 1;
    }

    /// Gives back capacity once most entries are gone.
    pub fn shrink(&mut self) {
        super::gauges::shrink(&mut self.watches);
        super::gauges::shrink(&mut self.cuts);
        self.deferring
            .shrink_to(super::gauges::room_for(self.deferring.len()));
    }
}

impl Ledger {
    /// Arms (or re-arms, its clock at `now`) the lost-call watch of stream `key` for every call
    /// still unanswered; a stream with none has no watch.
    pub fn arm_lost(&mut self, now: Instant, key: StreamKey) {
        let Some(stream) = self.streams.get(&key) else {
            return;
        };
        let old = self.lost.watches.remove(&key);
        let calls: Vec<LostCall> = stream
            .unanswered()
            .filter(|c| !c.reported)
            .map(|c| LostCall {
                id: c.id.clone(),
                method: c.method.clone(),
                params_hash: c.params_hash,
                candidates: old
                    .as_ref()
                    .and_then(|w| w.calls.iter().find(|o| o.id == c.id))
                    .map(|o| o.candidates.clone())
                    .unwrap_or_default(),
            })
            .collect();
        if calls.is_empty() {
            return;
        }
        let cuts = self.lost.cuts.get(&key).copied().unwrap_or(0);
        self.lost.watches.insert(
            key,
            LostWatch {
                session: stream.session.clone(),
                reference: stream.reference.clone(),
                since: now,
                cuts,
                calls,
            },
        );
    }

    /// A new call that proved no re-send: it is a candidate of every waiting call with the same
    /// method and params.
    pub fn note_candidate(
        &mut self,
        now: Instant,
        session: &Option<String>,
        (id, method, params_hash): (&str, &str, u64),
        (conn, seq): (u64, u64),
    ) {
        if self.lost.watches.is_empty() && self.lost.deferring.is_empty() {
            return;
        }
        let at_ms = self.ms(now);
        let candidate = CandidateCall {
            id: id.to_owned(),
            session: session.clone(),
            conn,
            seq,
            at_ms,
        };
        let keys: Vec<StreamKey> = self.lost.deferring.iter().copied().collect();
        for key in keys {
            let Some(stream) = self.streams.get_mut(&key) else {
                continue;
            };
            let calls = &stream.calls;
            for f in stream.deferred.iter_mut().filter(|f| {
                f.kind == FindingKind::PendingCall && f.candidates.len() < MAX_CANDIDATES
            }) {
                let same = f.ids.first().is_some_and(|pid| {
                    calls
                        .iter()
                        .any(|c| &c.id == pid && c.method == method && c.params_hash == params_hash)
                });
                if same {
                    f.candidates.push(candidate.clone());
                    if f.candidates.len() == 1 {
                        f.detail.push_str(
                            "; later identical call(s) carry no proof of being its re-send \
                             (see candidates): the wire cannot tell a re-send from the \
                             application's next identical call, so it is not counted as recovered",
                        );
                    }
                }
            }
        }
        for w in self.lost.watches.values_mut() {
            for c in w
                .calls
                .iter_mut()
                .filter(|c| c.method == method && c.params_hash == params_hash)
            {
                if c.candidates.len() < MAX_CANDIDATES {
                    c.candidates.push(candidate.clone());
                }
            }
        }
    }

    /// Call `id` of `session` was cancelled by the client or answered with an error.
    pub fn lost_resolved_by_id(&mut self, session: &Option<String>, id: &str) {
        let Some(key) = self
            .sessions
            .get(session)
            .and_then(|s| s.calls.get(id))
            .copied()
        else {
            return;
        };
        self.lost.resolved(key, id);
    }

    /// Reports `abandoned` for watches `abandon_after` old whose stream is not reopened, or for
    /// all of them at `finish`.
    pub fn settle_lost(&mut self, now: Instant, finish: bool) {
        let abandon = self.cfg.abandon_after;
        let due: Vec<StreamKey> = self
            .lost
            .watches
            .iter()
            .filter(|(k, w)| {
                let open = self.streams.get(k).is_some_and(|s| s.open_legs > 0);
                !open && (finish || now.saturating_duration_since(w.since) >= abandon)
            })
            .map(|(k, _)| *k)
            .collect();
        let why = if finish {
            "the run ended"
        } else {
            "abandon_after passed"
        };
        for key in due {
            self.report_lost(now, key, why);
        }
    }

    /// Reports the watch of stream `key` now (its stream is being forgotten, or its wait ended).
    pub fn report_lost(&mut self, now: Instant, key: StreamKey, why: &str) {
        let Some(w) = self.lost.watches.remove(&key) else {
            return;
        };
        let waited = now.saturating_duration_since(w.since);
        let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        let shared = self.resends.ids_shared.clone();
        let mut out = Vec::new();
        for c in w.calls {
            let Some(call) = self
                .streams
                .get_mut(&key)
                .and_then(|s| s.calls.iter_mut().find(|x| x.id == c.id))
            else {
                continue;
            };
            if call.answers > 0 || call.replaced || call.reported {
                continue;
            }
            call.reported = true;
            let mut detail = format!(
                "{} {} got no answer, no resume and no proven re-send: cut {} time(s), it waited \
                 {waited_ms} ms after its last cut or failed resume until {why} \
                 (abandon_after {} ms)",
                c.method,
                c.id,
                w.cuts.max(1),
                self.cfg.abandon_after.as_millis()
            );
            if !c.candidates.is_empty() {
                let ids: Vec<String> = c
                    .candidates
                    .iter()
                    .map(|k| {
                        format!(
                            "{} (session {}, connection {} request {})",
                            k.id,
                            k.session.as_deref().unwrap_or("-"),
                            k.conn,
                            k.seq
                        )
                    })
                    .collect();
                detail.push_str(&format!(
                    "; later identical call(s) {} carry no proof of being its re-send (no shared \
                     Idempotency-Key, not the same id from the same client): the wire cannot tell \
                     a re-send from the application's next identical call, so the call is not \
                     counted as recovered",
                    ids.join(", ")
                ));
                if let Some(s) = &shared {
                    detail.push_str(&format!("; {s}"));
                }
            }
            let mut f = Finding::new(
                FindingKind::Abandoned,
                self.ms(now),
                w.session.clone(),
                w.reference.clone(),
            )
            .ids(vec![c.id.clone()])
            .detail(detail);
            f.waited_ms = Some(waited_ms);
            f.candidates = c.candidates;
            out.push(f);
        }
        for f in out {
            self.emit(f);
        }
    }
}
