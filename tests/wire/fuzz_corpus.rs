//! The fuzz targets on stable, in CI: every file of `fuzz/corpus/<target>/` (the seeds and every
//! input that once broke an invariant) replayed through the same functions `cargo fuzz` runs,
//! then a bounded number of seeded mutations of them (fixed seed, a fraction of a second per
//! target). A failure names the target and prints the input so it can become a corpus file.

use std::path::Path;
use std::time::{Duration, Instant};

use tearline::fuzzing::{self, Rng, mutate};

/// Mutations per target, and the time after which a target stops early (slow CI machines).
const MUTATIONS: usize = 400;
const BUDGET: Duration = Duration::from_millis(1500);

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_file())
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    files.sort();
    files
}

fn run_one(target: &str, what: &str, input: &[u8]) {
    let r = std::panic::catch_unwind(|| fuzzing::run(target, input));
    match r {
        Ok(known) => assert!(known, "no fuzz target named {target}"),
        Err(e) => {
            eprintln!(
                "fuzz target {target} failed on {what}: {:?}",
                String::from_utf8_lossy(input)
            );
            std::panic::resume_unwind(e);
        }
    }
}

fn replay_and_mutate(target: &str) {
    let files = corpus(target);
    assert!(
        files.len() >= 3,
        "{target}: a seed corpus of at least 3 files"
    );
    for (name, bytes) in &files {
        run_one(target, name, bytes);
    }
    let mut rng = Rng::from_bytes(target.as_bytes());
    let start = Instant::now();
    let mut done = 0;
    while done < MUTATIONS && start.elapsed() < BUDGET {
        let base = &files[rng.below(files.len())].1;
        let other = &files[rng.below(files.len())].1;
        let input = mutate(base, other, &mut rng);
        run_one(target, &format!("mutation {done}"), &input);
        done += 1;
    }
    eprintln!("{target}: {} corpus files, {done} mutations", files.len());
}

#[test]
fn http1_observer_corpus_keeps_its_invariants() {
    replay_and_mutate("http1");
}

#[test]
fn sse_scanner_corpus_matches_the_reference_splitter() {
    replay_and_mutate("sse");
}

#[test]
fn profile_parser_corpus_errors_carry_line_and_column() {
    replay_and_mutate("profile");
}

#[test]
fn control_api_corpus_refusals_change_nothing() {
    replay_and_mutate("control");
}

#[test]
fn lab_intake_corpus_answers_json_rpc() {
    replay_and_mutate("lab");
}

#[test]
fn load_client_corpus_survives_hostile_servers() {
    replay_and_mutate("load");
}

#[test]
fn every_target_has_a_corpus_and_a_fuzz_binary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    for t in fuzzing::TARGETS {
        assert!(root.join("corpus").join(t).is_dir(), "fuzz/corpus/{t}");
        assert!(
            root.join("fuzz_targets").join(format!("{t}.rs")).is_file(),
            "fuzz/fuzz_targets/{t}.rs"
        );
    }
}
