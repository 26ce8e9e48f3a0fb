//! Human and JSON summaries of [`LoadOutcome`]s: counters side by side per policy, then
//! p50/p90/p99/p99.9/max of every histogram.
//!
//! Invariant: a summary only formats what the outcome holds; nothing is recomputed or guessed.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::LoadOutcome;
use super::histo::NAMES;

const QUANTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999)];

/// A text table: one column per outcome (policy).
pub fn text(outcomes: &[LoadOutcome]) -> String {
    let mut out = String::new();
    let _ = write!(out, "{:<18}", "");
    for o in outcomes {
        let _ = write!(out, "{:>14}", o.policy.as_str());
    }
    out.push('\n');
    let Some(first) = outcomes.first() else {
        return out;
    };
    for (i, (name, _)) in first.counters.pairs().iter().enumerate() {
        let _ = write!(out, "{name:<18}");
        for o in outcomes {
            let _ = write!(out, "{:>14}", o.counters.pairs()[i].1);
        }
        out.push('\n');
    }
    let _ = write!(out, "{:<18}", "elapsed");
    for o in outcomes {
        let _ = write!(out, "{:>14}", format!("{:.2}s", o.elapsed.as_secs_f64()));
    }
    out.push('\n');
    let _ = write!(out, "{:<18}", "calls/s");
    for o in outcomes {
        let rate = o.counters.calls as f64 / o.elapsed.as_secs_f64().max(1e-9);
        let _ = write!(out, "{rate:>14.1}");
    }
    out.push_str("\n\nlatency (ms)        count      p50      p90      p99    p99.9      max\n");
    for o in outcomes {
        for name in NAMES {
            let Some(h) = o.histograms.get(name) else {
                continue;
            };
            let _ = write!(out, "{:<6} {:<12}{:>6}", o.policy.as_str(), name, h.len());
            for (_, q) in QUANTILES {
                let _ = write!(out, "{:>9.2}", h.value_at_quantile(q) as f64 / 1000.0);
            }
            let _ = writeln!(out, "{:>9.2}", h.max() as f64 / 1000.0);
        }
    }
    for o in outcomes {
        if !o.errors.is_empty() {
            let _ = write!(out, "\n{} errors:", o.policy.as_str());
            for (k, v) in &o.errors {
                let _ = write!(out, " {k}={v}");
            }
            out.push('\n');
            for (k, m) in &o.error_messages {
                let _ = writeln!(out, "  first {k}: {m}");
            }
        }
    }
    out
}

/// A JSON document: per policy, counters, errors, histogram percentiles (µs) and traces.
pub fn json(outcomes: &[LoadOutcome]) -> Value {
    let runs: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let histograms: serde_json::Map<String, Value> = o
                .histograms
                .iter()
                .map(|(name, h)| {
                    let mut m = serde_json::Map::new();
                    m.insert("count".into(), json!(h.len()));
                    for (label, q) in QUANTILES {
                        m.insert(label.into(), json!(h.value_at_quantile(q)));
                    }
                    m.insert("max".into(), json!(h.max()));
                    (name.to_string(), Value::Object(m))
                })
                .collect();
            json!({
                "policy": o.policy,
                "elapsed_s": o.elapsed.as_secs_f64(),
                "counters": o.counters,
                "errors": o.errors,
                "error_messages": o.error_messages,
                "histograms_us": histograms,
                "traces": o.traces,
            })
        })
        .collect();
    json!({ "runs": runs })
}
