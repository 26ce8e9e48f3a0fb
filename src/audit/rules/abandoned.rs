//! Rule `abandoned` — unanswered means lost: a call the proxy cut that nobody answered, resumed or provably re-sent
//! is reported `abandoned` (class loss), in both MCP eras, when its wait ends.
//!
//! Why: a cut call that hangs is the silent loss this proxy exists to show. A legacy client may
//! resume (and see its resumes cut until it gives up), may have had nothing to resume from (cut
//! in the priming event, before any id), or may re-issue without proof; a 2026-07-28 client
//! cannot resume at all. Whatever the reason, the call never got its answer.
//!
//! Precise rules:
//! - A *lost-call watch* is armed on a stream, for each of its calls without an answer, a
//!   proven re-send (rule `reissue`, handed over as a `Resent` ledger event) or a cancellation, when its last open leg ends by a proxy cut,
//!   or when a resume of a stream cut before ends without the answer and not cleanly (a refused
//!   resume — `explicit-loss` — or a connection that closed). A resume that ends cleanly without
//!   the answer is `pending-call`'s (the engine's `events`), never both.
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

use crate::audit::finding::{CandidateCall, Finding, FindingKind, StreamRef};
use crate::audit::ledger::{Ledger, Resent};
use crate::audit::rpc::RpcMessage;
use crate::audit::rule::{AnswerSeen, CutSeen, LegEnded, NewCall, RequestView, Rule};
use crate::audit::stream::StreamKey;

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

/// The `abandoned` rule: every armed lost-call watch.
#[derive(Debug, Default)]
pub struct Abandoned {
    watches: HashMap<StreamKey, LostWatch>,
    /// Times each stream was cut (kept while the stream is remembered).
    cuts: HashMap<StreamKey, u32>,
}

impl Abandoned {
    /// Call `id` of stream `key` was answered, re-sent or cancelled: it is not waited for.
    fn resolved(&mut self, key: StreamKey, id: &str) {
        if let Some(w) = self.watches.get_mut(&key) {
            w.calls.retain(|c| c.id != id);
            if w.calls.is_empty() {
                self.watches.remove(&key);
            }
        }
    }
    /// Arms (or re-arms, its clock at `now`) the lost-call watch of stream `key` for every call
    /// still unanswered; a stream with none has no watch.
    fn arm_lost(&mut self, l: &Ledger, now: Instant, key: StreamKey) {
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        let old = self.watches.remove(&key);
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
        let cuts = self.cuts.get(&key).copied().unwrap_or(0);
        self.watches.insert(
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
    fn note_candidate(&mut self, l: &mut Ledger, new: &NewCall<'_>) {
        let (id, method, params_hash) = (new.id, new.method, new.params_hash);
        if self.watches.is_empty() && l.deferring.is_empty() {
            return;
        }
        let at_ms = l.ms(new.now);
        let candidate = CandidateCall {
            id: id.to_owned(),
            session: new.session.clone(),
            conn: new.conn,
            seq: new.seq,
            at_ms,
        };
        let keys: Vec<StreamKey> = l.deferring.iter().copied().collect();
        for key in keys {
            let Some(stream) = l.streams.get_mut(&key) else {
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
        for w in self.watches.values_mut() {
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
    fn resolved_by_id(&mut self, l: &Ledger, session: &Option<String>, id: &str) {
        let Some(key) = l
            .sessions
            .get(session)
            .and_then(|s| s.calls.get(id))
            .copied()
        else {
            return;
        };
        self.resolved(key, id);
    }

    /// Reports `abandoned` for watches `abandon_after` old whose stream is not reopened, or for
    /// all of them at `finish`.
    fn settle_lost(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        let abandon = l.cfg.abandon_after;
        let due: Vec<StreamKey> = self
            .watches
            .iter()
            .filter(|(k, w)| {
                let open = l.streams.get(k).is_some_and(|s| s.open_legs > 0);
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
            self.report_lost(l, now, key, why);
        }
    }

    /// Reports the watch of stream `key` now (its stream is being forgotten, or its wait ended).
    fn report_lost(&mut self, l: &mut Ledger, now: Instant, key: StreamKey, why: &str) {
        let Some(w) = self.watches.remove(&key) else {
            return;
        };
        let waited = now.saturating_duration_since(w.since);
        let waited_ms = crate::units::millis(waited);
        let shared = l.ids_shared.clone();
        let mut out = Vec::new();
        for c in w.calls {
            let Some(call) = l
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
                crate::units::millis(l.cfg.abandon_after)
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
                l.ms(now),
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
            l.emit(f);
        }
    }
}

impl Rule for Abandoned {
    fn name(&self) -> &'static str {
        "abandoned"
    }

    /// A `notifications/cancelled` ends the wait of the call it names.
    fn on_request(&mut self, l: &mut Ledger, r: &RequestView<'_>) {
        if r.method != "POST" {
            return;
        }
        for m in r.msgs {
            if let RpcMessage::Notification {
                cancelled: Some(id),
                ..
            } = m
            {
                self.resolved_by_id(l, r.session, id);
            }
        }
    }

    fn on_resent(&mut self, _l: &mut Ledger, r: &Resent) {
        self.resolved(r.key, &r.old_id);
    }

    fn on_unproven(&mut self, l: &mut Ledger, c: &NewCall<'_>) {
        self.note_candidate(l, c);
    }

    /// A resume opened: the wait pauses until the resume ends.
    fn on_resume(&mut self, _l: &mut Ledger, key: StreamKey, _session: &Option<String>) {
        self.watches.remove(&key);
    }

    fn on_answer(&mut self, _l: &mut Ledger, a: &AnswerSeen<'_>) {
        self.resolved(a.key, a.id);
    }

    fn on_cut(&mut self, _l: &mut Ledger, c: &CutSeen<'_>) {
        *self.cuts.entry(c.key).or_insert(0) += 1;
    }

    fn on_leg_end(&mut self, l: &mut Ledger, e: &LegEnded) {
        if e.last && !e.blind && (e.cut || e.failed_resume) {
            self.arm_lost(l, e.now, e.key);
            if self.watches.contains_key(&e.key) {
                l.deadlines.arm_after(e.now, l.cfg.abandon_after);
            }
        }
    }

    fn on_sweep(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        self.settle_lost(l, now, finish);
    }

    fn on_forget(&mut self, l: &mut Ledger, now: Instant, key: StreamKey) {
        self.report_lost(l, now, key, "its stream was forgotten");
        self.watches.remove(&key);
        self.cuts.remove(&key);
    }

    fn shrink(&mut self) {
        crate::audit::gauges::shrink(&mut self.watches);
        crate::audit::gauges::shrink(&mut self.cuts);
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        vec![(
            "lost_calls",
            u64::try_from(self.watches.len()).unwrap_or(u64::MAX),
        )]
    }
}
