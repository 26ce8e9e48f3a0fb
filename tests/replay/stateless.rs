//! `tearline replay --scenario stateless`: the documents' cuts against a 2026-07-28 lab. No
//! stream can be resumed, so the strict client re-issues every cut call with a new id and its
//! `Idempotency-Key` (the audit reports `reissued`) and loses nothing, while the naive client
//! takes a truncated stream as the answer and loses calls silently (the audit: `abandoned`, or
//! `unproven-resend` where an identical call followed, never `reissued`: its next identical call
//! is no re-send); the `retry` phase re-issues the NOT
//! idempotent `append`, and the audit reports `reexecuted` exactly as often as the lab's
//! side-effect counter says the side effect ran again.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::load::{Policy, Stop};
use tearline::replay::ReplayConfig;
use tearline::replay::scenario::Scenario;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_scenario_strict_reissues_naive_loses_silently_without_reissued_retry_reexecutes_as_the_counter_says()
 {
    let mut lab = LabConfig {
        retry: Duration::from_millis(50),
        ..LabConfig::default()
    };
    Scenario::Stateless.apply(&mut lab);
    let cfg = ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(8),
        seed: 7,
        size: 256 * 1024,
        lines: 3,
        lab,
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout: Duration::from_secs(20),
        policies: vec![Policy::Strict, Policy::Naive],
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario: Scenario::Stateless,
        abandon_after: None,
        rst_unread: None,
        http2: false,
    };
    let counter = cfg.lab.side_effects.clone();
    let profile = tearline::profile::parse(PROFILE, "test-profile").expect("profile parses");
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes within 60 s")
    .expect("replay runs");
    assert!(outcome.report.cuts.total > 0, "no cut was made");
    crate::fail_on_names::assert_names_known_before_the_run(
        &outcome.report,
        Scenario::Stateless,
        &cfg.policies,
        cfg.size,
    );
    let strict = &outcome.phases[0];
    let naive = &outcome.phases[1];
    assert_eq!(strict.policy, Policy::Strict);
    let s = &strict.load.counters;
    assert_eq!(
        (s.calls, s.ok, s.silent_loss),
        (8, 8, 0),
        "{:?}",
        strict.load.errors
    );
    assert!(s.reissued > 0, "a cut call was re-issued");
    assert_eq!(s.resumes, 0, "2026-07-28 streams are never resumed");
    let counts = strict.auditor.counts();
    assert!(
        counts.get("reissued").copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
    let n = &naive.load.counters;
    assert!(
        n.silent_loss > 0,
        "the naive client's silent loss did not show"
    );
    assert_eq!(n.calls, n.ok + n.failed + n.silent_loss);
    assert_eq!(n.reissued, 0);
    // The naive client re-sends nothing: its later identical calls prove no re-send, so the
    // audit reports its cut calls `unproven-resend` (an identical call followed) or lost
    // (`abandoned`: none followed), never `reissued`.
    let counts = naive.auditor.counts();
    assert_eq!(counts.get("reissued"), None, "naive: {counts:?}");
    let unanswered = ["abandoned", "unproven-resend"]
        .iter()
        .map(|k| counts.get(*k).copied().unwrap_or(0))
        .sum::<u64>();
    assert!(unanswered > 0, "naive: {counts:?}");

    // `blob` is idempotent: re-issuing it is never a re-execution, and it has no side effect.
    for phase in [strict, naive] {
        let counts = phase.auditor.counts();
        assert_eq!(
            counts.get("reexecuted"),
            None,
            "{}: {counts:?}",
            phase.label
        );
        assert_eq!(phase.side_effects, 0, "{}", phase.label);
    }

    // The retry phase re-issues `append` (not idempotent) after cuts: the counter is the truth.
    let retry = &outcome.phases[2];
    assert_eq!((retry.label, retry.tool), ("retry", "append"));
    let r = &retry.load.counters;
    assert_eq!(r.calls, 8, "{:?}", retry.load.errors);
    assert!(r.reissued > 0, "no append call was cut and re-issued");
    let ran_again = retry.side_effects - r.calls;
    assert_eq!(
        counter.get(),
        retry.side_effects,
        "only the retry phase appends"
    );
    assert!(ran_again > 0, "the side effect never ran twice");
    let counts = retry.auditor.counts();
    assert_eq!(
        counts.get("reexecuted").copied().unwrap_or(0),
        ran_again,
        "reexecuted must match the runs the counter saw beyond one per call: {counts:?}"
    );
    assert_eq!(counts.get("sent-after-cancel"), None, "{counts:?}");
    let story = outcome.report.story.join("\n");
    assert!(story.contains("retry client"), "{story}");
    assert!(story.contains("one finding per extra run"), "{story}");
}

/// Every cut falls before the first byte of the stream's first event: nothing of the first
/// execution reaches the client.
const BEFORE_ANY_BYTE: &str = r#"
description = "cut before any byte of the first event"
[[fault]]
kind = "sse_cut"
at = "any-byte"
range = [0, 0]
events = [0, 0]
action = "reset"
probability = 0.5
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_cut_before_any_byte_and_reissued_is_not_reexecuted_though_the_counter_ran_twice() {
    let mut lab = LabConfig {
        retry: Duration::from_millis(50),
        ..LabConfig::default()
    };
    Scenario::Stateless.apply(&mut lab);
    let cfg = ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(8),
        seed: 11,
        size: 1024,
        lines: 1,
        lab,
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout: Duration::from_secs(20),
        // Only the `retry` phase: append, re-issued whatever the annotations say.
        policies: Vec::new(),
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario: Scenario::Stateless,
        abandon_after: None,
        rst_unread: None,
        http2: false,
    };
    let profile = tearline::profile::parse(BEFORE_ANY_BYTE, "test-profile").expect("parses");
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, BEFORE_ANY_BYTE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes within 60 s")
    .expect("replay runs");
    let retry = &outcome.phases[0];
    assert_eq!(retry.label, "retry");
    let r = &retry.load.counters;
    assert_eq!((r.calls, r.ok), (8, 8), "{:?}", retry.load.errors);
    assert!(r.reissued > 0, "no append call was cut and re-issued");
    // The lab ran the side effect for every attempt (it adds before sending anything)...
    assert_eq!(retry.side_effects, r.calls + r.reissued);
    // ...but no execution was visible on the wire before a cut: nothing to report.
    let counts = retry.auditor.counts();
    assert!(
        counts.get("reissued").copied().unwrap_or(0) > 0,
        "{counts:?}"
    );
    assert_eq!(counts.get("reexecuted"), None, "{counts:?}");
    let story = outcome.report.story.join("\n");
    assert!(story.contains("left no trace on the wire"), "{story}");
}
