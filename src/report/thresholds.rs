//! `--fail-on` thresholds: a tiny expression language over a report's numbers.
//!
//! Why: CI needs a run to fail when the outcome is bad (`silent-loss>0`, `p99(call)>2s`); the
//! command then exits 99 (k6's convention), 0 when every threshold holds, 2 on errors.
//! A threshold names the condition that FAILS the run: `silent-loss>0` fails when any call was
//! silently lost.
//!
//! Grammar (spaces allowed between tokens):
//! ```text
//! threshold := metric op value
//! metric    := stat "(" name ")"      latency of a histogram, e.g. p99(call), max(proxy.first-event)
//!            | name                   a count, e.g. silent-loss, naive.silent-loss, torn-cut
//! stat      := "p" NUMBER | "max" | "min" | "mean"      (p50, p90, p99, p99.9, p100)
//! name      := word | word "." word   word = [A-Za-z0-9_-]+
//! op        := ">" | ">=" | "<" | "<=" | "==" | "!="
//! value     := NUMBER unit            unit = us | µs | ms | s, required for latencies,
//!                                     forbidden for counts
//! ```
//! Count names: a client counter ([`Counters::NAMES`](super::Counters::NAMES)) summed over
//! policies, or `POLICY.counter` for one policy; a finding kind ([`FINDING_KINDS`], also as
//! `finding.KIND`); `cuts` (all cuts) or `cut.CLASS` / `cut.ACTION` (e.g. `cut.mid-value`,
//! `cut.reset`). A name that is both (the facts the client and the audit both count,
//! [`Counters::SHARED`](super::Counters::SHARED): `torn-cut`, `reissued`, …) means the audit's
//! findings when bare and the client's counter as `POLICY.name`.
//! Histogram names: `NAME` (the policies' histograms of that name merged, else the proxy's),
//! `POLICY.NAME`, `proxy.NAME`, or `proxy.POLICY.NAME` (replay's audit histograms, per phase).
//! [`super::thresholds_names::Vocabulary`] checks names against a report, or against what a
//! run will produce before it starts.
//! Invariants: parsing checks syntax, units and the counter/finding/cut vocabulary and reports
//! the 1-based column of the first problem with what was expected there; policy and histogram
//! names are checked against the report when evaluating; a histogram without samples has every
//! statistic 0.

use std::fmt;

use super::latency::{self, human_us};
use super::model::Report;

/// Finding kinds of the proxy's audit: the names `audit::FindingKind::as_str` gives.
pub const FINDING_KINDS: [&str; 29] = [
    "torn-cut",
    "cursor-ahead",
    "cursor-behind",
    "cursor-missing",
    "replay-exact",
    "replay-gap",
    "replay-duplicate",
    "replay-reorder",
    "fresh-stream",
    "explicit-loss",
    "silent-empty",
    "cross-stream",
    "pending-call",
    "duplicate-response",
    "reissued",
    "abandoned",
    "unproven-resend",
    "reexecuted",
    "sent-after-cancel",
    "observer-gave-up",
    "truncation-accepted",
    "llm-truncated",
    "llm-retried",
    "llm-no-terminal",
    "llm-stalled",
    "llm-hung",
    "llm-unanswered",
    "stream-reset",
    "unknown",
];

/// Cut actions, as counted in `cuts.by_action`.
pub const CUT_ACTIONS: [&str; 4] = ["reset", "fin", "clean-end", "stall"];

/// Errors of parsing or evaluating a threshold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    /// The text does not follow the grammar.
    #[error("threshold `{expr}`, column {column}: expected {expected}, found {found}")]
    Syntax {
        /// The threshold text.
        expr: String,
        /// 1-based column (in characters) of the problem.
        column: usize,
        /// What the grammar allows there.
        expected: String,
        /// What is there.
        found: String,
    },
    /// A count name outside the vocabulary.
    #[error("threshold `{expr}`, column {column}: unknown metric `{name}`; known: {known}")]
    UnknownMetric {
        /// The threshold text.
        expr: String,
        /// 1-based column of the name.
        column: usize,
        /// The name.
        name: String,
        /// The names allowed there.
        known: String,
    },
    /// The report has no such policy.
    #[error(
        "threshold `{expr}`: no policy `{policy}` in the report (or the run); policies: {known}"
    )]
    UnknownPolicy {
        /// The threshold text.
        expr: String,
        /// The policy.
        policy: String,
        /// The report's policies.
        known: String,
    },
    /// The report has no such histogram.
    #[error(
        "threshold `{expr}`: no histogram `{name}` in the report (or the run); histograms: {known}"
    )]
    UnknownHistogram {
        /// The threshold text.
        expr: String,
        /// The histogram name.
        name: String,
        /// The report's histograms.
        known: String,
    },
}

/// A latency statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    /// Percentile in (0, 100].
    Percentile(f64),
    /// Largest value.
    Max,
    /// Smallest value.
    Min,
    /// Mean.
    Mean,
}

