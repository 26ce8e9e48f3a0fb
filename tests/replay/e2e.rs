//! End to end: a small `tearline replay` (lab server with eviction and `fresh` resumes, proxy
//! with one reset per SSE stream and a 250 ms outage, both client policies) produces consistent
//! numbers, the documents' failure for the naive client, its fix for the strict one, readable
//! report files, and the same cuts for the same seed.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::lab::config::OnEvicted;
use tearline::load::{Policy, Stop};
use tearline::replay::tap::Moment;
use tearline::replay::{ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

/// The shipped profile's test, scaled to a 256 KiB result so a run takes seconds.
const PROFILE: &str = r#"
description = "reset-250ms scaled down"
[[fault]]
kind = "sse_cut"
at = "any-byte"
range = [0, 262144]
action = "reset"
outage_ms = 250
probability = 0.5
"#;

fn config(seed: u64) -> ReplayConfig {
    ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(8),
        seed,
        size: 256 * 1024,
        lines: 3,
        lab: LabConfig {
            buffer: 64,
            buffer_bytes: Some(64 * 1024),
            on_evicted: OnEvicted::Fresh,
            retry: Duration::from_millis(50),
            ..LabConfig::default()
        },
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout: Duration::from_secs(20),
        policies: vec![Policy::Strict, Policy::Naive],
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario: Default::default(),
        abandon_after: None,
        rst_unread: None,
        http2: false,
    }
}

