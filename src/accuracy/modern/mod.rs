//! The MCP 2026-07-28 era of the accuracy harness: the lab in stateless mode behind the proxy
//! with one scripted cut per run, driven by the real SDK clients pinned in `tests/peers/` (the
//! TypeScript client 2.4 pinned to 2026-07-28, PyPI `mcp` 2.3 in 2026-07-28 mode, each run by
//! an app script with a workload: identical calls, distinct calls, an app-level retry layer
//! with or without the `Idempotency-Key` marker or with other arguments, a client that gives
//! up) and by tearline's own
//! strict, naive and retry clients; cuts fall in progress events (the tool still running), in
//! the result event and in JSON response bodies (the tool finished).
//!
//! The truth is the clients' own record of every call attempt ([`truth`]), the lab's execution
//! counter ([`crate::lab::truth::Execution`]) and the harness's record of where its cut fell
//! ([`cut`]); [`expect`] states, kind by kind, what that truth requires — the contract the
//! audit is scored against. Scoring is the same per-kind table as the legacy era
//! ([`super::Table`]).

pub mod cell;
pub mod cut;
pub mod expect;
pub mod run;
pub mod truth;

use futures_util::StreamExt;

pub use cell::{ModernCell, h2_matrix, h2_quick, matrix, quick};

use super::RunResult;

/// Runs every cell of `cells` once per seed in `seeds`, `concurrency` runs at a time, and
/// returns the results in completion order.
pub async fn run_all(cells: &[ModernCell], seeds: &[u64], concurrency: usize) -> Vec<RunResult> {
    let jobs: Vec<(ModernCell, u64)> = seeds
        .iter()
        .flat_map(|&s| cells.iter().map(move |&c| (c, s)))
        .collect();
    futures_util::stream::iter(jobs)
        .map(|(cell, seed)| run::run(cell, seed))
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await
}
