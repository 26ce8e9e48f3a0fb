//! The audit's deadlines: when the next time-based judgement falls due, so the worker can
//! wake for it with no traffic (a base type: it imports nothing of the audit).
//!
//! Why: `abandoned`, `pending-call`, `cursor-missing`, `truncation-accepted`, `llm-truncated`
//! and forgetting past the grace are judged in a sweep. Sweeping only when an observation or
//! a query arrives made a verdict come whenever traffic next came (measured 5.3–18.6 s after a
//! 5 s `--abandon-after`). Every place that arms a wait records its deadline here; the worker
//! sleeps until the earliest one (`tokio::time::sleep_until`, which a paused test clock
//! drives) and sweeps then.
//!
//! Invariants:
//! - A deadline is rounded *up* to the next [`TICK`] after the auditor's start: a sweep never
//!   comes before a deadline, at most one tick after it, and sweeps for deadlines armed close
//!   together are one sweep (at most one per tick, whatever the number of streams).
//! - The set is bounded by the longest wait divided by [`TICK`] (entries are times, not
//!   streams); a deadline whose wait was settled early stays and costs one empty sweep.
//! - Nothing here judges: a sweep re-checks every wait against its own rule.

use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// The grain of deadlines: a verdict comes at most this long after its deadline.
pub const TICK: Duration = Duration::from_millis(250);

/// Pending deadlines, rounded up to [`TICK`].
#[derive(Debug)]
pub struct Deadlines {
    start: Instant,
    due: BTreeSet<Instant>,
}

impl Deadlines {
    /// No deadlines; the grid starts at `start`.
    pub fn new(start: Instant) -> Self {
        Deadlines {
            start,
            due: BTreeSet::new(),
        }
    }

    /// A wait falls due at `at` (or later): the next sweep comes at `at` rounded up to the
    /// tick grid. A time past the clock's range is never due and is not kept.
    pub fn arm(&mut self, at: Instant) {
        let since = at.saturating_duration_since(self.start).as_nanos();
        let grain = TICK.as_nanos();
        let Some(off) = since
            .div_ceil(grain)
            .checked_mul(grain)
            .and_then(|n| u64::try_from(n).ok())
        else {
            return;
        };
        if let Some(t) = self.start.checked_add(Duration::from_nanos(off)) {
            self.due.insert(t);
        }
    }

    /// A wait of `wait` from `from` (nothing if it overflows the clock).
    pub fn arm_after(&mut self, from: Instant, wait: Duration) {
        if let Some(at) = from.checked_add(wait) {
            self.arm(at);
        }
    }

    /// The earliest pending deadline.
    pub fn next(&self) -> Option<Instant> {
        self.due.first().copied()
    }

    /// True if a deadline is at or before `now`.
    pub fn passed(&self, now: Instant) -> bool {
        self.next().is_some_and(|t| t <= now)
    }

    /// Forgets the deadlines at or before `now` (a sweep at `now` serves them).
    pub fn pass(&mut self, now: Instant) {
        while self.due.first().is_some_and(|t| *t <= now) {
            self.due.pop_first();
        }
    }

    /// Deadlines pending.
    pub fn len(&self) -> usize {
        self.due.len()
    }

    /// True if none is pending.
    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_rounded_up_to_the_tick_and_never_earlier() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0);
        d.arm(t0 + Duration::from_millis(1001));
        let next = d.next().expect("armed");
        assert_eq!(next, t0 + Duration::from_millis(1250));
        assert!(!d.passed(t0 + Duration::from_millis(1001)));
        assert!(d.passed(next));
    }

    #[test]
    fn deadlines_within_one_tick_share_one_sweep_and_pass_in_order() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0);
        for ms in [3010, 3020, 3240, 900] {
            d.arm(t0 + Duration::from_millis(ms));
        }
        assert_eq!(d.len(), 2);
        d.pass(t0 + Duration::from_millis(1000));
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(3250)));
        d.pass(t0 + Duration::from_millis(3250));
        assert!(d.is_empty());
    }

    #[test]
    fn a_wait_past_the_clock_range_is_never_due() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(t0);
        d.arm_after(t0, Duration::MAX);
        assert!(d.is_empty());
    }
}