/// What a threshold measures.
#[derive(Debug, Clone, PartialEq)]
pub enum Metric {
    /// A count; `scope` is a policy, `cut` or `finding`.
    Count {
        /// Text before the dot, if any.
        scope: Option<String>,
        /// The counter, finding kind, `cuts`, or cut class/action.
        name: String,
    },
    /// A statistic of a histogram, in µs.
    Latency {
        /// Which statistic.
        stat: Stat,
        /// `NAME`, `POLICY.NAME` or `proxy.NAME`.
        histogram: String,
    },
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    fn test(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// A parsed threshold: the run fails when `metric op value` is true.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The text as given.
    pub expr: String,
    /// What is measured.
    pub metric: Metric,
    /// The comparison.
    pub op: Op,
    /// The bound: a count, or microseconds for latencies.
    pub value: f64,
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expr)
    }
}

/// The outcome of one threshold on one report.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The threshold.
    pub threshold: Threshold,
    /// The measured number (µs for latencies).
    pub actual: f64,
    /// True if and only if the failing condition is true.
    pub failed: bool,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let actual = match self.threshold.metric {
            Metric::Latency { .. } => human_us(self.actual),
            Metric::Count { .. } => format!("{}", self.actual),
        };
        let word = if self.failed { "FAILED" } else { "ok    " };
        write!(f, "{word} {}  (actual {actual})", self.threshold.expr)
    }
}

pub(crate) fn join(names: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let v: Vec<String> = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
    if v.is_empty() {
        "(none)".to_owned()
    } else {
        v.join(", ")
    }
}

impl Threshold {
    /// The measured number this threshold compares (µs for latencies).
    pub fn measure(&self, report: &Report) -> Result<f64, ThresholdError> {
        match &self.metric {
            Metric::Count { scope, name } => self.count(report, scope.as_deref(), name),
            Metric::Latency { stat, histogram } => {
                let h = self.histogram(report, histogram)?;
                if h.is_empty() {
                    return Ok(0.0);
                }
                Ok(match stat {
                    Stat::Percentile(p) => h.value_at_quantile(p / 100.0) as f64,
                    Stat::Max => h.max() as f64,
                    Stat::Min => h.min() as f64,
                    Stat::Mean => h.mean(),
                })
            }
        }
    }

    fn count(
        &self,
        report: &Report,
        scope: Option<&str>,
        name: &str,
    ) -> Result<f64, ThresholdError> {
        let n = match scope {
            None if name == "cuts" => report.cuts.total,
            None if FINDING_KINDS.contains(&name) => report.finding_count(name),
            None => report.counter_total(name).unwrap_or(0),
            Some("finding") => report.finding_count(name),
            Some("cut") => {
                let c = &report.cuts;
                c.by_class
                    .get(name)
                    .or(c.by_action.get(name))
                    .copied()
                    .unwrap_or(0)
            }
            Some(policy) => match report.policies.get(policy) {
                Some(p) => p.counters.get(name).unwrap_or(0),
                None => {
                    return Err(ThresholdError::UnknownPolicy {
                        expr: self.expr.clone(),
                        policy: policy.to_owned(),
                        known: join(report.policies.keys()),
                    });
                }
            },
        };
        Ok(n as f64)
    }

    fn histogram(
        &self,
        report: &Report,
        name: &str,
    ) -> Result<hdrhistogram::Histogram<u64>, ThresholdError> {
        let found = match name.split_once('.') {
            Some(("proxy", n)) => report.proxy_histograms.get(n).map(|l| l.histogram.clone()),
            Some((policy, n)) => report
                .policies
                .get(policy)
                .and_then(|p| p.histograms.get(n))
                .map(|l| l.histogram.clone()),
            None => {
                let mut merged: Option<hdrhistogram::Histogram<u64>> = None;
                for l in report
                    .policies
                    .values()
                    .filter_map(|p| p.histograms.get(name))
                {
                    let m = merged.get_or_insert_with(latency::new_histogram);
                    // Auto-resizing histograms of one precision always add.
                    let _ = m.add(&l.histogram);
                }
                merged.or_else(|| {
                    report
                        .proxy_histograms
                        .get(name)
                        .map(|l| l.histogram.clone())
                })
            }
        };
        found.ok_or_else(|| ThresholdError::UnknownHistogram {
            expr: self.expr.clone(),
            name: name.to_owned(),
            known: join(report.latencies().into_iter().map(|(label, _)| label)),
        })
    }

    /// Evaluates this threshold on `report`.
    pub fn evaluate(&self, report: &Report) -> Result<Verdict, ThresholdError> {
        let actual = self.measure(report)?;
        Ok(Verdict {
            threshold: self.clone(),
            actual,
            failed: self.op.test(actual, self.value),
        })
    }
}

/// Evaluates every threshold; the first unknown policy or histogram is an error.
pub fn evaluate_all(
    thresholds: &[Threshold],
    report: &Report,
) -> Result<Vec<Verdict>, ThresholdError> {
    thresholds.iter().map(|t| t.evaluate(report)).collect()
}

/// 99 when any verdict failed, else 0 (see the module doc for the convention).
pub fn exit_code(verdicts: &[Verdict]) -> u8 {
    if verdicts.iter().any(|v| v.failed) {
        super::EXIT_THRESHOLD_FAILED
    } else {
        super::EXIT_OK
    }
}

#[cfg(test)]
mod tests {
    use super::FINDING_KINDS;
    use crate::audit::FindingKind;

    #[test]
    fn every_finding_kind_of_the_audit_can_be_a_threshold_metric() {
        let audit: Vec<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(FINDING_KINDS.to_vec(), audit);
    }
}
