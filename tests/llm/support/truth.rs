//! What was on the wire in a cell, from the test's own knowledge — never from tearline: where
//! the cut was placed (the kind, on the lab's own layout of the answer) and how many requests
//! the counting relay passed to the lab. tearline's verdicts are scored against this.
//!
//! Invariants: [`truth`] depends only on the kind, the mode, whether the cell had a fault and
//! the relay's count; [`score`] counts each expected fact found once (true positive), each
//! reported fact not expected (false positive) and each expected fact not reported (false
//! negative).

use super::drivers::{Mode, Sdk};
use super::table::Kind;

/// One thing the wire shows about a stream, as a verdict must state it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fact {
    /// The stream ended before its completion signal (`tool_complete`: whether a tool call's
    /// arguments had all arrived; `None` for a text answer).
    Truncated { tool_complete: Option<bool> },
    /// The completion signal arrived, the terminal event (`[DONE]`, `message_stop`) did not.
    TerminalMissing,
    /// The stream stopped mid-answer and stayed open until the client ended it.
    Stalled,
    /// The client sent the request again.
    Retried,
}

/// The facts of one cell's stream(s).
pub fn truth(kind: Kind, mode: Mode, had_fault: bool, requests: u64) -> Vec<Fact> {
    if !had_fault {
        return Vec::new();
    }
    let tool = |complete: bool| (mode == Mode::Tool).then_some(complete);
    let mut facts = match kind {
        // No answer began: nothing to judge but what the client did next.
        Kind::ResetBeforeResponse => Vec::new(),
        // Every delta (so every argument) arrived; the signal did not.
        Kind::CleanBeforeSignal => vec![Fact::Truncated {
            tool_complete: tool(true),
        }],
        // Every request's stream began and was cut before its first token (the fault cuts
        // every stream): a client that re-sends (Vercel's OpenAI provider, unmarked) meets one
        // truncation per request.
        Kind::ResetBeforeFirstToken => vec![
            Fact::Truncated {
                tool_complete: tool(false),
            };
            usize::try_from(requests.max(1)).unwrap_or(1)
        ],
        Kind::CleanMidData | Kind::Reset | Kind::Fin | Kind::MidToolArgs => {
            vec![Fact::Truncated {
                tool_complete: tool(false),
            }]
        }
        Kind::Stall => vec![
            Fact::Stalled,
            Fact::Truncated {
                tool_complete: tool(false),
            },
        ],
        Kind::AfterSignal => vec![Fact::TerminalMissing],
    };
    if requests > 1 {
        facts.push(Fact::Retried);
    }
    facts.sort();
    facts
}

/// True positives, false positives, false negatives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Score {
    pub tp: u64,
    pub fp: u64,
    pub fn_: u64,
}

impl Score {
    /// Scores `reported` facts against `expected` ones (both as multisets).
    pub fn of(expected: &[Fact], reported: &[Fact]) -> Score {
        let mut left: Vec<Fact> = expected.to_vec();
        let mut s = Score::default();
        for f in reported {
            match left.iter().position(|e| e == f) {
                Some(i) => {
                    left.swap_remove(i);
                    s.tp += 1;
                }
                None => s.fp += 1,
            }
        }
        s.fn_ = left.len() as u64;
        s
    }

    pub fn add(&mut self, o: Score) {
        self.tp += o.tp;
        self.fp += o.fp;
        self.fn_ += o.fn_;
    }

    /// Precision (1.0 when nothing was reported).
    pub fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }

    /// Recall (1.0 when nothing was expected).
    pub fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fn_) as f64
        }
    }
}

/// Precision/recall per truncation kind (rows) × SDK (columns), with totals, as a markdown
/// table; each cell is `precision / recall (facts expected)`.
pub fn score_table(scored: &[(Kind, Sdk, Score, u64)]) -> String {
    let sdks = [
        Sdk::PyOpenai,
        Sdk::PyAnthropic,
        Sdk::JsOpenai,
        Sdk::JsAnthropic,
        Sdk::JsVercel,
    ];
    let sum = |keep: &dyn Fn(Kind, Sdk) -> bool| {
        let mut acc = (Score::default(), 0);
        for (k, s, score, n) in scored {
            if keep(*k, *s) {
                acc.0.add(*score);
                acc.1 += n;
            }
        }
        format!(
            "{:.2} / {:.2} ({})",
            acc.0.precision(),
            acc.0.recall(),
            acc.1
        )
    };
    let mut out = String::from("| kind |");
    for s in sdks {
        out.push_str(&format!(" {} |", s.package()));
    }
    out.push_str(" all |\n|---|");
    out.push_str(&"---|".repeat(sdks.len() + 1));
    out.push('\n');
    for kind in Kind::ALL {
        out.push_str(&format!("| {} |", kind.title()));
        for sdk in sdks {
            out.push_str(&format!(" {} |", sum(&|k, s| k == kind && s == sdk)));
        }
        out.push_str(&format!(" {} |\n", sum(&|k, _| k == kind)));
    }
    out.push_str("| all |");
    for sdk in sdks {
        out.push_str(&format!(" {} |", sum(&|_, s| s == sdk)));
    }
    out.push_str(&format!(" {} |\n", sum(&|_, _| true)));
    out
}
