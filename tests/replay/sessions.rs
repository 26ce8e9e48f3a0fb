//! `replay --sessions N` on a correct lab (its resumes answered as fresh continuations, the
//! shipped profile's reset scaled down): identical calls in 4 and 16 concurrent sessions raise
//! no `cross-stream`, and the strict client and the audit count the same fresh streams; every
//! other fact they count differently carries a per-call note.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::lab::config::OnEvicted;
use tearline::load::{Policy, Stop};
use tearline::replay::{ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

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

async fn replay(sessions: usize, calls: u64) -> ReplayOutcome {
    let cfg = ReplayConfig {
        sessions,
        stop: Stop::Calls(calls),
        seed: 5,
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
    };
    let profile = tearline::profile::parse(PROFILE, "test-profile").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(120),
        tearline::replay::run(&cfg, &profile, PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_sessions_on_a_correct_lab_raise_no_cross_stream_and_agree_on_fresh_streams() {
    for (sessions, calls) in [(4, 24), (16, 32)] {
        let outcome = replay(sessions, calls).await;
        for phase in &outcome.phases {
            let counts = phase.auditor.counts();
            assert_eq!(
                counts.get("cross-stream"),
                None,
                "{sessions} sessions, {}: {:#?}",
                phase.label,
                phase.auditor.findings()
            );
        }
        let strict = outcome
            .phases
            .iter()
            .find(|p| p.policy == Policy::Strict)
            .expect("a strict phase");
        let fresh = strict.load.counters.fresh_stream;
        assert!(fresh > 0, "{sessions} sessions: no fresh stream to judge");
        assert_eq!(
            strict
                .auditor
                .counts()
                .get("fresh-stream")
                .copied()
                .unwrap_or(0),
            fresh,
            "{sessions} sessions: the strict client's fresh streams: {:#?}",
            strict.auditor.findings()
        );
        for (policy, r) in &outcome.report.reconciliation {
            for (fact, n) in &r.facts {
                assert!(
                    n.client == n.audit || (n.calls_differ > 0 && !r.notes.is_empty()),
                    "{sessions} sessions, {policy} {fact}: client {} / audit {} without a \
                     per-call note: {r:#?}",
                    n.client,
                    n.audit
                );
            }
        }
    }
}
