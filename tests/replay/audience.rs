//! `tearline replay --scenario audience-narrowing` (seed 000): a `fetch` call read under a token
//! with per-tool audiences is cut between two events; the client resumes under a refreshed token
//! narrowed to `search`, and the lab ends the stream cleanly at the first `fetch` event. The
//! strict client detects the clean end with its call pending, re-authorizes and completes every
//! call; the naive one takes the clean end as completion and loses calls silently — and the
//! proxy's audit reports those losses as `pending-call`.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::load::{Policy, Stop};
use tearline::replay::ReplayConfig;
use tearline::replay::scenario::Scenario;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audience_narrowing_strict_reauthorizes_and_loses_nothing_naive_loses_silently() {
    let scenario = Scenario::AudienceNarrowing;
    let mut lab = LabConfig {
        retry: Duration::from_millis(50),
        ..LabConfig::default()
    };
    scenario.apply(&mut lab);
    let cfg = ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(8),
        seed: 7,
        size: 0,
        lines: 3,
        lab,
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout: Duration::from_secs(20),
        policies: vec![Policy::Strict, Policy::Naive],
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario,
        abandon_after: None,
        rst_unread: None,
        http2: false,
    };
    let text = scenario.default_profile().expect("a built-in profile");
    let profile = tearline::profile::parse(text, "audience-narrowing").expect("profile parses");
    let started = std::time::Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, text, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes within 60 s")
    .expect("replay runs");
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(outcome.report.cuts.total > 0, "no cut was made");
    let (strict, naive) = (&outcome.phases[0], &outcome.phases[1]);
    assert_eq!(
        (strict.policy, naive.policy),
        (Policy::Strict, Policy::Naive)
    );

    let s = &strict.load.counters;
    assert_eq!(
        (s.calls, s.ok, s.silent_loss),
        (8, 8, 0),
        "{:?}",
        strict.load.errors
    );
    assert!(s.resumes > 0, "no strict call was resumed");
    assert!(
        strict
            .load
            .errors
            .get("clean-end-call-pending")
            .copied()
            .unwrap_or(0)
            > 0,
        "strict never met the clean end under the narrowed token: {:?}",
        strict.load.errors
    );
    assert_eq!(
        strict.auditor.loss_affected(),
        0,
        "{}",
        strict.auditor.summary()
    );
    assert_eq!(strict.auditor.counts().get("pending-call"), None);

    let n = &naive.load.counters;
    assert!(
        n.silent_loss > 0,
        "the naive client's silent loss did not show"
    );
    assert_eq!(n.calls, n.ok + n.failed + n.silent_loss);
    let pending = naive
        .auditor
        .counts()
        .get("pending-call")
        .copied()
        .unwrap_or(0);
    assert!(pending > 0, "{}", naive.auditor.summary());
    assert!(naive.auditor.loss_affected() > 0);

    // The narrowed resumes are cut too: each resume leg's cut is filed under the call whose
    // stream it resumed and coloured by that call's outcome, as first-leg cuts are.
    let cuts: Vec<&str> = outcome
        .report
        .timeline
        .iter()
        .filter(|e| e.kind == tearline::report::TimelineKind::Cut)
        .map(|e| e.detail.as_str())
        .collect();
    assert!(
        cuts.iter().any(|c| c.contains("(resume leg) -> call ")),
        "no resume-leg cut is coloured: {cuts:#?}"
    );
    assert!(cuts.iter().all(|c| c.contains(" -> call ")), "{cuts:#?}");

    let story = outcome.report.story.join("\n");
    assert!(story.contains("minted for `search` only"), "{story}");
    assert!(story.contains("re-authorized"), "{story}");
    assert!(story.contains("silently lost"), "{story}");
}
