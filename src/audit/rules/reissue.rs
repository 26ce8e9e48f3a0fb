//! Rule `reissued`: which later request provably sends an earlier, unanswered call again, so that a
//! client that recovered a call is never reported as losing it — and a client that did not is
//! never reported as recovered.
//!
//! What the wire can prove (the rule, precisely). A request R re-sends an earlier call C if and
//! only if C is unanswered (no result or error delivered), not already re-sent and not
//! cancelled, and one of:
//! - **`idempotency-key`**: R's POST carries an `Idempotency-Key` header (IETF httpapi draft)
//!   whose non-blank value equals the one C's POST carried. The client named both requests one
//!   logical call; any session, any era, whether or not C's stream was cut. tearline's own load
//!   client sends a fresh key per logical call and repeats it on every re-send; any client can.
//! - **`same-id`**: R carries C's JSON-RPC id with C's method and params (without `_meta`: a new
//!   progress token does not matter), from the same client, after C's stream was cut or ended
//!   without its answer. "The same client" is the same `Mcp-Session-Id`. Without a session
//!   (MCP 2026-07-28, plain clients) the wire cannot tell two clients apart: the same id counts
//!   as proof only while no two session-less requests have shown that ids are shared — the same
//!   id in flight twice at once, naming two different requests, or coming back after its
//!   request was answered (a client that starts its ids again, e.g. a new client object after a
//!   transport error, sends the cut call's id with the next identical call). From then on (for the rest
//!   of the run) only `Idempotency-Key` proves a session-less re-send, and the detail of every
//!   `unproven-resend` finding says why its candidates were not taken.
//!
//! The session handshake (`initialize`) is never linked by `same-id`: every client sends the
//! same one, id and params, before it has a session, so a retry of a cut handshake is on the
//! wire another client's first (see [`crate::audit::rpc::INITIALIZE`]).
//!
//! Nothing else is proof: an identical later call (same method and params, a new id), even the
//! first call of a renegotiated session, is what applications send anyway — they call the same
//! tool with the same arguments again and again — and the timing or the calls in between do not
//! separate it from a re-send. Such calls are named as `candidates` of the cut call's
//! `unproven-resend` finding (rule `abandoned`, class ambiguous), with the words "the wire
//! cannot tell", never linked.
//!
//! A link marks C re-sent in the ledger (it counts as answered for `pending-call`,
//! `silent-empty`, `abandoned` and the truncation watch), reports `reissued` (class info) with
//! both ids, both sessions and the proof, and queues a `Resent` ledger event that the registry
//! hands to every rule (the `abandoned` wait ends; for an MCP 2026-07-28 call the `stateless`
//! rule judges whether the first execution was visible: `reexecuted`). Ids found shared are
//! recorded in the ledger (`ids_shared`) for the detail of `unproven-resend`.
//!
//! When the link is made (why it is held). The answer that makes C answered may reach the audit
//! after R although the client read it before sending R: the two travel on different
//! connections, and a pump records what it wrote right after the write, so a pump preempted
//! between the two is late by a millisecond or more (measured: 1.1 ms, a resume's answer behind
//! the client's re-send in a new session). Linking when R arrives made that order a false
//! `reissued`. So a link proven when R arrives is *held* for [`HOLD`] (of receipt time): if C
//! is answered meanwhile the link is dropped and R is an unproven call (as it is when the
//! answer comes first); else it is made when the hold ends, with R's time, before any later
//! observation is applied (and at once at the end of the run, or when C's stream is forgotten).
//! While held, C counts as re-sent for the next re-send (the next one links to R, as it would
//! after the link), and R is neither proven nor unproven (the registry hands R to
//! `on_unproven` only if its link is dropped). An answer that reaches the audit more than
//! [`HOLD`] after a re-send the client sent on having read it is still a false `reissued`.
//!
//! Invariants: at most [`MAX_KEYS`] idempotency keys are remembered (a key is forgotten with its
//! stream, the oldest first beyond the cap); the same-id lookup uses the session's call index
//! before the new request replaces it there, so no scan over streams is made per request.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use crate::audit::finding::{Finding, FindingKind};
use crate::audit::ledger::{HeldCall, Ledger, Proof, Resent};
use crate::audit::rpc::{INITIALIZE, is_stateless_version};
use crate::audit::rule::{AnswerSeen, NewCall, RequestView, Rule};
use crate::audit::stream::StreamKey;
use tokio::time::Instant;

/// Idempotency keys remembered, at most (oldest forgotten first).
pub const MAX_KEYS: usize = 65_536;

/// How long a re-send link is held before it is made (receipt time; see the module doc): at
/// least how late a pump's record of a write can reach the audit behind another connection's.
pub const HOLD: Duration = Duration::from_millis(10);

/// A re-send link proven and held: call `old_id` of stream `key` re-sent by `new`.
#[derive(Debug)]
struct HeldLink {
    key: StreamKey,
    old_id: String,
    new: HeldCall,
    proof: Proof,
    due: Instant,
}

