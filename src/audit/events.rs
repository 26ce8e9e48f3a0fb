//! What happens downstream: response heads, bodies, delivered SSE events, stream ends and cuts,
//! and the judgements they close.
//!
//! Invariants:
//! - Only events the observer reports as delivered enter a ledger; a cut that tears an event
//!   records it as torn (its id, if its `id:` line was complete, becomes a cursor-ahead
//!   candidate); whether that is a `torn-cut` is rule `torn`'s.
//! - A cut ends every leg of its connection; the leg whose body was in flight (the lowest
//!   sequence number with a response head) is the one torn. On HTTP/2 a cut naming a stream
//!   (`h2_stream`) ends that stream's leg only, and the leg torn is the stream the cut names
//!   (`h2_stream`, else the point's `exchange`), never one guessed by order.
//! - An id committed without a dispatched event (`last_committed_id` at the cut) counts as
//!   delivered: a conformant client holds it as its cursor.
//! - `observer-gave-up` (class info) is reported once per leg whose body the wire observer
//!   stopped following; that leg is then blind: no replay verdict and no `pending-call` is
//!   derived from it, since events after the offset were relayed unseen.
//! - A leg's end hands the rules what they need (`rule::LegEnded`): `pending-call` (rule
//!   `pending`) is deferred with `silent-empty` until the stream is forgotten or `finish`.

use super::engine::Engine;
use super::finding::{FindingCut, FindingKind};
use super::judge::{LegEnd, ReplayClass};
use super::leak::{self, Named};
use super::ledger::Ledger;
use super::ledger::ReplaySignal;
use super::rpc::{self, RpcMessage, TOOLS_CALL};
use super::rule::{CrossEvent, CutSeen, LegEnded, ReplayEnded, ResumeAnswered};
use super::stream::{Origin, StreamKey, Torn};
use crate::vocab::CutAction;
use crate::vocab::Direction;
use crate::wire::CutPoint;
use bytes::Bytes;
use tokio::time::Instant;

/// Events longer than this are not parsed for progress values (a progress notification is
/// small; a long event is a result).
const MAX_PARSED: usize = 4096;

/// Order and gap facts kept per resume leg, at most.
const MAX_SEQ_FACTS: usize = 64;

/// The facts of one delivered SSE event.
#[derive(Debug)]
pub struct EventFacts {
    pub id: Option<String>,
    pub last_event_id: Option<String>,
    pub event_type: Option<std::borrow::Cow<'static, str>>,
    pub data_hash: u64,
    pub data_len: u64,
    pub data: Option<Bytes>,
}

