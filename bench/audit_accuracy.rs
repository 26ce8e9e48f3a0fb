//! Accuracy of the audit against ground truth, at scale: every cell of the accuracy matrix
//! (server bugs, evictions, the stale-cursor client, the EventSource-like client × id styles ×
//! LF/CRLF × reset/fin/clean-end) × seeds, once without a profile and once with each shipped
//! profile's faults added (profiles/*.toml), then the per-kind confusion table (TP/FP/FN,
//! precision, recall) of all runs and of each profile.
//!
//! Run: `cargo bench --bench audit_accuracy` (env: SEEDS=4 seeds per cell and profile,
//! CONCURRENCY=16 runs at a time, FILTER=<substring of a cell label>, PROFILES=0 to skip the
//! profiles or PROFILES=a,b for only those, ACCURACY_DUMP=<label substring> to print matching
//! runs' findings and truth). 132 cells × 4 seeds × (1 + every profile) runs by default.

use std::sync::Arc;
use std::time::Instant;

use tearline::accuracy::{self, Table};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let seeds: Vec<u64> = (1..=env_u64("SEEDS", 4)).map(|s| 1000 + s).collect();
    let concurrency = env_u64("CONCURRENCY", 16) as usize;
    let filter = std::env::var("FILTER").unwrap_or_default();
    let cells: Vec<_> = accuracy::matrix()
        .into_iter()
        .filter(|c| c.label().contains(&filter))
        .collect();
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let mut all = Vec::new();
    for profile in profiles {
        let name = profile
            .as_ref()
            .map_or("(none)".to_owned(), |p| p.0.clone());
        let t0 = Instant::now();
        let results = rt.block_on(accuracy::run_all(&cells, &seeds, profile, concurrency));
        let table = Table::of(&results);
        println!(
            "== profile {name}: {} cells × {} seeds in {:.1} s\n{}",
            cells.len(),
            seeds.len(),
            t0.elapsed().as_secs_f64(),
            table.render()
        );
        all.extend(results);
    }
    let table = Table::of(&all);
    println!(
        "== all profiles: {} runs in {:.1} s\n{}",
        all.len(),
        started.elapsed().as_secs_f64(),
        table.render()
    );
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
