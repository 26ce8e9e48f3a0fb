//! What `tearline load` concludes from its runs: the `--fail-on` verdicts (checked for names
//! before the load starts) and a failure when no call succeeded.
//!
//! Why: a load whose every call failed (a wrong tool name: `jsonrpc-error`) used to exit 0 with
//! the server's message shown nowhere, and `load` had no thresholds while `replay` and
//! `report merge` did. The same language and exit codes apply: 99 when a threshold's condition
//! is true, 2 on errors (an unknown name, before any call; no call succeeded, after the run,
//! with the first message of each error kind).
//! Invariants: thresholds are judged on the report `--report-dir` would write; an interrupted
//! run evaluates none (its exit code is the signal's).

use std::process::ExitCode;

use super::{Args, CliError};
use crate::load::LoadOutcome;
use crate::load::config::Target;
use crate::report::names::{LLM_NAMES, NAMES};
use crate::report::thresholds;
use crate::report::thresholds_names::Vocabulary;

/// The names a load of `policies` reports: each policy's client histograms (the LLM client's
/// when `llm`), no proxy histograms.
pub fn vocabulary(policies: &[&str], llm: bool) -> Vocabulary {
    let client: &[&str] = if llm { &LLM_NAMES } else { &NAMES };
    Vocabulary::of_run(policies, client, &[])
}

/// Checks every `--fail-on` name before the load starts.
pub fn check_before(args: &Args, policies: &[&str], llm: bool) -> Result<(), CliError> {
    vocabulary(policies, llm)
        .check_all(&args.fail_on)
        .map_err(CliError::Names)
}

/// Why no call succeeded: each error kind with its count and first message.
pub fn why_nothing_succeeded(outcomes: &[LoadOutcome]) -> String {
    let mut parts = Vec::new();
    for o in outcomes {
        for (kind, n) in &o.errors {
            let said = o
                .error_messages
                .get(kind)
                .map_or(String::new(), |m| format!(" (first: {m})"));
            parts.push(format!("{} {kind}={n}{said}", o.policy.as_str()));
        }
    }
    if parts.is_empty() {
        "no error was recorded (did the run end before its first call?)".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The exit code of a finished (not interrupted) load: an error when no call succeeded, else
/// 99 when a `--fail-on` condition is true, else 0. Prints the verdicts.
pub fn judge(args: &Args, outcomes: &[LoadOutcome], target: &Target) -> Result<ExitCode, CliError> {
    let ok: u64 = outcomes.iter().map(|o| o.counters.ok).sum();
    if ok == 0 {
        return Err(CliError::NothingSucceeded(why_nothing_succeeded(outcomes)));
    }
    let report = super::agent::report(outcomes, target, args.seed);
    let verdicts = thresholds::evaluate_all(&args.fail_on, &report).map_err(CliError::Threshold)?;
    Ok(crate::cmd::report::print_verdicts(&verdicts))
}

/// Says that `--fail-on` was not evaluated because a signal interrupted the run.
pub fn not_evaluated(args: &Args) {
    for t in &args.fail_on {
        println!("FAIL --fail-on '{t}': not evaluated, the run was interrupted");
    }
}
