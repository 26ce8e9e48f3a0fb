//! The report directory of one load agent (`tearline load --report-dir DIR`): the same files as
//! any tearline report (`report.json`, per-second `report.hlog`, `.hgrm`, `report.html`,
//! `summary.txt`) plus `calls.jsonl`, the disconnect stories of the calls (request id, what the
//! client held, how the call ended), so `tearline report merge` can tell the outcome of the call
//! each proxy cut.
//!
//! Invariants: every number comes from the runs' outcomes; `report.hlog` holds, per policy and
//! histogram, one interval for every second of the run (empty seconds included), each interval
//! dated from the agent's wall-clock start, so the per-tag sum of the intervals equals the
//! report's histogram; the report records the seed and the segment.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use hdrhistogram::Histogram;

use crate::load::LoadOutcome;
use crate::load::config::Target;
use crate::report::{self, Report, ReportError, RunFacts, Written};
use crate::units::millis;

/// File name of the call stories in an agent's report directory.
pub const CALLS_FILE: &str = "calls.jsonl";

/// The report of `outcomes` (one per policy, run one after the other) against `target`.
pub fn report(outcomes: &[LoadOutcome], target: &Target, seed: u64) -> Report {
    let origin = outcomes
        .iter()
        .map(|o| o.started_at)
        .min()
        .unwrap_or_else(SystemTime::now);
    let end = outcomes
        .iter()
        .map(|o| o.started_at + o.elapsed)
        .max()
        .unwrap_or(origin);
    let address = format!("{}:{}", target.host, target.port);
    let mut facts = RunFacts::new(
        seed,
        "none (load agent)",
        report::Target::User {
            address,
            path: target.path.clone(),
        },
    );
    facts.started_at = report::clock::rfc3339(origin);
    facts.duration_ms = millis(end.duration_since(origin).unwrap_or_default());
    facts.segment = outcomes
        .first()
        .filter(|o| !o.segment.is_whole())
        .map(|o| o.segment.to_string());
    let mut r = Report::new(facts);
    for o in outcomes {
        let policy = o.policy.as_str();
        let offset = o.started_at.duration_since(origin).unwrap_or_default();
        crate::replay::assemble::add_seconds(&mut r, policy, millis(offset), o);
        let histograms: BTreeMap<&str, Histogram<u64>> =
            o.histograms.iter().map(|(k, h)| (*k, h.clone())).collect();
        r.add_policy(policy, o.counters, histograms);
    }
    r
}

/// Writes the report of `outcomes` (marked interrupted when a signal cut the run short) and
/// their call stories into `dir`; `run_id` (an LLM run's, see
/// `load::llm::LlmLoadConfig::run_id`) goes into the facts.
pub fn write(
    outcomes: &[LoadOutcome],
    target: &Target,
    seed: u64,
    run_id: Option<String>,
    interruption: Option<&report::Interruption>,
    dir: &Path,
) -> Result<Written, ReportError> {
    let mut r = report(outcomes, target, seed);
    r.facts.run_id = run_id;
    r.facts.interrupted = interruption.cloned();
    let written = report::write_all(&r, dir)?;
    let mut lines = String::new();
    for trace in outcomes.iter().flat_map(|o| &o.traces) {
        if let Ok(line) = serde_json::to_string(trace) {
            lines.push_str(&line);
            lines.push('\n');
        }
    }
    let path = dir.join(CALLS_FILE);
    std::fs::write(&path, lines).map_err(|e| ReportError::Io { path, source: e })?;
    Ok(written)
}
