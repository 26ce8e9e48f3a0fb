//! Rules `abandoned` and `unproven-resend` — unanswered means lost, unless the wire cannot
//! tell: a call the proxy cut that nobody answered, resumed or provably re-sent is reported,
//! in both MCP eras, when its wait ends: `abandoned` (class loss) if no identical call followed
//! it, `unproven-resend` (class ambiguous) if one did.
//!
//! Why: a cut call that hangs is the silent loss this proxy exists to show. A legacy client may
//! resume (and see its resumes cut until it gives up), may have had nothing to resume from (cut
//! in the priming event, before any id), or may re-issue without proof; a 2026-07-28 client
//! cannot resume at all. Whatever the reason, the call never got its answer. But an app-level
//! retry layer re-sends a failed call with a new JSON-RPC id and nothing else: on the wire that
//! re-send is the same bytes as the application's next identical call. Calling it lost counts
//! recovered calls as losses; calling it recovered hides real losses and double executions.
//! So it gets its own verdict, which says exactly that, and how to make the wire tell.
//!
//! Precise rules:
//! - A *lost-call watch* is armed on a stream, for each of its calls without an answer, a
//!   proven re-send (rule `reissue`, handed over as a `Resent` ledger event) or a cancellation,
//!   when its last open leg ends by a proxy cut, or when a resume of a stream cut before ends
//!   without the answer and not cleanly (a refused resume — `explicit-loss` — or a connection
//!   that closed). A resume that ends cleanly without the answer is `pending-call`'s (the
//!   engine's `events`), never both.
//! - The session handshake (`initialize`) is never watched: a retry of it cannot be told from
//!   another client's handshake, and a session that never opened shows in what follows.
//! - Opening a resume of the stream pauses the watch (it keeps its candidates); the resume's
//!   end arms it again, its clock restarting at that end, or drops it if the resume ended
//!   cleanly.
//! - A call leaves the watch when it is answered (result or error), provably re-sent,
//!   or cancelled (`notifications/cancelled`).
//! - Candidates: every later call with the same method and params (any id, any session) that
//!   did not prove a re-send, sent while the call is watched (armed or paused), is a candidate
//!   (at most [`MAX_CANDIDATES`] are named per call) — unless it came in another session and
//!   both carry an `Idempotency-Key` and the keys differ: a client re-sending in a renegotiated
//!   session marks the re-send with the call's own key, so several sessions making the same
//!   call, each under its own key, are not each other's re-sends. Within a session (or with
//!   none) an identical call is a candidate whatever its key.
//! - When the watch is `abandon_after` old with the stream still not reopened (sweep), at
//!   `finish` (the end of the run, whatever the age), or when the stream is forgotten (grace or
//!   the ended-stream cap), each call still watched is reported once: `unproven-resend` if it
//!   has a candidate — naming them, saying that the wire cannot tell a re-send from a repeat and
//!   that an `Idempotency-Key` header makes it tell, and, if the call's execution had visibly
//!   started (the notion of `reexecuted`, recorded by rule `stateless` as `Call::started`),
//!   that the tool may have run twice — else `abandoned`. `waited_ms` is the time since the
//!   last cut or failed resume; the detail says how many times it was cut and why the wait
//!   ended.
//! - A `pending-call` still deferred (its stream ended cleanly without the answer) names its
//!   later identical calls as candidates the same way; it stays `pending-call`.
//!
//! - On HTTP/2 a stream an endpoint ended (the server's `RST_STREAM`, or not processed:
//!   `REFUSED_STREAM`, above a `GOAWAY`'s last stream; see `audit::h2`) is waited for as a cut
//!   one is, and the finding's detail ends with how it ended.
//!
//! Invariant: watches are keyed by stream and dropped with it; each holds only ids, hashes and
//! at most [`MAX_CANDIDATES`] candidates per call.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::audit::finding::{CandidateCall, Finding, FindingKind, StreamRef};
use crate::audit::ledger::{Ledger, Resent};
use crate::audit::rpc::{INITIALIZE, RpcMessage};
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
    /// Its POST's `Idempotency-Key`: a later call under another key is not its re-send.
    key: Option<String>,
    candidates: Vec<CandidateCall>,
}

