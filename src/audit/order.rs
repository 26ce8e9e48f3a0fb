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
//! - At a cut, a held POST exchange whose request never came is opened from the cut record's
//!   request facts (method, path, session, JSON-RPC id) and reported `unknown` (its calls'
//!   methods are not known); anything else still held when the connection closes is reported
//!   `unknown`, never guessed.
//! - Latencies measured from a request that arrived after its response are not recorded.

use super::engine::Engine;
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
        | Observation::ObserverGaveUp { conn, seq, .. } => Some((*conn, *seq)),
        Observation::LlmEvent(e) => Some((e.conn, e.seq)),
        _ => None,
    }
}

impl Engine {
    /// Receives one observation at `now`, holding it if its request was not seen yet.
    pub fn arrive(&mut self, now: Instant, obs: Observation) {
        self.l.clock = self.l.clock.max(now);
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
        if matches!(obs, Observation::Cut { .. }) {
            self.rules.on_observation(&mut self.l, now, &obs);
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
            }
            Observation::Cut {
                conn,
                direction,
                action,
                point,
            } => {
                self.open_from_cut(now, conn, &point);
                self.on_cut(now, conn, direction, action, point);
            }
            Observation::ConnClosed { conn } => {
                self.drop_early(now, conn);
                self.on_conn_closed(now, conn);
                self.rules.on_conn_closed(&mut self.l, now, conn);
            }
            other => self.apply(now, other),
        }
    }

    /// Applies a response-side observation whose request was seen.
    fn apply(&mut self, now: Instant, obs: Observation) {
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

    /// A cut reached the auditor before the request of the exchange in flight: open it from
    /// the cut record's facts if it was a POST.
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
                request: format!("{method} {path}"),
                rpc_ids: p.rpc_id.iter().cloned().collect(),
                conn,
                seq,
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
mod tests {
    use super::*;
    use crate::audit::AuditConfig;

    fn request(conn: u64, seq: u64) -> Observation {
        Observation::Request {
            conn,
            seq,
            method: "GET".into(),
            path: "/sse".into(),
            session: None,
            last_event_id: None,
            protocol_version: None,
            has_authorization: false,
            idempotency_key: None,
            accepts_event_stream: true,
            body: None,
        }
    }

    fn end(conn: u64, seq: u64) -> Observation {
        Observation::StreamEnd {
            conn,
            seq,
            clean: false,
        }
    }

    fn held(e: &Engine, conn: u64) -> usize {
        e.order.get(&conn).map_or(0, |c| c.early.len())
    }

    #[test]
    fn an_exchange_after_the_last_request_seen_waits_even_right_after_its_connections_run() {
        let now = Instant::now();
        let mut e = Engine::new(AuditConfig::default(), now);
        e.arrive(now, request(1, 0));
        e.arrive(now, end(1, 0));
        assert_eq!(held(&e, 1), 0, "exchange 0's request was seen");
        e.arrive(now, end(1, 1));
        assert_eq!(held(&e, 1), 1, "exchange 1's request was not");
        e.arrive(now, request(1, 1));
        assert_eq!(held(&e, 1), 0, "its request releases it");
    }

    #[test]
    fn a_closed_connections_later_observations_wait_for_their_request_again() {
        let now = Instant::now();
        let mut e = Engine::new(AuditConfig::default(), now);
        e.arrive(now, request(7, 0));
        e.arrive(now, end(7, 0));
        e.arrive(now, Observation::ConnClosed { conn: 7 });
        // The connection's ordering state is gone: nothing of it is known to be requested.
        e.arrive(now, end(7, 0));
        assert_eq!(held(&e, 7), 1);
    }
}
