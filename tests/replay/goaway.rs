//! `tearline replay --scenario goaway`: an HTTP/2 gateway ends every connection gracefully,
//! `GOAWAY(NO_ERROR)` then the close after a drain, while calls stream slow progress. The close
//! cuts the streams in flight; the strict client resumes them on a new connection and completes
//! every call, the naive one takes the graceful GOAWAY as a normal end and loses them silently.
//! The story says which client did what, and never claims a loss for the strict one.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::load::{Policy, Stop};
use tearline::replay::scenario::{GOAWAY_PROFILE, Scenario};
use tearline::replay::tap::Moment;
use tearline::replay::{ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

async fn replay(calls: u64) -> ReplayOutcome {
    let mut lab = LabConfig {
        retry: Duration::from_millis(50),
        ..LabConfig::default()
    };
    Scenario::Goaway.apply(&mut lab);
    let cfg = ReplayConfig {
        sessions: 1,
        stop: Stop::Calls(calls),
        seed: 3,
        size: 1024,
        lines: 1,
        lab,
        upstream: None,
        target_path: "/mcp".to_owned(),
        call_timeout: Duration::from_secs(10),
        policies: vec![Policy::Strict, Policy::Naive],
        progress: false,
        findings_dir: None,
        tls_ca_dir: None,
        scenario: Scenario::Goaway,
        abandon_after: None,
        rst_unread: None,
        http2: true,
    };
    let profile = tearline::profile::parse(GOAWAY_PROFILE, "goaway").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, GOAWAY_PROFILE, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_graceful_goaway_the_strict_client_resumes_and_the_naive_one_loses_the_call() {
    let outcome = replay(6).await;
    let [strict, naive] = &outcome.phases[..] else {
        panic!("two phases, strict then naive");
    };
    for phase in [strict, naive] {
        let c = &phase.load.counters;
        assert_eq!(c.calls, 6);
        assert!(c.is_balanced(), "{c:?}");
        let closes = phase
            .tap
            .moments()
            .iter()
            .filter(|m| matches!(m, Moment::Cut { point, .. } if point.by == Some("goaway")))
            .count();
        assert!(
            closes > 0,
            "{}: the gateway closed no connection",
            phase.label
        );
    }
    let (s, n) = (&strict.load.counters, &naive.load.counters);
    assert!(
        s.resumes > 0,
        "the strict client resumed cut streams: {s:?}"
    );
    assert_eq!((s.ok, s.silent_loss), (6, 0), "{s:?}");
    assert_eq!(n.resumes, 0, "the naive client resumed nothing: {n:?}");
    assert!(
        n.silent_loss > 0,
        "the naive client lost calls silently: {n:?}"
    );
    assert_eq!(n.ok + n.silent_loss + n.failed, 6, "{n:?}");
    // The wire says the same: the strict client's resumes were replayed exactly, the
    // naive client went on without a cursor after its cut streams.
    let count = |p: &tearline::replay::PhaseOutcome, kind: &str| {
        p.auditor.counts().get(kind).copied().unwrap_or(0)
    };
    assert!(
        count(strict, "replay-exact") > 0,
        "{:#?}",
        strict.auditor.findings()
    );
    assert!(
        count(naive, "cursor-missing") > 0,
        "{:#?}",
        naive.auditor.findings()
    );
    assert_eq!(
        count(naive, "replay-exact"),
        0,
        "{:#?}",
        naive.auditor.findings()
    );
}

#[test]
fn the_goaway_scenario_tells_its_story_within_30_seconds_with_no_loss_claimed_for_strict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
        .arg("replay")
        .args(["--scenario", "goaway", "--seed", "1", "--calls", "8"])
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
    assert!(stdout.contains("scenario goaway (HTTP/2)"), "{stdout}");
    assert!(stdout.contains("goaway (built in)"), "{stdout}");
    let (strict, naive) = stdout
        .split_once("strict client, tool `progress`")
        .and_then(|(_, rest)| rest.split_once("naive client, tool `progress`"))
        .expect("a strict chapter, then a naive one");
    assert!(
        strict.contains("Outcome: the call completed with its verified result."),
        "{stdout}"
    );
    assert!(!strict.contains("silent corruption"), "{strict}");
    assert!(!strict.contains("normal end (`clean-end`)"), "{strict}");
    assert!(
        naive.contains("it took the graceful GOAWAY as the server's normal end"),
        "{stdout}"
    );
    assert!(naive.contains("silent corruption"), "{stdout}");
}
