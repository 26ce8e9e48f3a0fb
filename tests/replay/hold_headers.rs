//! `tearline replay --scenario hold-headers`: a buffering HTTP/2 hop holds an SSE response's
//! HEADERS until its first DATA, in front of a 2025-06-18 lab whose tool sends its first event
//! 400 ms after the call. The naive client waits for the head blind (and loses the call at its
//! timeout when the first event comes later); the strict one gives up on the head, re-sends
//! under the same Idempotency-Key and reports `head-timeout`; the proxy's `response-head`
//! histogram shows the held time. Against a 2025-11-25 lab the priming event releases every
//! head at once: no hold is told and nothing is lost.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::load::{Policy, Stop};
use tearline::replay::scenario::{HOLD_FIRST_EVENT_MS, HOLD_PROFILE, Scenario};
use tearline::replay::{PhaseOutcome, ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

async fn replay(
    lab: LabConfig,
    calls: u64,
    policies: Vec<Policy>,
    call_timeout: Duration,
) -> ReplayOutcome {
    let cfg = ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(calls),
        seed: 5,
        size: 1024,
        lines: 1,
        lab,
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout,
        policies,
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario: Scenario::HoldHeaders,
        abandon_after: None,
        rst_unread: None,
        http2: true,
    };
    let profile = tearline::profile::parse(HOLD_PROFILE, "hold-headers").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, HOLD_PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs")
}

fn held_lab() -> LabConfig {
    let mut lab = LabConfig::default();
    Scenario::HoldHeaders.apply(&mut lab);
    lab
}

/// The largest request → response head time the proxy delivered in `phase`, if any.
fn slowest_head(phase: &PhaseOutcome) -> Option<Duration> {
    let h = phase.auditor.histograms();
    let h = h.get("response-head").filter(|h| !h.is_empty())?;
    Some(Duration::from_micros(h.max()))
}

fn errors(phase: &PhaseOutcome, kind: &str) -> u64 {
    phase.load.errors.get(kind).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_head_makes_the_naive_client_wait_for_the_first_event_and_the_strict_one_give_up() {
    let outcome = replay(
        held_lab(),
        3,
        vec![Policy::Strict, Policy::Naive],
        Duration::from_secs(10),
    )
    .await;
    let [strict, naive] = &outcome.phases[..] else {
        panic!("two phases, strict then naive");
    };
    let (s, n) = (&strict.load.counters, &naive.load.counters);
    // The naive client saw each head only with the tool's first event, and then completed.
    assert_eq!((n.calls, n.ok, n.silent_loss), (3, 3, 0), "{n:?}");
    let held = slowest_head(naive).expect("the naive client's heads were delivered");
    assert!(
        held >= Duration::from_millis(HOLD_FIRST_EVENT_MS * 9 / 10),
        "the head left with the first event: {held:?}"
    );
    assert_eq!(errors(naive, "head-timeout"), 0, "{:?}", naive.load.errors);
    // The strict client gave up on every head, re-sent once under its key, and failed visibly.
    assert_eq!((s.calls, s.failed, s.silent_loss), (3, 3, 0), "{s:?}");
    assert_eq!(
        errors(strict, "head-timeout"),
        6,
        "{:?}",
        strict.load.errors
    );
    assert_eq!(s.reissued, 3, "{s:?}");
    let audited = strict
        .auditor
        .counts()
        .get("reissued")
        .copied()
        .unwrap_or(0);
    assert_eq!(audited, 3, "{:#?}", strict.auditor.findings());
    let story = outcome.report.story.join("\n");
    assert!(story.contains("the held time"), "{story}");
    assert!(story.contains("gave up on a head 6 time(s)"), "{story}");
    assert!(story.contains("awaiting headers"), "{story}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_naive_client_whose_timeout_comes_before_the_first_event_loses_the_call_without_a_response()
 {
    let outcome = replay(
        held_lab(),
        2,
        vec![Policy::Naive],
        Duration::from_millis(HOLD_FIRST_EVENT_MS / 2),
    )
    .await;
    let [naive] = &outcome.phases[..] else {
        panic!("one naive phase");
    };
    let n = &naive.load.counters;
    assert_eq!((n.calls, n.ok, n.failed), (2, 0, 2), "{n:?}");
    assert!(errors(naive, "timeout") >= 2, "{:?}", naive.load.errors);
    // The session's own heads came through; no call's head ever did.
    let h = naive.auditor.histograms();
    let heads = h.get("response-head").map_or(0, |h| h.len());
    assert!(
        heads <= 2,
        "only initialize's heads were delivered: {heads}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_the_same_hop_a_priming_event_releases_every_head_and_no_hold_is_told() {
    // 2025-11-25: every SSE stream starts with a priming event, its first DATA.
    let outcome = replay(
        LabConfig::default(),
        3,
        vec![Policy::Strict, Policy::Naive],
        Duration::from_secs(10),
    )
    .await;
    for phase in &outcome.phases {
        let c = &phase.load.counters;
        assert_eq!(
            (c.calls, c.ok, c.failed, c.silent_loss),
            (3, 3, 0, 0),
            "{c:?}"
        );
        assert_eq!(errors(phase, "head-timeout"), 0, "{:?}", phase.load.errors);
        let slowest = slowest_head(phase).expect("heads were delivered");
        assert!(
            slowest < Duration::from_millis(HOLD_FIRST_EVENT_MS / 2),
            "{}: a head waited {slowest:?}",
            phase.label
        );
    }
    let story = outcome.report.story.join("\n");
    assert!(story.contains("No response head was held"), "{story}");
    assert!(!story.contains("the held time"), "{story}");
    assert!(!story.contains("gave up on a head"), "{story}");
}

#[test]
fn the_hold_headers_scenario_tells_its_story_within_30_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
        .arg("replay")
        .args(["--scenario", "hold-headers", "--seed", "1", "--calls", "6"])
        .arg("--out")
        .arg(dir.path().join("report"))
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run tearline replay");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        stdout.contains("scenario hold-headers (HTTP/2)"),
        "{stdout}"
    );
    assert!(stdout.contains("hold-headers (built in)"), "{stdout}");
    let (strict, naive) = stdout
        .split_once("strict client, tool `progress`")
        .and_then(|(_, rest)| rest.split_once("naive client, tool `progress`"))
        .expect("a strict chapter, then a naive one");
    assert!(strict.contains("`head-timeout`"), "{stdout}");
    assert!(strict.contains("0 silently lost"), "{strict}");
    assert!(naive.contains("the held time"), "{stdout}");
    assert!(naive.contains("6 of 6 calls completed"), "{stdout}");
}
