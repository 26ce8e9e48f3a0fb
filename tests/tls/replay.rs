//! `replay --tls`: the whole story (load client → proxy → lab) over TLS, with certificates
//! from a local CA made in a temporary directory, gives the same strict/naive outcome as the
//! plain replay of the same seed, well within a minute.

use std::time::{Duration, Instant};

use tearline::lab::LabConfig;
use tearline::lab::config::OnEvicted;
use tearline::load::{Counters, Policy, Stop};
use tearline::replay::{ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

/// The shipped profile's test, scaled to a 256 KiB result (as in replay_e2e.rs).
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

fn config(seed: u64, tls_ca_dir: Option<std::path::PathBuf>) -> ReplayConfig {
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
        tls_ca_dir,
        scenario: Default::default(),
        abandon_after: None,
        rst_unread: None,
        http2: false,
    }
}

async fn replay(cfg: ReplayConfig) -> ReplayOutcome {
    let profile = tearline::profile::parse(PROFILE, "test-profile").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes within a minute")
    .expect("replay runs")
}

/// What "the same outcome" means: per policy, whether calls were silently lost, and whether
/// the strict client detected a torn event.
fn verdict(c: &Counters) -> (u64, bool, bool) {
    (c.calls, c.silent_loss > 0, c.torn_cut > 0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_over_tls_has_the_same_strict_and_naive_outcome_as_plain() {
    let ca = tempfile::tempdir().unwrap();
    let plain = replay(config(7, None)).await;
    let started = Instant::now();
    let tls = replay(config(7, Some(ca.path().to_owned()))).await;
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        ca.path().join("ca.pem").exists(),
        "the CA is made in the given directory"
    );
    assert!(tls.report.cuts.total > 0, "no cut was made over TLS");
    for (p, t) in plain.phases.iter().zip(&tls.phases) {
        assert_eq!(p.policy, t.policy);
        let (pc, tc) = (&p.load.counters, &t.load.counters);
        assert_eq!(
            verdict(pc),
            verdict(tc),
            "{:?}: plain {pc:?} vs tls {tc:?}",
            p.policy
        );
    }
    let strict = &tls.phases[0].load.counters;
    let naive = &tls.phases[1].load.counters;
    assert_eq!(strict.silent_loss, 0);
    assert!(
        naive.silent_loss > 0,
        "the documents' failure did not show over TLS"
    );
    let naive_findings = tls.phases[1].auditor.counts();
    assert!(naive_findings.get("cursor-ahead").copied().unwrap_or(0) > 0);
}
