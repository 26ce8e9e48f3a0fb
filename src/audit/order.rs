//! Putting observations in exchange order before the ledger reads them.
//!
//! The two directions of a connection are observed by two pumps, and the HTTP/1.1 observer
//! releases a request head only once the pump has shown it delivered (on the next upstream
//! chunk or EOF), so a response, its SSE events and even a cut can reach the auditor before the
//! request they answer — or without it, when the connection is cut first.
//!
//! Invariants:
//! - An observation of exchange `(conn, seq)` whose request was not seen yet is held (in order,
//!   with its receipt time) and applied right after that request; at most
//!   [`MAX_EARLY_PER_CONN`] are held per connection, later ones are dropped and reported.
//! - A cut that arrives while observations of its connection wait for their request is held,
//!   and the observations of every other connection that arrive after it wait behind it, until
//!   that request arrives or the connection closes (or [`MAX_EARLY_PER_CONN`] wait behind it,
//!   or the run finishes): the pump that releases a request may run after the one that released
//!   the response and the cut, and what the audit concludes (about this exchange, a resume of
//!   it, a re-send of its call) must not depend on which ran first. The wait is short: a
//!   request is released right after its bytes were written, before the server could answer.
//! - A held cut whose request never came is applied at the close: its POST exchange (the one
//!   the cut fell in, by the cut record's `exchange`) is opened from the cut record's request
//!   facts (method, path, session, JSON-RPC id) and reported `unknown` (its calls' methods are
//!   not known); anything else still held when the connection closes is reported `unknown`,
//!   never guessed.
//! - Latencies measured from a request that arrived after its response are not recorded.
//! - A request of exchange `(conn, seq)` is applied only after the response of every earlier
//!   exchange of the connection ended (its `ResponseBody`, `StreamEnd` or `ObserverGaveUp`
//!   was applied), or at a cut or the close of the connection: an HTTP/1.1 client sends its
//!   next request on a connection once the response before it ended, but the pump that
//!   releases the request may run before the one that releases that response's last events.
//!   So the audit sees one connection's exchanges one after the other, whichever pump ran
//!   first (a client that pipelines sees its requests applied as their turns come). At most
//!   [`MAX_EARLY_PER_CONN`] wait per connection; later ones are applied at once.
//! - On an HTTP/2 connection (announced by `Observation::Protocol` before its first request)
//!   `seq` is the stream id: streams interleave, so a request never waits for another
//!   stream's response (the rule above is HTTP/1.1's). A client opens streams in increasing
//!   id order and the observer releases their requests in that order, so "requests seen below
//!   `requests`" holds as on HTTP/1.1 without assuming ids are contiguous. A stream's
//!   `RST_STREAM` and a cut naming its stream (`h2_stream`) wait for that stream's request
//!   like its other observations; such a cut holds nothing of other streams or connections.

use super::engine::{Engine, HeldCut};
use super::events::EventFacts;
use super::exchange::RequestFacts;
use super::finding::{Finding, FindingKind, StreamRef};
use crate::wire::{CutPoint, Observation};
use tokio::time::Instant;

/// Held observations per connection, at most.
pub const MAX_EARLY_PER_CONN: usize = 4096;

fn seq_of(obs: &Observation) -> Option<(u64, u64)> {
    match obs {
        Observation::Response { conn, seq, .. }
        | Observation::ResponseBody { conn, seq, .. }
        | Observation::SseEvent { conn, seq, .. }
        | Observation::StreamEnd { conn, seq, .. }
        | Observation::ObserverGaveUp { conn, seq, .. }
        | Observation::StreamReset { conn, seq, .. } => Some((*conn, *seq)),
        Observation::LlmEvent(e) => Some((e.conn, e.seq)),
        // On HTTP/2 a stream-scoped cut is of its stream's exchange.
        Observation::Cut { conn, point, .. } => point.h2_stream.map(|s| (*conn, s)),
        _ => None,
    }
}

/// The exchange of a request-side observation.
fn request_of(obs: &Observation) -> Option<(u64, u64)> {
    match obs {
        Observation::Request { conn, seq, .. } => Some((*conn, *seq)),
        Observation::LlmRequest(r) => Some((r.conn, r.seq)),
        _ => None,
    }
}

