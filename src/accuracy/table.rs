//! The per-kind confusion table of a set of runs: for every finding kind, the runs where the
//! truth requires it and the audit reported it (TP), reported it without cause (FP), or missed
//! it (FN); precision = TP / (TP + FP), recall = TP / (TP + FN) (1.0 when the denominator is 0).
//!
//! Invariant: scoring is per run and kind (presence), so a kind reported three times in one run
//! counts once; runs whose harness failed are counted apart, never scored.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::run::RunResult;

/// Counts of one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Score {
    /// Required and reported.
    pub tp: u64,
    /// Reported, not required.
    pub fp: u64,
    /// Required, not reported.
    pub fn_: u64,
    /// Example runs of FP and of FN (at most a few of each): `label seed: expected … observed …`.
    pub examples: Vec<String>,
}

impl Score {
    /// TP / (TP + FP), 1.0 without positives.
    pub fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    /// TP / (TP + FN), 1.0 without required ones.
    pub fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 1.0 } else { a as f64 / b as f64 }
}

/// The table over a set of runs.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Scores by kind.
    pub kinds: BTreeMap<String, Score>,
    /// Runs scored.
    pub runs: u64,
    /// Runs whose harness failed (label, seed, error).
    pub harness_errors: Vec<String>,
}

const EXAMPLES: usize = 4;

fn describe(r: &RunResult) -> String {
    let join =
        |s: &std::collections::BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    format!(
        "{}{} seed {}: expected [{}] observed [{}]",
        r.label,
        r.profile
            .as_deref()
            .map(|p| format!(" +{p}"))
            .unwrap_or_default(),
        r.seed,
        join(&r.expected),
        join(&r.observed)
    )
}

impl Table {
    /// Scores `results`.
    pub fn of(results: &[RunResult]) -> Table {
        let mut t = Table::default();
        for r in results {
            if let Some(e) = &r.harness_error {
                t.harness_errors
                    .push(format!("{} seed {}: {e}", r.label, r.seed));
                continue;
            }
            t.runs += 1;
            for k in r.expected.union(&r.observed) {
                let s = t.kinds.entry(k.clone()).or_default();
                match (r.expected.contains(k), r.observed.contains(k)) {
                    (true, true) => s.tp += 1,
                    (false, true) => s.fp += 1,
                    (true, false) => s.fn_ += 1,
                    (false, false) => {}
                }
                let fp = r.observed.contains(k);
                let side = if fp { "FP" } else { "FN" };
                let shown = s.examples.iter().filter(|e| e.starts_with(side)).count();
                if r.expected.contains(k) != fp && shown < EXAMPLES {
                    s.examples.push(format!("{side} {}", describe(r)));
                }
            }
        }
        t
    }

    /// Kinds whose precision or recall is below 1.
    pub fn failing(&self) -> Vec<&str> {
        self.kinds
            .iter()
            .filter(|(_, s)| s.fp > 0 || s.fn_ > 0)
            .map(|(k, _)| k.as_str())
            .collect()
    }

    /// The table as text, with examples of every miss.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} runs scored, {} harness failures\n{:<20} {:>6} {:>6} {:>6} {:>9} {:>9}\n",
            self.runs,
            self.harness_errors.len(),
            "kind",
            "TP",
            "FP",
            "FN",
            "precision",
            "recall"
        );
        for (k, s) in &self.kinds {
            let _ = writeln!(
                out,
                "{k:<20} {:>6} {:>6} {:>6} {:>9.3} {:>9.3}",
                s.tp,
                s.fp,
                s.fn_,
                s.precision(),
                s.recall()
            );
        }
        for (k, s) in &self.kinds {
            for e in &s.examples {
                let _ = writeln!(out, "  {k} {e}");
            }
        }
        for e in self.harness_errors.iter().take(EXAMPLES) {
            let _ = writeln!(out, "  harness: {e}");
        }
        out
    }
}