/// The re-send rule: what it remembers between requests.
#[derive(Debug, Default)]
pub struct Reissue {
    /// Idempotency key → the stream and id of the call that carried it last.
    keys: HashMap<String, (StreamKey, String)>,
    order: VecDeque<String>,
    /// Links proven and not yet made, in the order of their re-sends.
    held: Vec<HeldLink>,
}

impl Reissue {
    /// Remembers that `key` named call `id` of stream `stream`.
    fn remember(&mut self, key: &str, stream: StreamKey, id: &str) {
        if self.keys.len() >= MAX_KEYS && !self.keys.contains_key(key) {
            while let Some(old) = self.order.pop_front() {
                if self.keys.remove(&old).is_some() {
                    break;
                }
            }
        }
        if self
            .keys
            .insert(key.to_owned(), (stream, id.to_owned()))
            .is_none()
        {
            self.order.push_back(key.to_owned());
        }
    }

    /// Links `new` to the earlier call it provably re-sends, if any (rules in the module doc);
    /// runs before `new`'s own call is indexed.
    fn link_reissue(&mut self, l: &mut Ledger, new: &NewCall<'_>) {
        let by_key = new
            .key
            .and_then(|k| self.keys.get(k).cloned())
            .filter(|(key, id)| unanswered_call(l, *key, id) && !self.holds(*key, id));
        let (key, old_id, proof) = match by_key {
            Some((key, id)) => (key, id, Proof::IdempotencyKey),
            None => {
                note_shared_ids(l, new);
                let Some(key) = l
                    .sessions
                    .get(new.session)
                    .and_then(|s| s.calls.get(new.id))
                    .copied()
                else {
                    return;
                };
                let Some(stream) = l.streams.get(&key) else {
                    return;
                };
                let Some(call) = stream.calls.iter().find(|c| c.id == new.id) else {
                    return;
                };
                let after_cut = stream.cut_at.is_some() || stream.open_legs == 0;
                let same = call.method == new.method
                    && call.params_hash == new.params_hash
                    && call.method != INITIALIZE;
                let client_known = new.session.is_some() || l.ids_shared.is_none();
                let open = unanswered_call(l, key, new.id) && !self.holds(key, new.id);
                if !(same && after_cut && client_known && open) {
                    return;
                }
                (key, new.id.to_owned(), Proof::SameId)
            }
        };
        let due = new.now + HOLD;
        self.held.push(HeldLink {
            key,
            old_id,
            new: new.to_held(),
            proof,
            due,
        });
        l.call_held = true;
        l.held_due = Some(l.held_due.map_or(due, |t| t.min(due)));
        l.deadlines.arm_after(new.now, HOLD);
    }

    /// True if a held link re-sends call `id` of stream `key`.
    fn holds(&self, key: StreamKey, id: &str) -> bool {
        self.held.iter().any(|h| h.key == key && h.old_id == id)
    }

    /// Makes (or, its call answered meanwhile, drops) every held link `settle` selects, in the
    /// order of their re-sends; a dropped link's re-send is queued as unproven.
    fn settle(&mut self, l: &mut Ledger, settle: impl Fn(&HeldLink) -> bool) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| settle(h));
        self.held = later;
        l.held_due = self.held.iter().map(|h| h.due).min();
        for h in now {
            if unanswered_call(l, h.key, &h.old_id) {
                link(l, h.key, &h.old_id, &NewCall::from(&h.new), h.proof);
            } else {
                l.unproven.push(h.new);
            }
        }
    }
}

/// True if call `id` of stream `key` has no answer, no re-send and no cancellation.
fn unanswered_call(l: &Ledger, key: StreamKey, id: &str) -> bool {
    l.streams
        .get(&key)
        .is_some_and(|s| s.unanswered().any(|c| c.id == id))
}

/// Session-less evidence that several clients share ids: `new` repeats the id of a call
/// that is still in flight (not cut, not ended), or of a different request.
fn note_shared_ids(l: &mut Ledger, new: &NewCall<'_>) {
    if new.session.is_some() || l.ids_shared.is_some() {
        return;
    }
    let Some(key) = l.sessions.get(&None).and_then(|s| s.calls.get(new.id)) else {
        return;
    };
    let Some(stream) = l.streams.get(key) else {
        return;
    };
    let Some(call) = stream.calls.iter().find(|c| c.id == new.id) else {
        return;
    };
    let in_flight = stream.open_legs > 0 && stream.cut_at.is_none() && call.answers == 0;
    let other = call.method != new.method || call.params_hash != new.params_hash;
    // Nobody re-sends an answered call: its id coming back means ids start again (a client
    // that opened a new connection pool, another process), the same request or not.
    let answered = call.answers > 0;
    if in_flight || other || answered {
        l.ids_shared = Some(format!(
            "session-less requests share JSON-RPC ids (id {} {} at {} ms), so an equal id \
             proves no re-send",
            new.id,
            if in_flight {
                "was sent again while its first request was still in flight"
            } else if other {
                "named two different requests"
            } else {
                "came back after its request was answered"
            },
            l.ms(new.now)
        ));
    }
}

