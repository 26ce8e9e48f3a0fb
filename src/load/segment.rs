//! Execution segments: one load plan split among several agents (`--segment 2/8`), each running
//! its share on its own machine, so that together they run exactly the plan.
//!
//! Why: a load that needs more clients than one machine holds is run by many `tearline load`
//! agents; they must not overlap and must not leave gaps, and their reports must merge into the
//! report of the whole plan.
//! Invariants:
//! - Segment `i/n` (1-based) owns the half-open share `[⌊T·(i−1)/n⌋, ⌊T·i/n⌋)` of any total
//!   `T` (sessions, calls): the shares of `1/n … n/n` are disjoint and their union is `[0, T)`,
//!   for every `T` and `n` (no rounding remainder is lost or doubled).
//! - Sessions keep their plan-wide index: session `g` paces itself as session `g` of the whole
//!   plan (same rate, same offset), so with a shared start the union of the agents' schedules
//!   is the plan's schedule.
//! - Under a rate, `--calls C` admits call `j` of session `g` if and only if its index in the
//!   plan's schedule, `g + j·S` (S = the plan's sessions), is below `C`: every agent admits
//!   exactly the plan's calls of its sessions, the same ones whichever agent runs them.
//! - Labels are plan-wide: session `g` is `s<g>` and the JSON-RPC ids of its requests are
//!   `g·2³² + k` (`k ≥ 1`), so no two agents of one plan ever use the same session label or
//!   request (stream) id, and a proxy's findings name the agent's session.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use thiserror::Error;

/// Bits of a request id reserved for the request's number within its session.
const ID_BITS: u32 = 32;

/// Segment `index` of `count` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    /// Which share, `1..=count`.
    pub index: u32,
    /// Into how many shares the plan is split.
    pub count: u32,
}

/// Why a segment was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SegmentError {
    /// Not of the form `I/N`.
    #[error("segment {0:?} is not I/N (e.g. 2/8: the second of eight shares)")]
    Syntax(String),
    /// `I` outside `1..=N`, or `N` zero.
    #[error("segment {index}/{count} is out of range: I must be 1..=N and N at least 1")]
    Range {
        /// The index given.
        index: u32,
        /// The count given.
        count: u32,
    },
}

impl Default for Segment {
    fn default() -> Segment {
        Segment::WHOLE
    }
}

impl Segment {
    /// The whole plan (`1/1`).
    pub const WHOLE: Segment = Segment { index: 1, count: 1 };

    /// Segment `index/count`, checked.
    pub fn new(index: u32, count: u32) -> Result<Segment, SegmentError> {
        if count == 0 || index == 0 || index > count {
            return Err(SegmentError::Range { index, count });
        }
        Ok(Segment { index, count })
    }

    /// True for `1/1`.
    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    /// This segment's share of `total` items numbered `0..total`.
    pub fn share(self, total: u64) -> Range<u64> {
        let cut = |i: u32| {
            let v = u128::from(total) * u128::from(i) / u128::from(self.count.max(1));
            u64::try_from(v).unwrap_or(total)
        };
        cut(self.index - 1)..cut(self.index)
    }

    /// The plan-wide indexes of this segment's sessions out of `sessions`.
    pub fn sessions(self, sessions: usize) -> Range<usize> {
        let r = self.share(sessions as u64);
        let to = |v: u64| usize::try_from(v).unwrap_or(sessions);
        to(r.start)..to(r.end)
    }

    /// How many of `calls` this segment makes.
    pub fn calls(self, calls: u64) -> u64 {
        let r = self.share(calls);
        r.end - r.start
    }

    /// True if call `j` (0-based) of plan-wide session `g` belongs to a paced plan of `calls`
    /// calls over `sessions` sessions (its schedule index `g + j·sessions` is below `calls`).
    pub fn admits(g: usize, j: u64, sessions: usize, calls: u64) -> bool {
        (j as u128) * (sessions as u128) + (g as u128) < u128::from(calls)
    }

    /// How many calls of a paced plan of `calls` calls over `sessions` sessions this segment's
    /// sessions make (see [`Segment::admits`]); the segments' counts add up to `calls`.
    pub fn paced_calls(self, sessions: usize, calls: u64) -> u64 {
        let s = sessions.max(1) as u64;
        self.sessions(sessions)
            .map(|g| calls.saturating_sub(g as u64).div_ceil(s))
            .sum()
    }

