//! Attributing the intake's dropped observations to the streams they belonged to.
//!
//! Why: `holes` keeps which connections lost observations and withholds findings about the
//! streams marked unjudged; something must tell it which streams those are. A dropped
//! observation's stream cannot be read from the observation (it is gone), but every
//! observation of the same connection that does arrive names its exchange, and the ledger's
//! legs map that exchange to its logical stream: a resume leg on a holed connection marks the
//! stream it resumes, whichever connection opened it.
//!
//! Invariants:
//! - Runs only while some connection is holed (one emptiness check per observation otherwise).
//! - An observation is attributed before it is applied (its leg may end with it) and after (a
//!   request opens its leg); a connection-wide one (cut, close) marks every open leg of it.
//! - A stream is reported not judged once, by the `unknown` whose detail starts with
//!   `holes::NOT_JUDGED`; a holed connection none of whose observations reached a stream is
//!   reported once, when it closes.

use super::engine::Engine;
use super::finding::{Finding, FindingKind, StreamRef};
use super::holes;
use crate::wire::Observation;
use tokio::time::Instant;

/// How long a holed connection and an unjudged stream are remembered, in grace periods (a
/// finding about a stream can come up to `abandon_after` ≤ `grace` after its last leg).
const REMEMBER_GRACES: u32 = 2;

impl Engine {
    /// Takes the intake's drop counts (connection → observations) received by `now`.
    pub fn note_dropped(&mut self, dropped: rustc_hash::FxHashMap<u64, u64>, now: Instant) {
        if !dropped.is_empty() {
            self.l.holes.add(dropped, now);
        }
        if !self.l.holes.is_empty() {
            let keep = self.l.cfg.grace.saturating_mul(REMEMBER_GRACES);
            self.l.holes.sweep(now, keep);
        }
    }

    /// Applies `obs`, marking the streams it belongs to unjudged when its connection lost
    /// observations.
    pub fn arrive_checked(&mut self, now: Instant, obs: Observation) {
        if self.l.holes.is_empty() {
            return self.arrive(now, obs);
        }
        let conn = obs.conn();
        let Some(dropped) = self.l.holes.dropped_on(conn) else {
            return self.arrive(now, obs);
        };
        let exchange = exchange_of(&obs);
        let closes = matches!(obs, Observation::ConnClosed { .. });
        self.mark_unjudged(now, conn, exchange, dropped);
        self.arrive(now, obs);
        self.mark_unjudged(now, conn, exchange, dropped);
        if closes && let Some(lost) = self.l.holes.closed_unattributed(conn) {
            let stream = StreamRef {
                conn,
                ..StreamRef::default()
            };
            let mut f = Finding::new(FindingKind::Unknown, self.l.ms(now), None, stream);
            f.detail = holes::conn_detail(conn, lost);
            self.l.emit(f);
        }
    }

    /// Marks the stream of exchange `(conn, seq)` — or of every open leg of `conn` when `seq`
    /// is `None` — unjudged, reporting each the first time.
    fn mark_unjudged(&mut self, now: Instant, conn: u64, seq: Option<u64>, dropped: u64) {
        let range = match seq {
            Some(seq) => (conn, seq)..=(conn, seq),
            None => (conn, 0)..=(conn, u64::MAX),
        };
        let streams: Vec<_> = self
            .l
            .legs
            .range(range)
            .map(|(_, leg)| leg.stream)
            .collect();
        for key in streams {
            let Some(s) = self.l.streams.get(&key) else {
                continue;
            };
            let (session, reference) = (s.session.clone(), s.reference.clone());
            if self
                .l
                .holes
                .mark(conn, (reference.conn, reference.seq), now)
            {
                let mut f = Finding::new(FindingKind::Unknown, self.l.ms(now), session, reference);
                f.detail = holes::stream_detail(conn, dropped);
                self.l.emit(f);
            }
        }
    }
}

/// The exchange `(seq)` an observation names, or `None` for a connection-wide one.
fn exchange_of(obs: &Observation) -> Option<u64> {
    match obs {
        Observation::Request { seq, .. }
        | Observation::Response { seq, .. }
        | Observation::ResponseBody { seq, .. }
        | Observation::SseEvent { seq, .. }
        | Observation::StreamEnd { seq, .. }
        | Observation::ObserverGaveUp { seq, .. }
        | Observation::StreamReset { seq, .. } => Some(*seq),
        Observation::LlmRequest(r) => Some(r.seq),
        Observation::LlmEvent(e) => Some(e.seq),
        Observation::ConnOpened { .. }
        | Observation::ConnClosed { .. }
        | Observation::Protocol { .. }
        | Observation::GoAway { .. }
        | Observation::Cut { .. } => None,
    }
}