async fn replay(seed: u64) -> ReplayOutcome {
    let profile = tearline::profile::parse(PROFILE, "test-profile").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(120),
        tearline::replay::run(&config(seed), &profile, PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs")
}

fn cut_offsets(outcome: &ReplayOutcome) -> Vec<Vec<u64>> {
    outcome
        .phases
        .iter()
        .map(|p| {
            p.tap
                .moments()
                .iter()
                .filter_map(|m| match m {
                    Moment::Cut { point, .. } => Some(point.raw_offset),
                    Moment::Resume { .. } => None,
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_replay_reproduces_the_failure_and_its_fix_and_writes_readable_reports() {
    let outcome = replay(7).await;
    let report = &outcome.report;
    assert_eq!(report.facts.seed, 7);
    assert!(report.cuts.total > 0, "no cut was made");
    crate::fail_on_names::assert_names_known_before_the_run(
        report,
        Default::default(),
        &[Policy::Strict, Policy::Naive],
        256 * 1024,
    );

    for phase in &outcome.phases {
        let c = &phase.load.counters;
        assert_eq!(c.calls, 8, "{:?}", phase.policy);
        assert_eq!(
            c.calls,
            c.ok + c.failed + c.silent_loss,
            "{:?}",
            phase.policy
        );
    }
    // The cut timeline says how each cut leg's call ended (its colour in report.html), resume
    // legs included: the naive phase's silent losses are there, and the calls named by the
    // naive cuts that lost a call are exactly the client's silent losses (a lost call may be
    // cut on its first leg and again on a resume leg).
    let cut_outcomes: Vec<&str> = report
        .timeline
        .iter()
        .filter(|e| e.kind == tearline::report::TimelineKind::Cut)
        .filter_map(|e| e.detail.split_once(" -> call ").map(|(_, o)| o))
        .collect();
    assert!(!cut_outcomes.is_empty(), "no cut names its call's outcome");
    assert!(
        cut_outcomes
            .iter()
            .all(|o| ["ok", "failed", "silently-lost"].contains(o)),
        "{cut_outcomes:?}"
    );
    let naive_lost: std::collections::BTreeSet<&str> = report
        .timeline
        .iter()
        .filter(|e| e.detail.starts_with("[naive]") && e.detail.ends_with("-> call silently-lost"))
        .filter_map(|e| {
            let (_, request) = e.detail.split_once(", request ")?;
            request.split([' ', ',']).next()
        })
        .collect();
    assert_eq!(
        naive_lost.len() as u64,
        outcome.phases[1].load.counters.silent_loss
    );
    let strict = &outcome.phases[0];
    let naive = &outcome.phases[1];
    assert_eq!(strict.policy, Policy::Strict);
    let strict_torn = strict
        .auditor
        .counts()
        .get("torn-cut")
        .copied()
        .unwrap_or(0);
    assert!(strict_torn > 0);
    assert_eq!(
        strict.load.counters.torn_cut, strict_torn,
        "strict detections must equal the proxy's torn cuts"
    );
    assert_eq!(strict.load.counters.silent_loss, 0);
    assert!(
        naive.load.counters.silent_loss > 0,
        "the documents' failure did not show"
    );
    let strict_losses: Vec<_> = strict
        .auditor
        .findings()
        .into_iter()
        .filter(|f| f.class == tearline::audit::FindingClass::Loss)
        .collect();
    assert!(
        strict_losses.is_empty(),
        "the strict client recovered every call (its re-issues replace the lost calls): {strict_losses:#?}"
    );
    assert_eq!(
        naive.auditor.loss_affected(),
        naive.load.counters.silent_loss,
        "each silent loss of the naive client yields one loss finding: {:#?}",
        naive.auditor.findings()
    );
    let naive_findings = naive.auditor.counts();
    assert!(naive_findings.get("cursor-ahead").copied().unwrap_or(0) > 0);
    assert!(naive_findings.get("fresh-stream").copied().unwrap_or(0) > 0);

    // The client's and the audit's counts of the same facts agree, or the report says, call by
    // call, why they do not.
    assert_eq!(
        report.reconciliation.keys().collect::<Vec<_>>(),
        ["naive", "strict"]
    );
    for (policy, r) in &report.reconciliation {
        assert!(r.calls_compared > 0, "{policy}: no call compared");
        for (fact, n) in &r.facts {
            if n.client != n.audit {
                assert!(
                    n.calls_differ > 0 && !r.notes.is_empty(),
                    "{policy} {fact}: client {} / audit {} without a per-call note: {r:#?}",
                    n.client,
                    n.audit
                );
            }
        }
        let differing: u64 = r.facts.values().map(|n| n.calls_differ).sum();
        if differing == 0 {
            assert!(
                r.notes.is_empty(),
                "{policy}: notes without a difference: {r:#?}"
            );
        }
    }
    let torn = &report.reconciliation["strict"].facts["torn-cut"];
    assert_eq!((torn.client, torn.calls_differ), (strict_torn, 0));
    let summary = tearline::report::summary::render(report);
    assert!(
        summary.contains("Client and audit, same facts"),
        "{summary}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let written = tearline::report::write_all(report, dir.path()).expect("reports written");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&written.json).expect("json")).expect("json parses");
    let naive_json = &json["policies"]["naive"]["counters"];
    assert_eq!(naive_json["silent-loss"], naive.load.counters.silent_loss);
    let html = std::fs::read_to_string(&written.html).expect("html");
    assert!(html.contains("<svg") && !html.contains("<script"));
    let log = tearline::report::hlog::load(&written.hlog).expect("hlog reads back");
    let totals = log.totals().expect("hlog decodes");
    assert!(totals.keys().any(|t| t.starts_with("strict.")));
    assert!(!written.hgrm.is_empty());
    for hgrm in &written.hgrm {
        let text = std::fs::read_to_string(hgrm).expect("hgrm");
        let mut last = (0.0f64, 0.0f64);
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let cols: Vec<f64> = line
                .split_whitespace()
                .take(2)
                .filter_map(|c| c.parse().ok())
                .collect();
            if let [value, pct] = cols[..] {
                assert!(
                    value >= last.0 && pct >= last.1,
                    "{} not monotone",
                    hgrm.display()
                );
                last = (value, pct);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_gives_the_same_cuts_and_counts() {
    let a = replay(11).await;
    let b = replay(11).await;
    assert_eq!(cut_offsets(&a), cut_offsets(&b));
    for (pa, pb) in a.phases.iter().zip(&b.phases) {
        assert_eq!(pa.load.counters, pb.load.counters, "{:?}", pa.policy);
    }
    assert_eq!(a.report.cuts, b.report.cuts);
}

/// Runs the `tearline` binary with stdout and stderr piped (not a terminal), RUST_LOG unset.
fn replay_binary(extra: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = dir.path().join("scaled.toml");
    std::fs::write(&profile, PROFILE).expect("write profile");
    let out_dir = dir.path().join("report");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
        .arg("replay")
        .args(["--seed", "7", "--calls", "3", "--size", "262144"])
        .args(["--buffer-bytes", "65536", "--call-timeout", "20s"])
        .arg("--profile")
        .arg(&profile)
        .arg("--out")
        .arg(&out_dir)
        .args(extra)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run tearline replay");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn replay_off_a_terminal_prints_milestones_story_and_summary_but_no_connection_logs() {
    let (code, stdout, stderr) = replay_binary(&[]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    for line in stderr.lines() {
        assert!(
            line.starts_with("tearline replay: "),
            "a stderr line that is not a replay milestone: {line:?}\n{stderr}"
        );
    }
    for policy in ["strict", "naive"] {
        assert!(
            stderr.contains(&format!("tearline replay: {policy} client: 3 calls in ")),
            "no end-of-phase milestone for {policy}:\n{stderr}"
        );
    }
    assert!(stderr.lines().count() <= 6, "too chatty:\n{stderr}");
    assert!(stdout.contains("\nCuts ("), "no summary:\n{stdout}");
    assert!(
        stdout.contains("median events/s") && stdout.contains("strict.max-gap"),
        "no stream metrics in the summary:\n{stdout}"
    );
    assert!(stdout.contains("reports written to "), "{stdout}");

    // `-v` brings the per-connection lines back (so the check above can fail).
    let (code, _, verbose) = replay_binary(&["-v", "--policy", "naive"]);
    assert_eq!(code, 0, "{verbose}");
    assert!(
        verbose
            .lines()
            .any(|l| l.contains("INFO") && l.contains("open")),
        "-v shows no per-connection log line:\n{verbose}"
    );
}
