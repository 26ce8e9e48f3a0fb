//! `tearline replay --scenario llm-truncation`: the naive client takes truncated answers as
//! complete and each has its loss-class finding (`llm-truncated`); the strict client re-sends
//! every truncated answer and the audit reports each re-send (`llm-retried`) and no loss; the
//! story tells one of each; the whole run stays under 30 s.

use std::time::{Duration, Instant};

use tearline::lab::LabConfig;
use tearline::load::{Policy, Stop};
use tearline::replay::ReplayConfig;
use tearline::replay::scenario::{LLM_PROFILE, Scenario};
use tokio_util::sync::CancellationToken;

fn count(c: &std::collections::BTreeMap<String, u64>, k: &str) -> u64 {
    c.get(k).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_truncations_are_losses_strict_re_sends_are_not_and_the_story_tells_both() {
    let mut lab = LabConfig::default();
    Scenario::LlmTruncation.apply(&mut lab);
    let cfg = ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(24),
        seed: 7,
        size: 0,
        lines: 1,
        lab,
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout: Duration::from_secs(10),
        policies: vec![Policy::Strict, Policy::Naive],
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario: Scenario::LlmTruncation,
        abandon_after: None,
        rst_unread: None,
        http2: false,
    };
    let profile = tearline::profile::parse(LLM_PROFILE, "llm-truncation").expect("profile");
    let t0 = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, LLM_PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let (strict, naive) = (&outcome.phases[0], &outcome.phases[1]);
    assert_eq!(
        (strict.policy, naive.policy),
        (Policy::Strict, Policy::Naive)
    );

    let s = &strict.load.counters;
    assert_eq!(
        (s.calls, s.ok, s.silent_loss, s.failed),
        (24, 24, 0, 0),
        "{:?}",
        strict.load.errors
    );
    assert!(s.reissued > 0, "no strict answer was cut");
    let sc = strict.auditor.counts();
    assert_eq!(count(&sc, "llm-truncated"), 0, "{sc:?}");
    assert_eq!(count(&sc, "llm-retried"), s.reissued, "{sc:?}");
    assert_eq!(strict.auditor.loss_affected(), 0);

    let n = &naive.load.counters;
    assert!(n.silent_loss > 0, "no naive answer was truncated");
    assert_eq!(n.calls, n.ok + n.silent_loss + n.failed);
    let nc = naive.auditor.counts();
    // Every truncated answer the naive client took has its loss finding, and nothing else does.
    assert_eq!(
        count(&nc, "llm-truncated"),
        n.silent_loss + n.failed,
        "{nc:?}"
    );
    assert_eq!(count(&nc, "llm-retried"), 0, "{nc:?}");
    let records = &naive.llm.as_ref().expect("llm extras").records;
    let lost: Vec<&str> = records
        .iter()
        .filter(|r| r.outcome == tearline::load::llm_call::Outcome::AcceptedPartial)
        .map(|r| r.key.as_str())
        .collect();
    let judged: Vec<String> = naive
        .auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind.as_str() == "llm-truncated")
        .filter_map(|f| f.ids.first().cloned())
        .collect();
    for k in &lost {
        assert!(
            judged.iter().any(|j| j == k),
            "{k} has no llm-truncated finding"
        );
    }

    // The report's client-and-audit table agrees: the strict client's re-sends are the audit's
    // `llm-retried` (the client keeps no per-call facts here: one note says so).
    let rec = &outcome.report.reconciliation["strict"];
    assert_eq!(
        (rec.facts["reissued"].client, rec.facts["reissued"].audit),
        (s.reissued, s.reissued),
        "{rec:?}"
    );
    assert_eq!(rec.notes.len(), 1, "{:?}", rec.notes);

    // The report files the cuts under their LLM positions, never as SSE classes.
    let by_class = &outcome.report.cuts.by_class;
    assert!(by_class.contains_key("mid-delta"), "{by_class:?}");
    assert!(
        by_class
            .keys()
            .all(|k| k == "mid-delta" || k == "before-completion"),
        "{by_class:?}"
    );

    let story = outcome.report.story.join("\n");
    assert!(story.contains("naive client, request"), "{story}");
    assert!(story.contains("as the complete answer"), "{story}");
    assert!(story.contains("llm-truncated (loss)"), "{story}");
    assert!(story.contains("strict client, request"), "{story}");
    assert!(story.contains("same Idempotency-Key"), "{story}");
    assert!(story.contains("llm-retried (info)"), "{story}");
    // The report carries the LLM latencies under their usual names.
    let strict_report = &outcome.report.policies["strict"];
    for name in tearline::report::names::LLM_NAMES {
        assert!(
            strict_report
                .histograms
                .get(name)
                .is_some_and(|h| !h.histogram.is_empty()),
            "{name} missing from the report"
        );
    }
}
