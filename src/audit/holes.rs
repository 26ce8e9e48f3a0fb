//! What the audit could not judge because its intake dropped observations.
//!
//! Why: the relay never waits for the audit, so when the intake's queue is full an observation
//! is dropped and counted ([`super::intake`]). A stream that lost an observation (an event, its
//! end, its cut, its request) judged from what was left gets verdicts that may be false, not
//! just missing: a dropped event reads as a gap, a dropped end as a hang. So a stream that lost
//! anything is *not judged*: it gets one `unknown` finding that says so, with the count, and no
//! other finding on it is emitted from then on.
//!
//! Invariants:
//! - A connection is *holed* from the drain after its first dropped observation on: the intake
//!   records the connection of every observation it drops ([`super::intake::Intake::push`]),
//!   and the drain hands those counts here before it applies the batch, so nothing of that
//!   connection applied after the drop is judged as if whole.
//! - A stream is *unjudged* once any observation of a holed connection is attributed to one of
//!   its legs; it is named by its opening exchange (`StreamRef`'s connection and request
//!   order), which is what every finding about it carries. A holed connection none of whose
//!   observations could be attributed (its requests were dropped) gets one `unknown` of its own
//!   when it closes.
//! - Findings emitted before the first drop stand: they were judged from whole observations.
//! - Bounded: both tables forget an entry `forget_after` after it was last touched.

use rustc_hash::FxHashMap;
use std::time::Duration;
use tokio::time::Instant;

use super::finding::{Finding, FindingKind};

/// What [`Holes::check`] decided about a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Emit it.
    Emit,
    /// Withhold it: its stream is already reported not judged.
    Withheld,
    /// Withhold it and report its stream not judged (observations dropped on its connection).
    FirstWithheld(u64),
}

/// The holed connections and unjudged streams of one ledger.
#[derive(Debug, Default)]
pub struct Holes {
    /// Connection → (observations dropped on it, when last touched, whether a stream of it was
    /// marked unjudged).
    conns: FxHashMap<u64, Holed>,
    /// Opening exchange `(conn, seq)` of an unjudged stream → when marked.
    unjudged: FxHashMap<(u64, u64), Instant>,
    /// Findings withheld because their stream is unjudged.
    pub withheld: u64,
    /// Streams (and connections) reported not judged, over the whole run.
    pub reported: u64,
}

#[derive(Debug, Clone, Copy)]
struct Holed {
    dropped: u64,
    touched: Instant,
    attributed: bool,
}

impl Holes {
    /// True if and only if no connection lost an observation (the common case: one branch).
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Adds the drops the intake counted (connection → count) at `now`.
    pub fn add(&mut self, dropped: impl IntoIterator<Item = (u64, u64)>, now: Instant) {
        for (conn, n) in dropped {
            let h = self.conns.entry(conn).or_insert(Holed {
                dropped: 0,
                touched: now,
                attributed: false,
            });
            h.dropped += n;
            h.touched = now;
        }
    }

    /// Observations dropped on `conn` so far, if any.
    pub fn dropped_on(&self, conn: u64) -> Option<u64> {
        self.conns.get(&conn).map(|h| h.dropped)
    }

    /// Marks the stream opened by exchange `opening` unjudged because an observation of the
    /// holed connection `conn` belongs to it. Returns true the first time (the caller then
    /// emits the stream's `unknown`).
    pub fn mark(&mut self, conn: u64, opening: (u64, u64), now: Instant) -> bool {
        if let Some(h) = self.conns.get_mut(&conn) {
            h.attributed = true;
            h.touched = now;
        }
        match self.unjudged.entry(opening) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                e.insert(now);
                false
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(now);
                self.reported += 1;
                true
            }
        }
    }

    /// What to do with `f`: emit it, or withhold it because it is about an unjudged stream or
    /// an exchange of a holed connection (counted). The first finding withheld on a stream not
    /// marked yet marks it: [`Verdict::FirstWithheld`] asks the caller to emit the stream's
    /// `unknown` in its place. The not-judged `unknown` itself is always emitted.
    pub fn check(&mut self, f: &Finding, now: Instant) -> Verdict {
        if self.conns.is_empty() || f.kind == FindingKind::Unknown && is_not_judged(f) {
            return Verdict::Emit;
        }
        let opening = (f.stream.conn, f.stream.seq);
        let marked = self.unjudged.contains_key(&opening);
        if !marked && !self.conns.contains_key(&f.stream.conn) {
            return Verdict::Emit;
        }
        self.withheld += 1;
        if marked {
            return Verdict::Withheld;
        }
        self.mark(f.stream.conn, opening, now);
        Verdict::FirstWithheld(self.dropped_on(f.stream.conn).unwrap_or(0))
    }

    /// `conn` closed: if it is holed and nothing of it was attributed to a stream, returns how
    /// many observations it lost (the caller reports the connection `unknown`).
    /// Once per connection: the report it triggers is made once.
    pub fn closed_unattributed(&mut self, conn: u64) -> Option<u64> {
        let h = self.conns.get_mut(&conn)?;
        let lost = (!h.attributed).then_some(h.dropped);
        h.attributed = true;
        self.reported += u64::from(lost.is_some());
        lost
    }

    /// Forgets entries untouched for `forget_after`.
    pub fn sweep(&mut self, now: Instant, forget_after: Duration) {
        if self.conns.is_empty() && self.unjudged.is_empty() {
            return;
        }
        let fresh = |t: Instant| now.saturating_duration_since(t) < forget_after;
        self.conns.retain(|_, h| fresh(h.touched));
        self.unjudged.retain(|_, t| fresh(*t));
    }

    /// Streams marked unjudged and still remembered.
    pub fn unjudged(&self) -> usize {
        self.unjudged.len()
    }

    /// Holed connections still remembered.
    pub fn holed(&self) -> usize {
        self.conns.len()
    }
}

