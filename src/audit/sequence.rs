//! What ids and MCP progress values make visible about one logical stream, across all its legs:
//! events first delivered out of order, and events skipped.
//!
//! A pure stage: it sees each event of a logical stream once, in delivery order, and answers
//! with the order and gap facts that event proves. No I/O, no clock.
//!
//! Precise rules:
//! - An id is *counter-like* if it is `<prefix><digits>` where the prefix is empty or ends with
//!   a character that is neither a letter nor a digit (`7`, `3-12`, `s_41`). A prefix becomes a
//!   *counter* of the stream once two of its ids were seen one apart (`3-0`, `3-1`), and stays
//!   one only while every step seen was exactly one: ids that merely end in digits (uuids,
//!   timestamps, a session-wide counter shared by interleaved streams) never qualify.
//! - Order: an event first delivered with counter value `n` after a value above `n` of the same
//!   counter was delivered is a reorder. For opaque ids, a `notifications/progress` whose
//!   `progress` for its `progressToken` is below the highest already delivered is a reorder
//!   (MCP: progress increases).
//! - Gap (certain): on a resume leg, an event first delivered with counter value `n` when the
//!   highest delivered value is `m < n - 1` skips `m+1 .. n-1`.
//! - Gap (suspected): without a counter, on a resume leg, a progress value that jumps by more
//!   than the constant step the token advanced by before (at least two values, all steps
//!   equal) skips `jump/step - 1` progress notifications; the finding says it is inferred.
//! - Only first deliveries are judged: a repeat of an id already delivered is a duplicate or a
//!   stale cursor's replay, judged elsewhere.
//! - Memory: at most [`MAX_TRACKED`] prefixes and tokens per stream; later ones are ignored.

use std::collections::HashMap;

/// Counters and progress tokens tracked per stream, at most.
pub const MAX_TRACKED: usize = 64;

/// Missing values listed per gap, at most (the count is always exact).
const MAX_LISTED: u64 = 32;

/// A fact one event proves.
#[derive(Debug, Clone, PartialEq)]
pub enum SeqFact {
    /// `id` (or progress `value` when the id is opaque) came after `after`, which is later.
    Reorder { id: String, after: String },
    /// Values between the previous delivery and this one were skipped.
    Gap {
        /// The ids (counter gaps) or progress values (suspected gaps) skipped, at most 32.
        missing: Vec<String>,
        /// How many were skipped.
        count: u64,
        /// True for counter gaps; false for a gap inferred from progress values.
        certain: bool,
        /// Evidence in words.
        detail: String,
    },
}

#[derive(Debug, Default)]
struct Counter {
    max: u64,
    counter: bool,
    broken: bool,
}

#[derive(Debug, Default)]
struct Progress {
    last: f64,
    max: f64,
    step: Option<f64>,
    constant: bool,
    values: u32,
}

/// The order and gap state of one logical stream.
#[derive(Debug, Default)]
pub struct Sequences {
    counters: HashMap<String, Counter>,
    progress: HashMap<String, Progress>,
}

/// Splits a counter-like id into its prefix and value.
pub fn counter_parts(id: &str) -> Option<(&str, u64)> {
    let digits = id.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 18 {
        return None;
    }
    let (prefix, n) = id.split_at(id.len() - digits);
    if prefix.chars().last().is_some_and(char::is_alphanumeric) {
        return None;
    }
    Some((prefix, n.parse().ok()?))
}

impl Sequences {
    /// Notes an event first delivered on the stream: its id (if any), its progress notification
    /// (token, value) if it is one, and whether it came on a resume leg. Returns what it proves.
    pub fn observe(
        &mut self,
        id: Option<&str>,
        progress: Option<(&str, f64)>,
        on_resume: bool,
    ) -> Vec<SeqFact> {
        let mut out = Vec::new();
        let mut by_counter = false;
        if let Some((prefix, n)) = id.and_then(counter_parts) {
            by_counter = self.counter(prefix, n, on_resume, &mut out);
        }
        if let Some((token, value)) = progress {
            self.progress(id, token, value, on_resume && !by_counter, &mut out);
        }
        out
    }

    /// Returns true if the prefix is a counter (its facts are authoritative).
    fn counter(&mut self, prefix: &str, n: u64, on_resume: bool, out: &mut Vec<SeqFact>) -> bool {
        if !self.counters.contains_key(prefix) {
            if self.counters.len() >= MAX_TRACKED {
                return false;
            }
            self.counters.insert(
                prefix.to_string(),
                Counter {
                    max: n,
                    ..Counter::default()
                },
            );
            return false;
        }
        let Some(c) = self.counters.get_mut(prefix) else {
            return false;
        };
        if c.broken {
            return false;
        }
        if !c.counter {
            if n == c.max + 1 {
                c.counter = true;
                c.max = n;
            } else if n > c.max {
                c.broken = true;
            } else {
                c.max = c.max.max(n);
            }
            return c.counter;
        }
        if n < c.max {
            out.push(SeqFact::Reorder {
                id: format!("{prefix}{n}"),
                after: format!("{prefix}{}", c.max),
            });
        } else if n > c.max + 1 {
            let count = n - c.max - 1;
            if on_resume {
                out.push(SeqFact::Gap {
                    missing: (c.max + 1..n)
                        .take(MAX_LISTED as usize)
                        .map(|k| format!("{prefix}{k}"))
                        .collect(),
                    count,
                    certain: true,
                    detail: format!(
                        "ids count up by one ({prefix}N); {prefix}{n} came right after \
                         {prefix}{}: {count} event(s) never sent",
                        c.max
                    ),
                });
            }
            c.max = n;
        } else {
            c.max = n;
        }
        true
    }

