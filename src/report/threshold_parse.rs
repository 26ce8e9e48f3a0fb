//! The parser of `--fail-on` thresholds (grammar in [`super::thresholds`]).
//!
//! Why: a malformed threshold must fail before a run starts, with the 1-based column of the
//! first problem and what the grammar allows there.
//! Invariants: no input panics; columns count characters, not bytes; count names are checked
//! against the counter, finding and cut vocabularies here, while policy and histogram names are
//! left to evaluation (they depend on the report).

use std::str::FromStr;

use super::model::Counters;
use super::thresholds::{
    CUT_ACTIONS, FINDING_KINDS, Metric, Op, Stat, Threshold, ThresholdError, join,
};
use crate::wire::position::SseClass;

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

/// Checks a count name against the vocabulary.
fn check_count(
    expr: &str,
    column: usize,
    scope: Option<&str>,
    name: &str,
) -> Result<(), ThresholdError> {
    let classes = SseClass::ALL.map(SseClass::as_str);
    let llm = crate::wire::LlmPos::ALL.map(crate::wire::LlmPos::as_str);
    let (ok, known) = match scope {
        Some("cut") => (
            classes.contains(&name) || llm.contains(&name) || CUT_ACTIONS.contains(&name),
            join(classes.iter().chain(llm.iter()).chain(CUT_ACTIONS.iter())),
        ),
        Some("finding") => (FINDING_KINDS.contains(&name), join(FINDING_KINDS)),
        Some(_) => (Counters::canonical(name).is_some(), join(Counters::NAMES)),
        None => (
            name == "cuts" || Counters::canonical(name).is_some() || FINDING_KINDS.contains(&name),
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
            let mut histogram = scope.map_or(name.clone(), |s| format!("{s}.{name}"));
            // A replay's proxy histograms are per phase: `proxy.POLICY.NAME`.
            if histogram.starts_with("proxy.") && c.peek() == Some('.') {
                c.pos += 1;
                let third = c.word("a histogram name after `proxy.POLICY.`")?;
                histogram = format!("{histogram}.{third}");
            }
            c.skip_ws();
            if c.peek() != Some(')') {
                return Err(c.syntax("`)`"));
            }
            c.pos += 1;
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
        c.skip_ws();
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