/// The detail every not-judged `unknown` starts with (so it is never withheld itself).
pub const NOT_JUDGED: &str = "not judged:";

fn is_not_judged(f: &Finding) -> bool {
    f.detail.starts_with(NOT_JUDGED)
}

/// The detail of a stream's not-judged `unknown`.
pub fn stream_detail(conn: u64, dropped: u64) -> String {
    format!(
        "{NOT_JUDGED} {dropped} observation(s) of connection {conn} were dropped (the audit's \
         queue was full; the relay never waits), so this stream is not judged and no other \
         finding is reported on it from here on; give the audit more room with --audit-queue"
    )
}

/// The detail of a holed connection none of whose observations reached a stream.
pub fn conn_detail(conn: u64, dropped: u64) -> String {
    format!(
        "{NOT_JUDGED} connection {conn} lost {dropped} observation(s) (the audit's queue was \
         full), its requests among them, so none of its exchanges is judged; give the audit \
         more room with --audit-queue"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::finding::StreamRef;

    fn finding(kind: FindingKind, conn: u64, seq: u64) -> Finding {
        let stream = StreamRef {
            request: "POST /mcp".into(),
            rpc_ids: Vec::new(),
            conn,
            seq,
            ..StreamRef::default()
        };
        Finding::new(kind, 0, None, stream)
    }

    #[test]
    fn nothing_is_withheld_while_no_observation_was_dropped() {
        let mut h = Holes::default();
        let f = finding(FindingKind::ReplayGap, 1, 0);
        assert_eq!(h.check(&f, Instant::now()), Verdict::Emit);
        assert_eq!(h.withheld, 0);
    }

    #[test]
    fn a_finding_on_an_unjudged_stream_is_withheld_and_one_elsewhere_is_not() {
        let now = Instant::now();
        let mut h = Holes::default();
        h.add([(9, 3)], now);
        // A resume leg on holed connection 9 belongs to the stream opened on (1, 0).
        assert!(h.mark(9, (1, 0), now));
        assert!(!h.mark(9, (1, 0), now), "marked once");
        let gap = finding(FindingKind::ReplayGap, 1, 0);
        assert_eq!(h.check(&gap, now), Verdict::Withheld);
        // An exchange opened on the holed connection itself, not marked yet: reported once.
        let torn = finding(FindingKind::TornCut, 9, 2);
        assert_eq!(h.check(&torn, now), Verdict::FirstWithheld(3));
        assert_eq!(h.check(&torn, now), Verdict::Withheld);
        assert_eq!(
            h.check(&finding(FindingKind::ReplayGap, 2, 0), now),
            Verdict::Emit
        );
        let mut own = finding(FindingKind::Unknown, 1, 0);
        own.detail = stream_detail(9, 3);
        assert_eq!(
            h.check(&own, now),
            Verdict::Emit,
            "the not-judged finding passes"
        );
        assert_eq!(h.withheld, 3);
    }

    #[test]
    fn an_unattributed_holed_connection_is_reported_at_close_and_an_attributed_one_is_not() {
        let now = Instant::now();
        let mut h = Holes::default();
        h.add([(4, 2), (5, 1)], now);
        h.add([(4, 1)], now);
        assert_eq!(h.dropped_on(4), Some(3));
        h.mark(5, (5, 0), now);
        assert_eq!(h.closed_unattributed(4), Some(3));
        assert_eq!(h.closed_unattributed(4), None, "reported once");
        assert_eq!(h.closed_unattributed(5), None);
        assert_eq!(h.closed_unattributed(6), None);
    }

    #[test]
    fn entries_are_forgotten_after_their_time() {
        let now = Instant::now();
        let mut h = Holes::default();
        h.add([(4, 2)], now);
        h.mark(4, (4, 0), now);
        h.sweep(now + Duration::from_secs(10), Duration::from_secs(60));
        assert_eq!((h.holed(), h.unjudged()), (1, 1));
        h.sweep(now + Duration::from_secs(61), Duration::from_secs(60));
        assert_eq!((h.holed(), h.unjudged()), (0, 0));
    }
}