impl Engine {
    pub fn on_response(
        &mut self,
        now: Instant,
        conn: u64,
        seq: u64,
        status: u16,
        content_type: Option<String>,
        session: Option<String>,
    ) {
        if (100..200).contains(&status) {
            return;
        }
        let Some(leg) = self.l.legs.get_mut(&(conn, seq)) else {
            return;
        };
        leg.status = Some(status);
        if !leg.late {
            let head = now.saturating_duration_since(leg.requested_at);
            self.l.histos.record("response-head", head);
        }
        leg.sse = content_type.as_deref().is_some_and(|c| {
            c.trim()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
        let key = leg.stream;
        let is_resume = leg.resume.is_some() || leg.unmapped_resume;
        let sse = leg.sse;
        if let Some(r) = &mut leg.resume
            && status != 200
        {
            r.explicit_reported = true;
        }
        if session.is_some()
            && self
                .l
                .streams
                .get(&key)
                .is_some_and(|s| s.session.is_none())
        {
            self.l.rehome(key, session, now);
        }
        if is_resume {
            let answered = ResumeAnswered {
                now,
                key,
                status,
                content_type: content_type.as_deref(),
                sse,
            };
            self.rules.on_resume_answered(&mut self.l, &answered);
        }
        if matches!(status, 202 | 204 | 304) || (is_resume && (status != 200 || !sse)) {
            self.end_leg(now, conn, seq, false, true);
        }
        // A GET answered with anything but a 200 event stream (a 404 `favicon.ico`, a 405)
        // opened no stream: forget it, so it neither owns ids nor waits for a resume.
        let get_stream = self
            .l
            .streams
            .get(&key)
            .is_some_and(|s| s.origin == Origin::Get && s.open_legs <= 1);
        if !is_resume && get_stream && (status != 200 || !sse) {
            self.l.legs.remove(&(conn, seq));
            if let Some(s) = self.l.streams.get_mut(&key) {
                s.open_legs = 0;
            }
            self.forget_stream(key);
        }
    }

    pub fn on_body(&mut self, now: Instant, conn: u64, seq: u64, body: Option<Bytes>) {
        let Some(key) = self.l.legs.get(&(conn, seq)).map(|l| l.stream) else {
            return;
        };
        if let Some(b) = body {
            self.on_server_messages(now, key, &b, true, false);
        }
        self.end_leg(now, conn, seq, false, true);
    }

    pub fn on_event(&mut self, now: Instant, conn: u64, seq: u64, ev: EventFacts) {
        let Some(leg) = self.l.legs.get_mut(&(conn, seq)) else {
            return;
        };
        let key = leg.stream;
        let first = !leg.first_event;
        leg.first_event = true;
        let gap = leg
            .last_event_at
            .replace(now)
            .map(|prev| now.saturating_duration_since(prev));
        let since = now.saturating_duration_since(leg.requested_at);
        let is_resume = leg.resume.is_some();
        if let Some(gap) = gap {
            self.l.histos.record("event-gap", gap);
        }
        if first && !leg.late {
            self.l.histos.record("first-event", since);
            if is_resume {
                self.l.histos.record("server-replay", since);
            }
        }
        // What the event names (a response id, a progress token) that only another session
        // declared: cross-session evidence by construction (`leak`).
        let named = is_resume.then(|| self.l.named_in(key, &ev)).flatten();
        let class = if is_resume {
            self.l.classify(key, conn, seq, &ev, named.is_some())
        } else {
            None
        };
        // A byte-identical copy of an event already delivered under the same id: any response
        // in it is a replay artefact (`replay-duplicate` or the client's `cursor-behind`).
        // A rolled-back event sent again (owed after a reset's unread window) is such a copy too.
        let copy = ev.id.as_ref().is_some_and(|id| {
            self.l.streams.get(&key).is_some_and(|s| {
                s.entry_of(id)
                    .is_some_and(|e| e.dispatched && e.hash == ev.data_hash)
                    || s.unsent_hash(id) == Some(ev.data_hash)
            })
        });
        let cross_id = match &class {
            Some(ReplayClass::Cross { id }) => Some(id.clone()),
            _ => None,
        };
        let cross = cross_id.is_some();
        let mut source = None;
        if let Some(r) = self
            .l
            .legs
            .get_mut(&(conn, seq))
            .and_then(|l| l.resume.as_mut())
        {
            if let Some(n) = named {
                r.leaked_from = Some(n);
            }
            source = r.leaked_from.as_ref().map(|n| n.source);
            if ev.event_type.as_deref() == Some("error") {
                r.error_event = true;
            }
            if let Some(c) = class {
                r.add(c, ev.data_len > 0);
            }
        }
        if !cross {
            self.l.sequence(key, conn, seq, &ev, is_resume);
            self.l
                .push_event(key, ev.id.clone(), ev.data_hash, ev.data_len, true, now);
            if let Some(s) = self.l.streams.get_mut(&key) {
                s.last_event_id = ev.last_event_id.clone().or(ev.id.clone());
            }
        }
        if let Some(data) = &ev.data {
            let whole = data.len() as u64 >= ev.data_len;
            if let Some(id) = &cross_id {
                let c = CrossEvent {
                    now,
                    key,
                    id,
                    data,
                    hash: ev.data_hash,
                    len: ev.data_len,
                    whole,
                    source,
                };
                self.rules.on_cross_event(&mut self.l, &c);
            }
            self.on_server_messages(now, key, data, whole, copy);
        }
    }

    /// A clean body end ends the leg. An unclean one only marks it: the wire observer reports
    /// `StreamEnd { clean: false }` just before the proxy's `Cut` (and a server's broken
    /// framing always closes the connection), so the leg ends at the `Cut` or `ConnClosed`
    /// that follows, and a cut leg is judged as cut.
    pub fn on_stream_end(&mut self, now: Instant, conn: u64, seq: u64, clean: bool) {
        if clean {
            self.end_leg(now, conn, seq, false, true);
        } else if let Some(leg) = self.l.legs.get_mut(&(conn, seq)) {
            leg.body_broken = true;
        }
    }

    pub fn on_conn_closed(&mut self, now: Instant, conn: u64) {
        let seqs: Vec<u64> = self
            .l
            .legs
            .range((conn, 0)..=(conn, u64::MAX))
            .map(|(k, _)| k.1)
            .collect();
        for seq in seqs {
            self.end_leg(now, conn, seq, false, false);
        }
    }

    pub fn on_cut(
        &mut self,
        now: Instant,
        conn: u64,
        direction: Direction,
        action: CutAction,
        point: CutPoint,
    ) {
        // On HTTP/2 a stream-scoped cut ends its stream only; a connection-scoped one ends
        // every stream, and the one its point describes (`exchange`) is the one torn.
        let (from, to) = point.h2_stream.map_or((0, u64::MAX), |s| (s, s));
        let legs: Vec<(u64, bool)> = self
            .l
            .legs
            .range((conn, from)..=(conn, to))
            .map(|(k, l)| (k.1, l.status.is_some()))
            .collect();
        let named = if self.l.protocols.contains_key(&conn) {
            Some(point.h2_stream.or(point.exchange))
        } else {
            None
        };
        let body_seq = legs
            .iter()
            .find(|(s, responded)| *responded && named.is_none_or(|n| n == Some(*s)))
            .map(|(s, _)| *s);
        for (seq, _) in &legs {
            let Some(key) = self.l.legs.get(&(conn, *seq)).map(|l| l.stream) else {
                continue;
            };
            let in_flight = Some(*seq) == body_seq && direction == Direction::Downstream;
            if in_flight {
                self.l.tear(now, key, &point);
            }
            // The cut leg's own cursor (the stream's start for a first leg): a client resumes
            // from it or after it.
            let start = self
                .l
                .legs
                .get(&(conn, *seq))
                .and_then(|l| l.resume.as_ref())
                .map(|r| r.cursor_ordinal.or(r.snapshot));
            let seen = CutSeen {
                now,
                key,
                action,
                point: &point,
                in_flight,
            };
            self.rules.on_cut(&mut self.l, &seen);
            let t = self.l.cfg.rst_unread;
            if let Some(s) = self.l.streams.get_mut(&key) {
                s.cut_at = Some(now);
                s.awaiting_reconnect = true;
                s.unread = None;
                if in_flight {
                    // What a reset may have kept from the client: what this leg delivered
                    // after its cursor less than `rst_unread` before the reset.
                    let from = start.flatten().max(s.read_before(now, t));
                    // Only a TCP reset discards: an h2 stream reset (`h2_stream` named)
                    // comes in order after the bytes before it, which the client's h2 stack
                    // received and hands on before the reset. A stream a connection reset
                    // ended with it (`with_connection`) is a TCP reset's: an h2 client that
                    // meets the reset while writing drops what it had not decoded.
                    let tcp = point.h2_stream.is_none() || point.with_connection;
                    if action == CutAction::Reset && tcp {
                        s.unread = s.last_ordinal().map(|through| (from, through));
                    }
                    // A client may resume from anywhere on this leg, however stale.
                    s.hold_from = start
                        .flatten()
                        .or_else(|| s.entries().next().map(|e| e.ordinal));
                }
            }
            self.end_leg(now, conn, *seq, true, false);
        }
    }

    /// Ends one leg: judges a replay, checks pending calls, and arms a reconnect watch after a
    /// cut.
    pub fn end_leg(&mut self, now: Instant, conn: u64, seq: u64, cut: bool, clean: bool) {
        let Some(leg) = self.l.legs.remove(&(conn, seq)) else {
            return;
        };
        let key = leg.stream;
        let Some(stream) = self.l.streams.get_mut(&key) else {
            return;
        };
        stream.open_legs = stream.open_legs.saturating_sub(1);
        if stream.open_legs == 0 {
            stream.ended_at = Some(now);
        }
        let call_unanswered = stream.unanswered().next().is_some();
        let tools_pending = stream
            .unanswered()
            .any(|c| c.method == TOOLS_CALL && !c.reported);
        let mut signalled = leg.resume.as_ref().is_some_and(|r| r.explicit_reported);
        let mut explicit = signalled;
        if let Some(r) = leg.resume.as_ref().filter(|_| !leg.blind) {
            let end = LegEnd {
                cut,
                clean,
                status: leg.status,
                call_unanswered,
                tools_call_unanswered: tools_pending,
            };
            self.l.replay_signal = ReplaySignal::default();
            let ended = ReplayEnded {
                now,
                key,
                resume: r,
                end,
            };
            self.rules.on_replay_end(&mut self.l, &ended);
            let said = std::mem::take(&mut self.l.replay_signal);
            signalled |= said.signalled;
            explicit |= said.explicit;
        }
        let last = self.l.streams.get(&key).is_some_and(|s| s.open_legs == 0);
        // A cut leaves the calls waiting (rule `abandoned`); so does a resume of a cut stream that
        // the server refused (`explicit-loss`) or whose connection closed without a clean end.
        // A clean 200 end is `pending-call`'s or `silent-empty`'s.
        let failed_resume = leg.resume.is_some() && (explicit || (!clean && !self.l.finishing));
        let ended = LegEnded {
            now,
            key,
            cut,
            clean,
            last,
            blind: leg.blind,
            failed_resume,
            status: leg.status,
            signalled,
        };
        self.rules.on_leg_end(&mut self.l, &ended);
        if last {
            self.stream_ended(now, key);
        }
    }
}

impl Ledger {
    /// Feeds a delivered event of stream `key` to its order and gap state if it is a first
    /// delivery (its id never delivered with data before), and hands what it proves to the
    /// resume leg being judged.
    pub fn sequence(&mut self, key: StreamKey, conn: u64, seq: u64, ev: &EventFacts, resume: bool) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        // A rolled-back event (`unsent`) was delivered once already: its order is known.
        let first = ev.id.as_ref().is_none_or(|id| {
            stream.entry_of(id).is_none_or(|e| !e.dispatched) && stream.unsent_hash(id).is_none()
        });
        if !first {
            return;
        }
        let progress = ev
            .data
            .as_ref()
            .filter(|d| d.len() as u64 >= ev.data_len && d.len() <= MAX_PARSED)
            .and_then(|d| {
                rpc::parse(d).into_iter().find_map(|m| match m {
                    RpcMessage::Notification {
                        progress: Some(p), ..
                    } => Some(p),
                    _ => None,
                })
            });
        let facts = stream.seq.observe(
            ev.id.as_deref(),
            progress.as_ref().map(|(t, v)| (t.as_str(), *v)),
            resume,
        );
        if facts.is_empty() {
            return;
        }
        if let Some(r) = self
            .legs
            .get_mut(&(conn, seq))
            .and_then(|l| l.resume.as_mut())
        {
            for f in facts {
                if r.seq_facts.len() < MAX_SEQ_FACTS {
                    r.seq_facts.push(f);
                }
            }
        }
    }

    /// The other session's call a replayed event of stream `key` names, if it is evidence
    /// (`leak`); only events with an id are classified, so only they are read.
    pub fn named_in(&self, key: StreamKey, ev: &EventFacts) -> Option<Named> {
        ev.id.as_ref()?;
        let data = ev.data.as_ref()?;
        let whole = data.len() as u64 >= ev.data_len;
        if whole && data.len() > MAX_PARSED {
            return None;
        }
        let names = leak::names_in(data, whole);
        if names.is_empty() {
            return None;
        }
        self.named_source(key, &names)
    }

    /// Classifies one replayed event against the stream (rules in the `judge` module doc);
    /// `named`: the event names another session's call ([`Ledger::named_in`]).
    pub fn classify(
        &self,
        key: StreamKey,
        conn: u64,
        seq: u64,
        ev: &EventFacts,
        named: bool,
    ) -> Option<ReplayClass> {
        let r = self.legs.get(&(conn, seq))?.resume.as_ref()?;
        let stream = self.streams.get(&key)?;
        let resent = ev.data_len > 0 && stream.has_hash(ev.data_hash);
        let empty = ev.data_len == 0;
        let Some(id) = ev.id.clone() else {
            return Some(ReplayClass::Unseen {
                id: None,
                resent,
                empty,
            });
        };
        if id == r.cursor && empty && r.nothing_yet() {
            return Some(ReplayClass::Priming { id });
        }
        if r.seen_on_leg(&id) {
            return Some(ReplayClass::Duplicate { id });
        }
        let proven = r
            .leaked_from
            .as_ref()
            .is_some_and(|n| self.from_source(key, n.source, &id, ev.data_hash, ev.data_len));
        if named || proven {
            return Some(ReplayClass::Cross { id });
        }
        if let Some(rank) = r.owed_rank(&id) {
            let same = stream
                .entry_of(&id)
                .is_none_or(|e| !e.dispatched || e.hash == ev.data_hash);
            return Some(if same {
                ReplayClass::Owed { id, rank }
            } else {
                ReplayClass::Reused { id }
            });
        }
        if let Some(e) = stream.entry_of(&id)
            && r.snapshot.is_some_and(|s| e.ordinal <= s)
        {
            return Some(if !e.dispatched || e.hash == ev.data_hash {
                ReplayClass::Duplicate { id }
            } else {
                ReplayClass::Reused { id }
            });
        }
        // Without a session, equal ids on two streams are normal (broadcast, several tabs):
        // no evidence.
        let other_in_session = stream.session.is_some()
            && self
                .sessions
                .get(&stream.session)
                .and_then(|s| s.ids.get(&id))
                .is_some_and(|owners| owners.iter().any(|k| *k != key));
        let other_session = self.opaque.get(&id).is_some_and(|k| {
            *k != key
                && self
                    .streams
                    .get(k)
                    .is_some_and(|o| o.session != stream.session)
        });
        if other_in_session || other_session {
            return Some(ReplayClass::Cross { id });
        }
        Some(ReplayClass::Unseen {
            id: Some(id),
            resent,
            empty,
        })
    }

    /// The observer stopped following the body of `(conn, seq)` at `raw_offset`.
    pub fn on_observer_gave_up(
        &mut self,
        now: Instant,
        conn: u64,
        seq: u64,
        raw_offset: u64,
        reason: &str,
    ) {
        let Some(leg) = self.legs.get_mut(&(conn, seq)) else {
            return;
        };
        if leg.blind {
            return;
        }
        leg.blind = true;
        let key = leg.stream;
        let f = self
            .finding(FindingKind::ObserverGaveUp, key, now)
            .offsets(vec![raw_offset])
            .detail(format!(
                "observer gave up on this stream at raw offset {raw_offset}: {reason}; \
                 the bytes were still relayed, events after it are not audited \
                 (no replay or pending-call judgement on this leg)"
            ));
        self.emit(f);
    }

    /// Records what the cut did to the event in progress on stream `key` (the `torn-cut`
    /// finding is rule `torn`'s).
    pub fn tear(&mut self, now: Instant, key: StreamKey, p: &CutPoint) {
        if let Some(lc) = &p.last_committed_id
            && self
                .streams
                .get(&key)
                .is_some_and(|s| s.entry_of(lc).is_none())
        {
            if let Some(s) = self.streams.get_mut(&key) {
                s.seq.observe(Some(lc), None, false);
            }
            self.push_event(key, Some(lc.clone()), 0, 0, false, now);
            if let Some(s) = self.streams.get_mut(&key) {
                s.last_event_id = Some(lc.clone());
            }
        }
        let tears = p.class.is_some_and(|c| c.tears_event()) && p.torn_bytes > 0;
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let session = stream.session.clone();
        let old = stream.torn.take().and_then(|t| t.id);
        if let Some(old) = old.filter(|o| stream.entry_of(o).is_none()) {
            self.unindex_id(key, &session, &old);
        }
        if !tears {
            return;
        }
        let torn = Torn {
            id: p.pending_id.clone(),
            cut: FindingCut::from_point(p),
            raw_offset: p.raw_offset,
        };
        if let Some(s) = self.streams.get_mut(&key) {
            s.torn = Some(torn);
        }
        if let Some(id) = &p.pending_id {
            self.index_id(key, id);
        }
    }
}