/// The connection of an observation.
fn conn_of(obs: &Observation) -> u64 {
    obs.conn()
}

impl Engine {
    /// Receives one observation at `now`: behind a held cut if it is of another connection,
    /// else as [`Engine::take`] does; lifts the held cut once its request came or its
    /// connection closed.
    pub fn arrive(&mut self, now: Instant, obs: Observation) {
        self.l.clock = self.l.clock.max(now);
        let Some(held) = self.held.as_mut() else {
            self.take(now, obs);
            return;
        };
        let conn = held.conn;
        if conn_of(&obs) != conn {
            if held.behind.len() < MAX_EARLY_PER_CONN {
                held.behind.push((now, obs));
            } else {
                self.lift();
                self.arrive(now, obs);
            }
            return;
        }
        if matches!(
            obs,
            Observation::ConnClosed { .. } | Observation::Cut { .. }
        ) {
            self.lift();
            self.arrive(now, obs);
            return;
        }
        self.take(now, obs);
        // The connection is cut: its requests wait for nothing more.
        self.wake(conn, u64::MAX);
        if !self.awaits_request(conn) {
            self.lift();
        }
    }

    /// Applies the held cut (opening its exchange from the cut's facts if the request still
    /// has not come), then what arrived behind it.
    pub fn lift(&mut self) {
        let Some(held) = self.held.take() else {
            return;
        };
        let (t, cut) = held.cut;
        self.cut(t, cut);
        for (t, obs) in held.behind {
            self.arrive(t, obs);
        }
    }

    /// The end of a run: the held cut is applied, and every request still waiting for the
    /// response before it (one that never ended: the observer stopped following it).
    pub fn settle_order(&mut self) {
        self.lift();
        let mut conns: Vec<u64> = self
            .order
            .iter()
            .filter(|(_, c)| !c.waiting.is_empty())
            .map(|(k, _)| *k)
            .collect();
        conns.sort_unstable();
        for conn in conns {
            self.wake(conn, u64::MAX);
        }
    }

    /// True if observations of `conn` wait for a request that has not come.
    fn awaits_request(&self, conn: u64) -> bool {
        self.order.get(&conn).is_some_and(|c| !c.early.is_empty())
    }

    /// Takes one observation at `now`, holding it if its request was not seen yet, or, for
    /// a request, until the response before it ended.
    fn take(&mut self, now: Instant, obs: Observation) {
        // A re-send link held past its time is settled before anything later is applied.
        self.settle_held(now, false);
        if let Some((conn, seq)) = request_of(&obs)
            && !self.is_h2(conn)
        {
            let c = self.order.entry(conn).or_default();
            if seq > c.answered && c.waiting.len() < MAX_EARLY_PER_CONN {
                c.waiting.push((now, obs));
                return;
            }
        }
        if let Observation::Cut { conn, .. } | Observation::ConnClosed { conn } = &obs {
            self.wake(*conn, u64::MAX);
        }
        if let Some((conn, seq)) = seq_of(&obs) {
            let requested = self.last_order.is_some_and(|(c, r)| c == conn && seq < r);
            if !requested {
                let c = self.order.entry(conn).or_default();
                if seq >= c.requests {
                    if c.early.len() < MAX_EARLY_PER_CONN {
                        c.early.push((now, obs));
                    } else {
                        c.dropped += 1;
                        // Like the intake's drops: what this connection carries is not judged.
                        self.l.holes.add([(conn, 1)], now);
                    }
                    return;
                }
                self.last_order = Some((conn, c.requests));
            }
        }
        if let Observation::Cut { point, .. } = &obs
            && point.h2_stream.is_some()
        {
            self.cut(now, obs);
            return;
        }
        if let Observation::Cut { conn, .. } = obs {
            if self.awaits_request(conn) && self.held.is_none() {
                self.held = Some(HeldCut {
                    conn,
                    cut: (now, obs),
                    behind: Vec::new(),
                });
            } else {
                self.cut(now, obs);
            }
            return;
        }
        match obs {
            Observation::Request {
                conn,
                seq,
                method,
                path,
                session,
                last_event_id,
                protocol_version,
                body,
                idempotency_key,
                accepts_event_stream,
                ..
            } => {
                let c = self.order.entry(conn).or_default();
                c.requests = c.requests.max(seq.saturating_add(1));
                self.last_order = Some((conn, c.requests));
                self.on_request(
                    now,
                    RequestFacts {
                        conn,
                        seq,
                        method,
                        path,
                        session,
                        last_event_id,
                        protocol_version,
                        body,
                        rpc_id_hint: None,
                        idempotency_key,
                        accepts_event_stream,
                    },
                );
                self.release(conn, seq);
                self.h2_request_applied(now, conn, seq);
            }
            Observation::ConnClosed { conn } => {
                self.drop_early(now, conn);
                self.on_conn_closed(now, conn);
                self.rules.on_conn_closed(&mut self.l, now, conn);
                self.h2_closed(conn);
            }
            other => self.apply(now, other),
        }
    }

