//! Measures the audit against ground truth, in two eras:
//! - legacy (2025-11-25, resumable): the lab (with scripted server bugs) behind the proxy with
//!   a scripted `sse_cut`, the load client (strict, stale-cursor, or EventSource-like) in front
//!   ([`cell`], [`run`], [`expect`]);
//! - 2026-07-28 (stateless): the lab behind the proxy with a scripted cut of one call, the real
//!   SDK clients (app drivers in `tests/peers/`) and tearline's strict, naive and retry clients
//!   in front ([`modern`]).
//!
//! Both compare the auditor's finding kinds with the kinds the truth records require, per kind,
//! over many seeded runs ([`table`]).
//!
//! Why here, above `lab`, `load`, `proxy` and `audit`: composition lives in one place, and the
//! test (`tests/audit/accuracy.rs`) and the bench (`bench/audit_accuracy.rs`) share it.
//!
//! Invariants: each run is independent (its own lab, proxy and auditor on 127.0.0.1 port 0);
//! the truth never reads the audit; a run whose harness failed is reported, never scored.

pub mod budget;
pub mod cell;
pub mod expect;
pub mod modern;
pub mod peers;
mod rig;
pub mod run;
pub mod table;
pub mod trace;
pub mod trace_replay;

use std::sync::Arc;

use futures_util::StreamExt;

pub use cell::{Cell, Scenario, Transport, h2_matrix, matrix};
pub use run::RunResult;
pub use table::Table;

use crate::profile::Profile;

/// Runs every cell of `cells` once per seed in `seeds` (with `profile`'s faults added when
/// given), `concurrency` runs at a time, and returns the results in completion order.
pub async fn run_all(
    cells: &[Cell],
    seeds: &[u64],
    profile: Option<(String, Arc<Profile>)>,
    concurrency: usize,
) -> Vec<RunResult> {
    let jobs: Vec<(Cell, u64)> = seeds
        .iter()
        .flat_map(|&s| cells.iter().map(move |&c| (c, s)))
        .collect();
    futures_util::stream::iter(jobs)
        .map(|(cell, seed)| {
            let profile = profile.clone();
            async move {
                let p = profile.as_ref().map(|(n, p)| (n.as_str(), &**p));
                run::run(cell, seed, p).await
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await
}
