//! `tearline replay --http2`: seed 004's story with the load client on h2c through the proxy.
//! The built-in HTTP/2 profile resets one stream (RST_STREAM CANCEL) at a random byte instead of
//! the TCP connection: the connection and its other streams flow on. The naive client resumes
//! with a cursor ahead of what it received and silently takes the lab's fresh stream as the
//! answer, the strict client resumes from its last complete event on a new stream and completes
//! every call; the client's and the audit's counts of the same facts agree. A profile with
//! `scope = "connection"` still resets the whole connection (every stream on it ends).

use std::time::Duration;

use tearline::lab::LabConfig;
use tearline::lab::config::OnEvicted;
use tearline::load::{CallEnd, Policy, Stop};
use tearline::replay::scenario::{http2_connection_profile, http2_profile};
use tearline::replay::tap::Moment;
use tearline::replay::{ReplayConfig, ReplayOutcome};
use tokio_util::sync::CancellationToken;

const SIZE: u64 = 256 * 1024;

async fn replay(sessions: usize, calls: u64, seed: u64, text: &str) -> ReplayOutcome {
    let cfg = ReplayConfig {
        sessions,
        stop: Stop::Calls(calls),
        seed,
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
    let profile = tearline::profile::parse(text, "h2-profile").expect("profile parses");
    tokio::time::timeout(
        Duration::from_secs(60),
        tearline::replay::run(&cfg, &profile, text, &CancellationToken::new()),
    )
    .await
    .expect("replay finishes")
    .expect("replay runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_h2_the_naive_client_is_silently_corrupted_and_the_strict_one_recovers_every_call() {
    let outcome = replay(1, 8, 7, &http2_profile(SIZE)).await;
    assert!(outcome.report.cuts.total > 0, "no cut was made");
    // Every cut is a reset of one stream, named in its record, never of the connection.
    for phase in &outcome.phases {
        for m in phase.tap.moments() {
            if let Moment::Cut { action, point, .. } = m {
                assert_eq!(action.to_string(), "reset", "{}: {point:?}", phase.label);
                assert!(point.h2_stream.is_some(), "{}: {point:?}", phase.label);
            }
        }
    }
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
async fn with_connection_scope_four_sessions_share_a_connection_until_a_cut_ends_it() {
    let outcome = replay(4, 16, 7, &http2_connection_profile(SIZE)).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reset_leaves_the_connection_and_the_other_sessions_streams_flowing() {
    let outcome = replay(4, 16, 7, &http2_profile(SIZE)).await;
    for phase in &outcome.phases {
        let c = &phase.load.counters;
        assert_eq!(c.calls, 16);
        assert!(c.is_balanced());
        let cuts = phase
            .tap
            .moments()
            .iter()
            .filter(|m| matches!(m, Moment::Cut { .. }))
            .count();
        assert!(cuts > 1, "{}: {cuts} cut(s)", phase.label);
        let opened = phase.proxy_stats.connections_total - phase.proxy_stats.connections_refused;
        // The four sessions' streams shared one connection through every reset (a TCP reset
        // would have forced a new connection per cut).
        assert_eq!(
            opened, 1,
            "{}: {opened} connections for {cuts} cuts",
            phase.label
        );
    }
    let strict = &outcome.phases[0].load;
    assert_eq!(strict.counters.silent_loss, 0, "{:?}", strict.counters);
    assert_strict_fails_only_when_every_attempt_was_cut(strict);
}

/// The strict client's only way to fail a call under this profile: half the streams are cut at
/// random, each cut costs two of its eight attempts (the resume, whose cursor the lab evicted,
/// and the re-issue), so a call whose four POSTs were all cut runs out (1 in 16; with four
/// sessions in parallel, which call draws which cut depends on the order streams open). Any
/// other failure (a stream that ended cleanly without the result, a resume that hung) is a bug.
fn assert_strict_fails_only_when_every_attempt_was_cut(load: &tearline::load::LoadOutcome) {
    let kept = &load.calls;
    assert_eq!(
        kept.len() as u64,
        load.counters.calls,
        "every call's facts are kept"
    );
    for call in kept {
        let c = &call.counts;
        match call.end {
            CallEnd::Ok => {}
            CallEnd::Failed => {
                let attempts = 1 + c.resumes + c.reissued;
                assert!(
                    attempts >= 8 && c.torn_cut == 1 + c.reissued,
                    "a strict call failed with attempts left or with an uncut POST: {call:?}"
                );
            }
            CallEnd::SilentlyLost => panic!("the strict client lost a call silently: {call:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_h2_stream_resets_the_client_and_the_audit_count_the_same_torn_cuts_for_every_seed() {
    for seed in [1, 2, 3] {
        let outcome = replay(1, 8, seed, &http2_profile(SIZE)).await;
        let rec = &outcome.report.reconciliation;
        assert_eq!(rec.keys().collect::<Vec<_>>(), ["naive", "strict"]);
        let mut torn = 0;
        for (policy, r) in rec {
            for (fact, n) in &r.facts {
                // The naive client judges no event ids, so it never counts a fresh stream; the
                // report names that reason per call. Every other fact must agree exactly.
                if policy == "naive" && fact == "fresh-stream" {
                    continue;
                }
                assert_eq!(
                    (n.client, n.calls_differ),
                    (n.audit, 0),
                    "seed {seed} {policy} {fact}: {r:#?}"
                );
            }
            torn += r.facts["torn-cut"].client;
        }
        assert!(torn > 0, "seed {seed}: no torn cut to reconcile");
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
        stdout.contains("(RST_STREAM) instead of the TCP connection"),
        "{stdout}"
    );
    // The strict client's chapter: recovered, and none of the naive client's loss in it.
    let strict = stdout
        .split("strict client, request id")
        .nth(1)
        .and_then(|rest| rest.split("naive client, request id").next())
        .expect("a strict chapter");
    assert!(
        strict.contains("Outcome: the call completed with its verified result."),
        "{stdout}"
    );
    assert!(!strict.contains("silent corruption"), "{strict}");
}