/// Whether a later call under key `later` may be a re-send of a call under key `earlier`:
/// not when it came in another session (`same_session` false) and both carry an
/// `Idempotency-Key` and the keys differ — a client that re-sends in a renegotiated session
/// marks the re-send with the call's own key (rule `reissue` proves those), so several
/// sessions making the same call, each under its own key, are never each other's candidates.
/// Within one session (or with no sessions, 2026-07-28) an identical call stays a candidate
/// whatever its key: the app repeating a call it lost is not told apart from a re-send.
fn may_resend(earlier: Option<&str>, later: Option<&str>, same_session: bool) -> bool {
    same_session || !matches!((earlier, later), (Some(a), Some(b)) if a != b)
}

/// The wait of one stream's unanswered calls.
#[derive(Debug, Clone)]
struct LostWatch {
    session: Option<String>,
    reference: StreamRef,
    since: Instant,
    cuts: u32,
    calls: Vec<LostCall>,
    /// HTTP/2: how an endpoint ended the stream, if not the proxy (`Stream::h2_end`).
    h2_end: Option<String>,
}

/// The `abandoned` rule: every armed lost-call watch.
#[derive(Debug, Default)]
pub struct Abandoned {
    watches: HashMap<StreamKey, LostWatch>,
    /// Watches paused by an open resume (their candidates kept until the resume ends).
    paused: HashMap<StreamKey, LostWatch>,
    /// Times each stream was cut (kept while the stream is remembered).
    cuts: HashMap<StreamKey, u32>,
}