    /// The label of plan-wide session `g`.
    pub fn session_label(g: usize) -> String {
        format!("s{g}")
    }

    /// The first JSON-RPC id of plan-wide session `g` is this plus 1.
    pub fn request_id_base(g: usize) -> u64 {
        (g as u64) << ID_BITS
    }

    /// The plan-wide session a request id belongs to.
    pub fn session_of_request(id: u64) -> usize {
        usize::try_from(id >> ID_BITS).unwrap_or(usize::MAX)
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Segment {
    type Err = SegmentError;

    fn from_str(s: &str) -> Result<Segment, SegmentError> {
        let syntax = || SegmentError::Syntax(s.to_owned());
        let (i, n) = s.trim().split_once('/').ok_or_else(syntax)?;
        let i: u32 = i.trim().parse().map_err(|_| syntax())?;
        let n: u32 = n.trim().parse().map_err(|_| syntax())?;
        Segment::new(i, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_every_split_are_disjoint_and_cover_the_total() {
        for count in 1..=9u32 {
            for total in [0u64, 1, 2, 7, 10, 999, 10_000, u64::MAX] {
                let mut next = 0u64;
                for index in 1..=count {
                    let r = Segment::new(index, count).expect("valid").share(total);
                    assert_eq!(
                        r.start, next,
                        "{index}/{count} of {total} starts where the last ended"
                    );
                    assert!(r.end >= r.start);
                    next = r.end;
                }
                assert_eq!(next, total, "the shares of {count} end at {total}");
            }
        }
    }

    #[test]
    fn paced_calls_of_the_segments_are_the_plans_schedule_exactly() {
        for (sessions, calls, count) in [(8usize, 80u64, 4u32), (7, 50, 3), (10, 3, 2), (5, 0, 5)] {
            let mut indexes = Vec::new();
            let mut total = 0;
            for index in 1..=count {
                let seg = Segment::new(index, count).expect("valid");
                let mut mine = 0;
                for g in seg.sessions(sessions) {
                    for j in (0u64..).take_while(|&j| Segment::admits(g, j, sessions, calls)) {
                        indexes.push(g as u64 + j * sessions as u64);
                        mine += 1;
                    }
                }
                assert_eq!(mine, seg.paced_calls(sessions, calls));
                total += mine;
            }
            indexes.sort_unstable();
            assert_eq!(
                indexes,
                (0..calls).collect::<Vec<_>>(),
                "{sessions} sessions, {calls} calls"
            );
            assert_eq!(total, calls);
        }
    }

    #[test]
    fn parses_i_of_n_and_rejects_the_rest() {
        assert_eq!("2/8".parse(), Ok(Segment { index: 2, count: 8 }));
        assert_eq!(" 1 / 1 ".parse(), Ok(Segment::WHOLE));
        assert!(matches!(
            "0/4".parse::<Segment>(),
            Err(SegmentError::Range { .. })
        ));
        assert!(matches!(
            "5/4".parse::<Segment>(),
            Err(SegmentError::Range { .. })
        ));
        assert!(matches!(
            "1/0".parse::<Segment>(),
            Err(SegmentError::Range { .. })
        ));
        assert!(matches!(
            "2of8".parse::<Segment>(),
            Err(SegmentError::Syntax(_))
        ));
        assert!(matches!(
            "a/8".parse::<Segment>(),
            Err(SegmentError::Syntax(_))
        ));
        assert_eq!(Segment::new(3, 4).expect("valid").to_string(), "3/4");
    }

    #[test]
    fn request_ids_name_their_plan_wide_session() {
        for g in [0usize, 1, 4_999, 1 << 20] {
            let first = Segment::request_id_base(g) + 1;
            assert_eq!(Segment::session_of_request(first), g);
            assert_eq!(Segment::session_of_request(first + 1_000_000), g);
        }
        assert_eq!(
            Segment::request_id_base(0) + 1,
            1,
            "an unsplit plan's session 0 keeps ids 1, 2, …"
        );
    }
}
