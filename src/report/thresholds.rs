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
//! Count names: a client counter ([`Counters::NAMES`]) summed over policies, or `POLICY.counter`
//! for one policy; a finding kind ([`FINDING_KINDS`], also as `finding.KIND`); `cuts` (all
//! cuts) or `cut.CLASS` / `cut.ACTION` (e.g. `cut.mid-value`, `cut.reset`).
//! Histogram names: `NAME` (the policies' histograms of that name merged, else the proxy's),
//! `POLICY.NAME`, or `proxy.NAME`.
//! Invariants: parsing checks syntax, units and the counter/finding/cut vocabulary and reports
//! the 1-based column of the first problem with what was expected there; policy and histogram
//! names are checked against the report when evaluating; a histogram without samples has every
//! statistic 0.

use std::fmt;
use std::str::FromStr;

use super::latency::{self, human_us};
use super::model::{Counters, Report};
use crate::wire::position::SseClass;

/// Finding kinds of the proxy's audit (the design note's list).
pub const FINDING_KINDS: [&str; 13] = [
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
    "pending-call",
    "cross-stream",
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
    #[error("threshold `{expr}`: the report has no policy `{policy}`; policies: {known}")]
    UnknownPolicy {
        /// The threshold text.
        expr: String,
        /// The policy.
        policy: String,
        /// The report's policies.
        known: String,
    },
    /// The report has no such histogram.
    #[error("threshold `{expr}`: the report has no histogram `{name}`; histograms: {known}")]
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

/// A cursor over the threshold text that reports 1-based character columns.
struct Cursor<'a> {
    expr: &'a str,
    chars: Vec<char>,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn skip_ws(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "end of input".to_owned(),
            Some(_) => format!("`{}`", self.chars[self.pos..].iter().collect::<String>()),
        }
    }

    fn syntax(&self, expected: &str) -> ThresholdError {
        ThresholdError::Syntax {
            expr: self.expr.to_owned(),
            column: self.pos + 1,
            expected: expected.to_owned(),
            found: self.found(),
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn word(&mut self, expected: &str) -> Result<String, ThresholdError> {
        let w = self.take_while(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if w.is_empty() {
            Err(self.syntax(expected))
        } else {
            Ok(w)
        }
    }

    /// `word` or `word.word`, with the column of its start.
    fn name(&mut self, expected: &str) -> Result<(Option<String>, String, usize), ThresholdError> {
        let column = self.pos + 1;
        let first = self.word(expected)?;
        if self.peek() == Some('.') {
            self.pos += 1;
            let second = self.word("a name after `.`")?;
            Ok((Some(first), second, column))
        } else {
            Ok((None, first, column))
        }
    }

    fn number(&mut self) -> Result<f64, ThresholdError> {
        let start = self.pos;
        let text = self.take_while(|c| c.is_ascii_digit() || c == '.');
        text.parse::<f64>().map_err(|_| {
            self.pos = start;
            self.syntax("a number (e.g. 0, 2, 1.5)")
        })
    }
}

fn join(names: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let v: Vec<String> = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
    if v.is_empty() {
        "(none)".to_owned()
    } else {
        v.join(", ")
    }
}

/// Checks a count name against the vocabulary.
fn check_count(
    expr: &str,
    column: usize,
    scope: Option<&str>,
    name: &str,
) -> Result<(), ThresholdError> {
    let classes = SseClass::ALL.map(SseClass::as_str);
    let (ok, known) = match scope {
        Some("cut") => (
            classes.contains(&name) || CUT_ACTIONS.contains(&name),
            join(classes.iter().chain(CUT_ACTIONS.iter())),
        ),
        Some("finding") => (FINDING_KINDS.contains(&name), join(FINDING_KINDS)),
        Some(_) => (Counters::NAMES.contains(&name), join(Counters::NAMES)),
        None => (
            name == "cuts" || Counters::NAMES.contains(&name) || FINDING_KINDS.contains(&name),
            join(
                Counters::NAMES
                    .iter()
                    .chain(FINDING_KINDS.iter())
                    .chain(["cuts"].iter()),
            ) + ", POLICY.COUNTER, cut.CLASS, cut.ACTION, pNN(HISTOGRAM), max(HISTOGRAM)",
        ),
    };
    if ok {
        Ok(())
    } else {
        let shown = scope.map_or(name.to_owned(), |s| format!("{s}.{name}"));
        Err(ThresholdError::UnknownMetric {
            expr: expr.to_owned(),
            column,
            name: shown,
            known,
        })
    }
}

fn parse_stat(word: &str) -> Option<Stat> {
    match word {
        "max" => Some(Stat::Max),
        "min" => Some(Stat::Min),
        "mean" => Some(Stat::Mean),
        _ => {
            let p: f64 = word.strip_prefix('p')?.parse().ok()?;
            (p > 0.0 && p <= 100.0).then_some(Stat::Percentile(p))
        }
    }
}

impl FromStr for Threshold {
    type Err = ThresholdError;

    fn from_str(expr: &str) -> Result<Threshold, ThresholdError> {
        let mut c = Cursor {
            expr,
            chars: expr.chars().collect(),
            pos: 0,
        };
        c.skip_ws();
        let stat_start = c.pos;
        let head = c.take_while(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_');
        c.skip_ws();
        let metric = if c.peek() == Some('(') {
            let Some(stat) = parse_stat(&head) else {
                c.pos = stat_start;
                return Err(
                    c.syntax("a statistic before `(`: pNN (0 < NN <= 100), max, min or mean")
                );
            };
            c.pos += 1;
            c.skip_ws();
            let (scope, name, _) = c.name("a histogram name (e.g. call, strict.call)")?;
            c.skip_ws();
            if c.peek() != Some(')') {
                return Err(c.syntax("`)`"));
            }
            c.pos += 1;
            let histogram = scope.map_or(name.clone(), |s| format!("{s}.{name}"));
            Metric::Latency { stat, histogram }
        } else {
            c.pos = stat_start;
            let (scope, name, column) =
                c.name("a metric name (e.g. silent-loss, naive.silent-loss, p99(call))")?;
            check_count(expr, column, scope.as_deref(), &name)?;
            Metric::Count { scope, name }
        };
        c.skip_ws();
        let op = match (c.peek(), c.chars.get(c.pos + 1).copied()) {
            (Some('>'), Some('=')) => Op::Ge,
            (Some('<'), Some('=')) => Op::Le,
            (Some('='), Some('=')) => Op::Eq,
            (Some('!'), Some('=')) => Op::Ne,
            (Some('>'), _) => Op::Gt,
            (Some('<'), _) => Op::Lt,
            _ => return Err(c.syntax("an operator: >, >=, <, <=, == or !=")),
        };
        c.pos += if matches!(op, Op::Gt | Op::Lt) { 1 } else { 2 };
        c.skip_ws();
        let number = c.number()?;
        let unit_start = c.pos;
        let unit = c.take_while(|ch| ch.is_alphabetic());
        let value = match (&metric, unit.as_str()) {
            (Metric::Latency { .. }, "us" | "µs") => number,
            (Metric::Latency { .. }, "ms") => number * 1_000.0,
            (Metric::Latency { .. }, "s") => number * 1_000_000.0,
            (Metric::Latency { .. }, _) => {
                c.pos = unit_start;
                return Err(c.syntax("a time unit after the number: us, ms or s"));
            }
            (Metric::Count { .. }, "") => number,
            (Metric::Count { .. }, _) => {
                c.pos = unit_start;
                return Err(c.syntax("end of input (a count takes no unit)"));
            }
        };
        c.skip_ws();
        if c.peek().is_some() {
            return Err(c.syntax("end of input"));
        }
        Ok(Threshold {
            expr: expr.trim().to_owned(),
            metric,
            op,
            value,
        })
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