/// Marks call `old_id` of stream `key` re-sent by `new`, drops its deferred `pending-call`,
/// reports `reissued` and queues the [`Resent`] event.
fn link(l: &mut Ledger, key: StreamKey, old_id: &str, new: &NewCall<'_>, proof: Proof) {
    let now = new.now;
    let Some(stream) = l.streams.get_mut(&key) else {
        return;
    };
    let Some(call) = stream.calls.iter_mut().find(|c| c.id == old_id) else {
        return;
    };
    call.replaced = true;
    let method = call.method.clone();
    stream.deferred.retain(|f| {
        !(f.kind == FindingKind::PendingCall && f.ids.first().map(String::as_str) == Some(old_id))
    });
    let how = if stream.cut_at.is_some() && stream.awaiting_reconnect {
        "was cut and not resumed"
    } else if stream.cut_at.is_some() {
        "was cut, resumed, and not answered"
    } else if stream.open_legs > 0 {
        "was still open"
    } else {
        "ended without its response"
    };
    let stateless = stream.version.as_deref().is_some_and(is_stateless_version);
    let reconnect = stream.awaiting_reconnect.then_some(stream.cut_at).flatten();
    stream.awaiting_reconnect = false;
    let old_session = stream.session.clone();
    let where_ = if old_session.is_none() && new.session.is_none() {
        "without a session".to_string()
    } else if old_session == *new.session {
        "in the same session".to_string()
    } else {
        format!(
            "in new session {}",
            new.session.as_deref().unwrap_or("(none)")
        )
    };
    let evidence = match proof {
        Proof::IdempotencyKey => format!(
            "both carry Idempotency-Key {:?}",
            new.key.unwrap_or_default()
        ),
        Proof::SameId => "same JSON-RPC id, method and params from the same client".into(),
    };
    let mut f: Finding = l
        .finding(FindingKind::Reissued, key, now)
        .ids(vec![old_id.to_owned(), new.id.to_owned()])
        .detail(format!(
            "{method} {old_id}{} (its stream {how}) was sent again as {} {where_}: \
             {evidence}; the re-send replaces it, so it is not lost",
            old_session
                .as_deref()
                .map_or_else(String::new, |s| format!(" of session {s}")),
            new.id,
        ));
    f.proof = Some(proof.as_str().to_owned());
    l.emit(f);
    if let Some(cut) = reconnect {
        l.histos
            .record("client-reconnect", now.saturating_duration_since(cut));
    }
    l.resent.push(Resent {
        at: now,
        key,
        old_id: old_id.to_owned(),
        new_id: new.id.to_owned(),
        proof,
        stateless,
    });
}

impl Rule for Reissue {
    fn name(&self) -> &'static str {
        "reissue"
    }

    fn on_call(&mut self, l: &mut Ledger, c: &NewCall<'_>) {
        self.link_reissue(l, c);
    }

    /// The call a held link re-sends was answered: the link is dropped.
    fn on_answer(&mut self, l: &mut Ledger, a: &AnswerSeen<'_>) {
        if self.holds(a.key, a.id) {
            self.settle(l, |h| h.key == a.key && h.old_id == a.id);
        }
    }

    fn on_held_due(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        self.settle(l, |h| finish || h.due <= now);
    }

    fn on_stream_opened(&mut self, l: &mut Ledger, key: StreamKey, r: &RequestView<'_>) {
        let (Some(k), Some(stream)) = (r.idempotency_key, l.streams.get(&key)) else {
            return;
        };
        for c in &stream.calls {
            self.remember(k, key, &c.id);
        }
    }

    /// Makes the held links of the stream's calls, then forgets the keys of its calls.
    fn on_forget(&mut self, l: &mut Ledger, _now: Instant, key: StreamKey) {
        if self.held.iter().any(|h| h.key == key) {
            self.settle(l, |h| h.key == key);
        }
        let Some(stream) = l.streams.get(&key) else {
            return;
        };
        for k in stream.calls.iter().filter_map(|c| c.key.as_ref()) {
            if self.keys.get(k).is_some_and(|(s, _)| *s == key) {
                self.keys.remove(k);
            }
        }
        if self.order.len() > 2 * self.keys.len() + 1024 {
            let live = &self.keys;
            self.order.retain(|k| live.contains_key(k));
        }
    }

    fn shrink(&mut self) {
        crate::audit::gauges::shrink(&mut self.keys);
        self.order
            .shrink_to(crate::audit::gauges::room_for(self.order.len()));
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        vec![
            (
                "idempotency_keys",
                u64::try_from(self.keys.len()).unwrap_or(u64::MAX),
            ),
            (
                "held_links",
                u64::try_from(self.held.len()).unwrap_or(u64::MAX),
            ),
        ]
    }
}