    /// Applies a cut: opens its exchange from the cut's facts if that exchange's request still
    /// has not come, then ends the connection's legs.
    fn cut(&mut self, now: Instant, obs: Observation) {
        self.rules.on_observation(&mut self.l, now, &obs);
        if let Observation::Cut {
            conn,
            direction,
            action,
            point,
        } = obs
        {
            self.open_from_cut(now, conn, &point);
            self.on_cut(now, conn, direction, action, point);
        }
    }

    /// Applies the waiting requests of `conn` (in order) whose responses before them ended,
    /// or every one when `through` is `u64::MAX` (a cut or the close of the connection).
    fn wake(&mut self, conn: u64, through: u64) {
        loop {
            let Some(c) = self.order.get_mut(&conn) else {
                return;
            };
            let limit = through.max(c.answered);
            let due = c
                .waiting
                .first()
                .and_then(|(_, o)| request_of(o))
                .is_some_and(|(_, seq)| seq <= limit);
            if !due {
                return;
            }
            let (t, obs) = c.waiting.remove(0);
            if let Some(c) = self.order.get_mut(&conn) {
                // A request applied at a cut or close counts its turn as come.
                c.answered = c.answered.max(request_of(&obs).map_or(0, |k| k.1));
            }
            self.arrive(t, obs);
        }
    }

    /// The response of exchange `(conn, seq)` ended: the requests after it may be applied.
    fn answered(&mut self, conn: u64, seq: u64) {
        let Some(c) = self.order.get_mut(&conn) else {
            return;
        };
        c.answered = c.answered.max(seq.saturating_add(1));
        if !c.waiting.is_empty() {
            self.wake(conn, 0);
        }
    }

    /// Applies a response-side observation whose request was seen.
    fn apply(&mut self, now: Instant, obs: Observation) {
        if let Observation::Cut { .. } = &obs {
            // A stream-scoped HTTP/2 cut released with its request.
            self.cut(now, obs);
            return;
        }
        if let Observation::ResponseBody { conn, seq, .. }
        | Observation::StreamEnd { conn, seq, .. }
        | Observation::ObserverGaveUp { conn, seq, .. } = &obs
        {
            let (conn, seq) = (*conn, *seq);
            self.apply_now(now, obs);
            self.answered(conn, seq);
            return;
        }
        self.apply_now(now, obs);
    }

    fn apply_now(&mut self, now: Instant, obs: Observation) {
        self.rules.on_observation(&mut self.l, now, &obs);
        match obs {
            Observation::Response {
                conn,
                seq,
                status,
                content_type,
                session,
            } => self.on_response(now, conn, seq, status, content_type, session),
            Observation::ResponseBody { conn, seq, body } => self.on_body(now, conn, seq, body),
            Observation::SseEvent {
                conn,
                seq,
                id,
                last_event_id,
                event_type,
                data_hash,
                data_len,
                data,
                ..
            } => self.on_event(
                now,
                conn,
                seq,
                EventFacts {
                    id,
                    last_event_id,
                    event_type,
                    data_hash,
                    data_len,
                    data,
                },
            ),
            Observation::StreamEnd { conn, seq, clean } => {
                self.on_stream_end(now, conn, seq, clean)
            }
            Observation::ObserverGaveUp {
                conn,
                seq,
                raw_offset,
                reason,
            } => self
                .l
                .on_observer_gave_up(now, conn, seq, raw_offset, &reason),
            Observation::Protocol { conn, protocol } => self.on_protocol(conn, protocol),
            Observation::StreamReset {
                conn,
                seq,
                direction,
                code,
                by_proxy,
            } => self.on_stream_reset(now, conn, seq, direction, code, by_proxy),
            Observation::GoAway {
                conn,
                direction,
                last_stream,
                code,
                by_proxy,
            } => self.on_goaway(now, conn, direction, last_stream, code, by_proxy),
            _ => {}
        }
    }