impl Abandoned {
    /// Call `id` of stream `key` was answered, re-sent or cancelled: it is not waited for.
    fn resolved(&mut self, key: StreamKey, id: &str) {
        for map in [&mut self.watches, &mut self.paused] {
            if let Some(w) = map.get_mut(&key) {
                w.calls.retain(|c| c.id != id);
                if w.calls.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }
    /// Arms (or re-arms, its clock at `now`) the lost-call watch of stream `key` for every call
    /// still unanswered; a stream with none has no watch.
    fn arm_lost(&mut self, l: &Ledger, now: Instant, key: StreamKey) {
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        let old = self
            .watches
            .remove(&key)
            .or_else(|| self.paused.remove(&key));
        let calls: Vec<LostCall> = stream
            .unanswered()
            .filter(|c| !c.reported && c.method != INITIALIZE)
            .map(|c| LostCall {
                id: c.id.clone(),
                method: c.method.clone(),
                params_hash: c.params_hash,
                key: c.key.clone(),
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
                h2_end: stream.h2_end.clone(),
            },
        );
    }

    /// A new call that proved no re-send: it is a candidate of every waiting call with the same
    /// method and params.
    fn note_candidate(&mut self, l: &mut Ledger, new: &NewCall<'_>) {
        let (id, method, params_hash) = (new.id, new.method, new.params_hash);
        if self.watches.is_empty() && self.paused.is_empty() && l.deferring.is_empty() {
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
            let same_session = stream.session == *new.session;
            let calls = &stream.calls;
            for f in stream.deferred.iter_mut().filter(|f| {
                f.kind == FindingKind::PendingCall && f.candidates.len() < MAX_CANDIDATES
            }) {
                let same = f.ids.first().is_some_and(|pid| {
                    calls.iter().any(|c| {
                        &c.id == pid
                            && c.method == method
                            && c.params_hash == params_hash
                            && may_resend(c.key.as_deref(), new.key, same_session)
                    })
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
        for w in self.watches.values_mut().chain(self.paused.values_mut()) {
            let same_session = w.session == *new.session;
            for c in w.calls.iter_mut().filter(|c| {
                c.method == method
                    && c.params_hash == params_hash
                    && may_resend(c.key.as_deref(), new.key, same_session)
            }) {
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
        let shared = l.ids_shared.clone();
        let end = WaitEnd {
            at_ms: l.ms(now),
            waited_ms: crate::units::millis(now.saturating_duration_since(w.since)),
            abandon_after_ms: crate::units::millis(l.cfg.abandon_after),
            why,
            shared: shared.as_deref(),
        };
        let mut out = Vec::new();
        for c in &w.calls {
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
            out.push(if c.candidates.is_empty() {
                lost(&end, &w, c)
            } else {
                unproven(&end, &w, c, call.started)
            });
        }
        for f in out {
            l.emit(f);
        }
    }
}

/// How and when a watch's wait ended: the facts every finding of it reports.
struct WaitEnd<'a> {
    /// When (milliseconds since the auditor was created).
    at_ms: u64,
    /// Milliseconds since the last cut or failed resume.
    waited_ms: u64,
    /// The configured `abandon_after`, in milliseconds.
    abandon_after_ms: u64,
    /// Why the wait ended.
    why: &'a str,
    /// Why equal session-less ids prove nothing, if they do not (see rule `reissue`).
    shared: Option<&'a str>,
}

impl WaitEnd<'_> {
    /// How long and how often the calls of watch `w` waited, for the details.
    fn waited(&self, w: &LostWatch) -> String {
        format!(
            "cut {} time(s), it waited {} ms after its last cut or failed resume until {} \
             (abandon_after {} ms)",
            w.cuts.max(1),
            self.waited_ms,
            self.why,
            self.abandon_after_ms
        )
    }

    /// A finding of `kind` about call `c` of watch `w`.
    fn finding(
        &self,
        kind: FindingKind,
        w: &LostWatch,
        c: &LostCall,
        mut detail: String,
    ) -> Finding {
        if let Some(why) = &w.h2_end {
            detail.push_str(&format!("; {why}"));
        }
        let mut f = Finding::new(kind, self.at_ms, w.session.clone(), w.reference.clone())
            .ids(vec![c.id.clone()])
            .detail(detail);
        f.waited_ms = Some(self.waited_ms);
        f
    }
}

/// `abandoned`: call `c` of watch `w`, with no later identical call.
fn lost(end: &WaitEnd<'_>, w: &LostWatch, c: &LostCall) -> Finding {
    let detail = format!(
        "{} {} got no answer, no resume, no proven re-send and no later identical call: {}",
        c.method,
        c.id,
        end.waited(w)
    );
    end.finding(FindingKind::Abandoned, w, c, detail)
}

/// `unproven-resend`: call `c` of watch `w`, followed by its candidates (`started`: what showed
/// its first execution, if anything did).
fn unproven(
    end: &WaitEnd<'_>,
    w: &LostWatch,
    c: &LostCall,
    started: Option<&'static str>,
) -> Finding {
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
    let mut detail = format!(
        "{} {} got no answer, no resume and no proven re-send, but later identical call(s) {} \
         (same method and params) followed it without proof of being its re-send (no shared \
         Idempotency-Key, not the same id from the same client): the wire cannot tell a \
         re-send from the application's next identical call, so the call may have been \
         recovered or lost; to make the wire tell, send an Idempotency-Key header with the \
         call and the same key with its re-send; {}",
        c.method,
        c.id,
        ids.join(", "),
        end.waited(w)
    );
    if let Some(what) = started {
        detail.push_str(&format!(
            "; its first execution had visibly started ({what} reached the client before the \
             cut): if a candidate is its re-send, the tool may have run twice"
        ));
    }
    if let Some(s) = end.shared {
        detail.push_str(&format!("; {s}"));
    }
    let mut f = end.finding(FindingKind::UnprovenResend, w, c, detail);
    f.candidates = c.candidates.clone();
    f.visible_start = started;
    f
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
        if let Some(w) = self.watches.remove(&key) {
            self.paused.insert(key, w);
        }
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
        } else if e.last {
            // The resume ended cleanly (or unseen): its calls are `pending-call`'s, not ours.
            self.paused.remove(&e.key);
        }
    }

    fn on_sweep(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        self.settle_lost(l, now, finish);
    }

    fn on_forget(&mut self, l: &mut Ledger, now: Instant, key: StreamKey) {
        self.report_lost(l, now, key, "its stream was forgotten");
        self.watches.remove(&key);
        self.paused.remove(&key);
        self.cuts.remove(&key);
    }

    fn shrink(&mut self) {
        crate::audit::gauges::shrink(&mut self.watches);
        crate::audit::gauges::shrink(&mut self.paused);
        crate::audit::gauges::shrink(&mut self.cuts);
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        vec![(
            "lost_calls",
            u64::try_from(self.watches.len() + self.paused.len()).unwrap_or(u64::MAX),
        )]
    }
}