    fn progress(
        &mut self,
        id: Option<&str>,
        token: &str,
        value: f64,
        judge_gap: bool,
        out: &mut Vec<SeqFact>,
    ) {
        if !self.progress.contains_key(token) {
            if self.progress.len() >= MAX_TRACKED {
                return;
            }
            self.progress.insert(
                token.to_string(),
                Progress {
                    last: value,
                    max: value,
                    step: None,
                    constant: true,
                    values: 1,
                },
            );
            return;
        }
        let Some(p) = self.progress.get_mut(token) else {
            return;
        };
        if value < p.max {
            out.push(SeqFact::Reorder {
                id: id.map_or_else(|| format!("progress {value}"), str::to_string),
                after: format!("progress {} of token {token}", p.max),
            });
            return;
        }
        let delta = value - p.last;
        if judge_gap
            && p.values >= 2
            && p.constant
            && let Some(step) = p.step.filter(|s| *s > 0.0)
            && delta > step * 1.5
        {
            let skipped = (delta / step).round() - 1.0;
            let count = if skipped >= 1.0 { skipped as u64 } else { 1 };
            out.push(SeqFact::Gap {
                missing: (1..=count.min(MAX_LISTED))
                    .map(|k| format!("progress {}", p.last + step * k as f64))
                    .collect(),
                count,
                certain: false,
                detail: format!(
                    "suspected (inferred from progress values; ids are opaque): token {token} \
                     advanced by {step} per notification {} time(s), then jumped from {} to \
                     {value} after the resume: about {count} notification(s) never sent",
                    p.values - 1,
                    p.last
                ),
            });
            p.constant = false;
        } else if delta > 0.0 {
            match p.step {
                None => p.step = Some(delta),
                Some(s) if (s - delta).abs() > f64::EPSILON => p.constant = false,
                Some(_) => {}
            }
        }
        p.last = value;
        p.max = p.max.max(value);
        p.values = p.values.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap_count(facts: &[SeqFact]) -> Option<(u64, bool)> {
        facts.iter().find_map(|f| match f {
            SeqFact::Gap { count, certain, .. } => Some((*count, *certain)),
            _ => None,
        })
    }

    #[test]
    fn counter_like_ids_need_a_separator_before_the_digits() {
        assert_eq!(counter_parts("3-12"), Some(("3-", 12)));
        assert_eq!(counter_parts("41"), Some(("", 41)));
        assert_eq!(counter_parts("x_a1"), None);
        assert_eq!(counter_parts("0b6f1e2a-9c1d-4c55-8f0e-1a2b3c4d5e01"), None);
        assert_eq!(counter_parts("abc"), None);
    }

    #[test]
    fn a_skip_after_a_resume_is_a_certain_gap_and_a_step_back_a_reorder() {
        let mut s = Sequences::default();
        for id in ["2-0", "2-1", "2-2"] {
            assert!(s.observe(Some(id), None, false).is_empty());
        }
        assert_eq!(
            gap_count(&s.observe(Some("2-5"), None, true)),
            Some((2, true))
        );
        let f = s.observe(Some("2-3"), None, true);
        assert!(matches!(&f[0], SeqFact::Reorder { id, after } if id == "2-3" && after == "2-5"));
    }

    #[test]
    fn ids_that_never_step_by_one_are_no_counter() {
        let mut s = Sequences::default();
        for id in ["10", "12", "14"] {
            assert!(s.observe(Some(id), None, false).is_empty());
        }
        assert!(s.observe(Some("30"), None, true).is_empty());
        assert!(s.observe(Some("11"), None, true).is_empty());
    }

    #[test]
    fn skip_on_the_first_leg_is_not_a_replay_gap() {
        let mut s = Sequences::default();
        s.observe(Some("1"), None, false);
        s.observe(Some("2"), None, false);
        assert!(s.observe(Some("5"), None, false).is_empty());
    }

    #[test]
    fn progress_jump_after_constant_steps_is_a_suspected_gap() {
        let mut s = Sequences::default();
        s.observe(Some("u-a"), Some(("t", 1.0)), false);
        s.observe(Some("u-b"), Some(("t", 2.0)), false);
        assert!(s.observe(Some("u-c"), Some(("t", 3.0)), true).is_empty());
        assert_eq!(
            gap_count(&s.observe(Some("u-d"), Some(("t", 6.0)), true)),
            Some((2, false))
        );
        let f = s.observe(Some("u-e"), Some(("t", 4.0)), true);
        assert!(matches!(&f[0], SeqFact::Reorder { .. }));
    }

    #[test]
    fn progress_jump_without_constant_history_or_before_a_resume_is_nothing() {
        let mut s = Sequences::default();
        s.observe(None, Some(("t", 1.0)), false);
        assert!(s.observe(None, Some(("t", 5.0)), true).is_empty());
        let mut s = Sequences::default();
        s.observe(None, Some(("t", 1.0)), false);
        s.observe(None, Some(("t", 2.0)), false);
        assert!(s.observe(None, Some(("t", 9.0)), false).is_empty());
    }
}