    /// Applies the held observations of `(conn, seq)`, in order, at their receipt times.
    fn release(&mut self, conn: u64, seq: u64) {
        let Some(c) = self.order.get_mut(&conn) else {
            return;
        };
        if c.early.is_empty() {
            return;
        }
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut c.early)
            .into_iter()
            .partition(|(_, o)| seq_of(o).is_some_and(|(_, s)| s == seq));
        c.early = rest;
        if mine.is_empty() {
            return;
        }
        if let Some(leg) = self.l.legs.get_mut(&(conn, seq)) {
            leg.late = true;
        }
        for (t, o) in mine {
            self.apply(t, o);
        }
    }

    /// The request of the exchange in flight never reached the auditor (the cut waited for it
    /// until its connection closed or the wait's bound): open that exchange from the cut
    /// record's facts if it was a POST and the cut fell in its response.
    fn open_from_cut(&mut self, now: Instant, conn: u64, p: &CutPoint) {
        let Some(c) = self.order.get_mut(&conn) else {
            return;
        };
        let Some(seq) = c
            .early
            .iter()
            .filter_map(|(_, o)| seq_of(o))
            .map(|k| k.1)
            .min()
        else {
            return;
        };
        // Only the exchange the cut fell in: its facts are the cut's.
        if p.exchange != Some(seq) {
            return;
        }
        let Some((method, path)) = p.request.as_deref().and_then(|r| r.split_once(' ')) else {
            return;
        };
        if method != "POST" {
            return;
        }
        c.requests = c.requests.max(seq.saturating_add(1));
        let f = Finding::new(
            FindingKind::Unknown,
            self.l.ms(now),
            p.session.clone(),
            StreamRef {
                request: format!("{method} {}", crate::wire::redact::target(path)),
                rpc_ids: p.rpc_id.iter().cloned().collect(),
                conn,
                seq,
                ..StreamRef::default()
            },
        )
        .detail(
            "the request of this cut exchange never reached the auditor: its calls' methods \
             and params are unknown, so pending-call, silent-empty and re-issues are not judged \
             for it",
        );
        self.l.emit(f);
        self.on_request(
            now,
            RequestFacts {
                conn,
                seq,
                method: method.to_string(),
                path: path.to_string(),
                session: p.session.clone(),
                last_event_id: None,
                protocol_version: None,
                body: None,
                rpc_id_hint: p.rpc_id.clone(),
                idempotency_key: None,
                accepts_event_stream: true,
            },
        );
        self.release(conn, seq);
    }

    /// The connection closed: what is still held never met its request.
    fn drop_early(&mut self, now: Instant, conn: u64) {
        if self.last_order.is_some_and(|(c, _)| c == conn) {
            self.last_order = None;
        }
        let Some(c) = self.order.remove(&conn) else {
            return;
        };
        let mut seqs: Vec<u64> = c
            .early
            .iter()
            .filter_map(|(_, o)| seq_of(o))
            .map(|k| k.1)
            .collect();
        seqs.dedup();
        if seqs.is_empty() && c.dropped == 0 {
            return;
        }
        let f = Finding::new(
            FindingKind::Unknown,
            self.l.ms(now),
            None,
            StreamRef {
                conn,
                seq: seqs.first().copied().unwrap_or(0),
                ..StreamRef::default()
            },
        )
        .detail(format!(
            "{} observation(s) of exchange(s) {seqs:?} on connection {conn} arrived without \
             their request (and {} were dropped over the limit); not judged",
            c.early.len(),
            c.dropped
        ));
        self.l.emit(f);
    }
}

#[cfg(test)]
#[path = "order_tests.rs"]
mod tests;
