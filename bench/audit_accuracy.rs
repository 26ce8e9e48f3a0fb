//! Accuracy of the audit against ground truth, at scale, in both eras:
//! - legacy (2025-11-25): every cell of the accuracy matrix (server bugs, evictions, the
//!   stale-cursor client, the EventSource-like client, 4 and 16 sessions at once × id styles ×
//!   LF/CRLF ×
//!   reset/fin/clean-end) × seeds, once without a profile and once with each shipped profile's
//!   faults added (profiles/*.toml);
//! - 2026-07-28: every cell of the modern matrix (the real TypeScript and Python SDK clients
//!   driven by app scripts — identical calls, distinct calls, unmarked and marked app retries,
//!   giving up — and tearline's strict, naive and retry clients × `progress`/`append` × a cut in
//!   a progress event, in the result event, in a JSON body) × seeds;
//!
//! then the per-kind confusion table (TP/FP/FN, precision, recall) per profile, per era and of
//! all runs.
//!
//! Run: `cargo bench --bench audit_accuracy` (env: ERA=legacy|2026|both (default both),
//! SEEDS=4 seeds per cell and profile, CONCURRENCY=16 runs at a time (2026 runs start node and
//! python processes: CONCURRENCY_2026, default 6), FILTER=<substring of a cell label>,
//! PROFILES=0 to skip the profiles or PROFILES=a,b for only those, ACCURACY_DUMP=<label
//! substring> to print matching runs' findings and truth). Legacy: 156 cells × 4 seeds × (1 +
//! every profile) runs; 2026: 108 cells over HTTP/1.1 and 72 over h2c (TRANSPORT=h1|h2 for
//! one) × 4 seeds.

use std::sync::Arc;
use std::time::Instant;

use tearline::accuracy::{self, RunResult, Table};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn print_table(name: &str, results: &[RunResult], secs: f64) {
    let table = Table::of(results);
    println!(
        "== {name}: {} runs in {secs:.1} s\n{}",
        results.len(),
        table.render()
    );
}

fn legacy(
    rt: &tokio::runtime::Runtime,
    seeds: &[u64],
    filter: &str,
    concurrency: usize,
) -> Vec<RunResult> {
    let cells: Vec<_> = match std::env::var("TRANSPORT").as_deref() {
        Ok("h1") => accuracy::matrix(),
        Ok("h2") => accuracy::h2_matrix(),
        _ => [accuracy::matrix(), accuracy::h2_matrix()].concat(),
    }
    .into_iter()
    .filter(|c| c.label().contains(filter))
    .collect();
    if cells.is_empty() {
        return Vec::new();
    }
    let mut profiles = vec![None];
    let wanted = std::env::var("PROFILES").unwrap_or_default();
    let wanted: Vec<&str> = wanted.split(',').filter(|w| !w.is_empty()).collect();
    if wanted != ["0"] {
        let mut paths: Vec<_> = std::fs::read_dir("profiles")
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        paths.retain(|p| p.extension().is_some_and(|e| e == "toml"));
        paths.sort();
        for p in paths {
            match tearline::profile::load(&p) {
                Ok(profile) => {
                    let name = p
                        .file_stem()
                        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
                    if wanted.is_empty() || wanted.contains(&name.as_str()) {
                        profiles.push(Some((name, Arc::new(profile))));
                    }
                }
                Err(e) => eprintln!("skipping {}: {}", p.display(), e.message()),
            }
        }
    }
    let mut all = Vec::new();
    for profile in profiles {
        let name = profile
            .as_ref()
            .map_or("(none)".to_owned(), |p| p.0.clone());
        let t0 = Instant::now();
        let results = rt.block_on(accuracy::run_all(&cells, seeds, profile, concurrency));
        print_table(
            &format!(
                "legacy, profile {name} ({} cells × {} seeds)",
                cells.len(),
                seeds.len()
            ),
            &results,
            t0.elapsed().as_secs_f64(),
        );
        all.extend(results);
    }
    all
}

fn modern(
    rt: &tokio::runtime::Runtime,
    seeds: &[u64],
    filter: &str,
    concurrency: usize,
) -> Vec<RunResult> {
    let cells: Vec<_> = match std::env::var("TRANSPORT").as_deref() {
        Ok("h1") => accuracy::modern::matrix(),
        Ok("h2") => accuracy::modern::h2_matrix(),
        _ => [accuracy::modern::matrix(), accuracy::modern::h2_matrix()].concat(),
    }
    .into_iter()
    .filter(|c| c.label().contains(filter))
    .collect();
    if cells.is_empty() {
        return Vec::new();
    }
    let t0 = Instant::now();
    let results = rt.block_on(accuracy::modern::run_all(&cells, seeds, concurrency));
    print_table(
        &format!("2026-07-28 ({} cells × {} seeds)", cells.len(), seeds.len()),
        &results,
        t0.elapsed().as_secs_f64(),
    );
    results
}

fn main() {
    let seeds: Vec<u64> = (1..=env_u64("SEEDS", 4)).map(|s| 1000 + s).collect();
    let concurrency = env_u64("CONCURRENCY", 16) as usize;
    let concurrency_2026 = env_u64("CONCURRENCY_2026", 6) as usize;
    let filter = std::env::var("FILTER").unwrap_or_default();
    let era = std::env::var("ERA").unwrap_or_else(|_| "both".to_owned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let mut all = Vec::new();
    if era == "legacy" || era == "both" {
        all.extend(legacy(&rt, &seeds, &filter, concurrency));
    }
    if era == "2026" || era == "both" {
        all.extend(modern(&rt, &seeds, &filter, concurrency_2026));
    }
    print_table("all runs", &all, started.elapsed().as_secs_f64());
    let table = Table::of(&all);
    let failing = table.failing();
    println!(
        "kinds below precision = recall = 1.0: {}",
        if failing.is_empty() {
            "none".to_owned()
        } else {
            failing.join(", ")
        }
    );
}
