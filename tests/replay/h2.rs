//! `tearline replay --http2`: seed 004's story with the load client on h2c through the proxy.
//! The built-in HTTP/2 profile resets the whole connection at a random byte (every stream on it
//! ends); the naive client resumes with a cursor ahead of what it received and silently takes
//! the lab's fresh stream as the answer, the strict client resumes from its last complete event
//! on a new stream and completes every call; several sessions share one connection.

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::lab::config::OnEvicted;
use tearline::load::{Policy, Stop};
use tearline::replay::scenario::http2_profile;
use tearline::replay::tap::Moment;
use tearline::replay::{ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

const SIZE: u64 = 256 * 1024;

async fn replay(sessions: usize, calls: u64) -> ReplayOutcome {
    let cfg = ReplayConfig {
        sessions,
        stop: Stop::Calls(calls),
        seed: 7,
        size: SIZE,
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
        http2: true,
    };
    let text = http2_profile(SIZE);
    let profile = tearline::profile::parse(&text, "h2-profile").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, &text, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_h2_the_naive_client_is_silently_corrupted_and_the_strict_one_recovers_every_call() {
    let outcome = replay(1, 8).await;
    assert!(outcome.report.cuts.total > 0, "no cut was made");
    let [strict, naive] = &outcome.phases[..] else {
        panic!("two phases, strict then naive");
    };
    let (s, n) = (&strict.load.counters, &naive.load.counters);
    for c in [s, n] {
        assert_eq!(c.calls, 8);
        assert!(c.is_balanced());
    }
    assert!(s.resumes > 0, "the strict client resumed after cuts: {s:?}");
    assert_eq!((s.ok, s.silent_loss), (8, 0), "{s:?}");
    assert!(
        n.silent_loss > 0,
        "the naive client lost calls silently: {n:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_h2_four_sessions_share_a_connection_until_a_cut_ends_it() {
    let outcome = replay(4, 16).await;
    for phase in &outcome.phases {
        let c = &phase.load.counters;
        assert_eq!(c.calls, 16);
        assert!(c.is_balanced());
        let cuts = phase
            .tap
            .moments()
            .iter()
            .filter(|m| matches!(m, Moment::Cut { .. }))
            .count() as u64;
        let opened = phase.proxy_stats.connections_total - phase.proxy_stats.connections_refused;
        // One connection at a time: the first, then one after each connection-wide cut (over
        // HTTP/1.1 the four sessions would hold four at once before any cut).
        assert!(
            opened <= cuts + 1,
            "{}: {opened} connections for {cuts} cuts",
            phase.label
        );
    }
}

#[test]
fn the_replay_command_with_http2_prints_its_story_within_30_seconds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let started = std::time::Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
        .arg("replay")
        .args(["--http2", "--seed", "7", "--calls", "8", "--size", "262144"])
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
    assert!(stdout.contains("over HTTP/2 (h2c)"), "{stdout}");
    assert!(
        stdout.contains("reset-250ms over HTTP/2 (built in)"),
        "{stdout}"
    );
    assert!(stdout.contains("silent corruption"), "{stdout}");
    assert!(
        stdout.contains("Outcome: the call completed with its verified result."),
        "{stdout}"
    );
}
