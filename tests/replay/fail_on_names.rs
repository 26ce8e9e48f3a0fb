//! `replay --fail-on` names are checked before the run: an unknown histogram or policy exits 2
//! at once with the valid names, and the names checked are exactly those a finished run's
//! report has (asserted on the real reports of `e2e` and `stateless`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tearline::load::Policy;
use tearline::replay::scenario::Scenario;
use tearline::report::Report;
use tearline::report::thresholds_names::Vocabulary;

/// The pre-run vocabulary of a replay of `policies` in `scenario` equals the names of its
/// finished `report` (histograms and policies; order aside).
pub fn assert_names_known_before_the_run(
    report: &Report,
    scenario: Scenario,
    policies: &[Policy],
    size: u64,
) {
    let before = tearline::cmd::replay::vocabulary(scenario, policies, size);
    let after = Vocabulary::of_report(report);
    let sorted = |v: &[String]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    assert_eq!(sorted(&before.policies), sorted(&after.policies));
    assert_eq!(sorted(&before.histograms), sorted(&after.histograms));
}

/// Runs the binary; returns exit code, stderr and how long it took (killed after 60 s).
fn replay(args: &[&str]) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .arg("replay")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn an_unknown_histogram_exits_2_before_the_run_with_the_valid_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("never-written");
    let out_s = out.to_str().expect("utf-8 path");
    let (code, stderr, took) = replay(&[
        "--out",
        out_s,
        "--fail-on",
        "max(proxy.client-reconnect)>1s",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("proxy.naive.client-reconnect"), "{stderr}");
    assert!(!out.exists(), "the run started: {stderr}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_policy_the_run_does_not_have_exits_2_before_the_run_naming_the_policies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("never-written");
    let out_s = out.to_str().expect("utf-8 path");
    let (code, stderr, _) = replay(&[
        "--policy",
        "strict",
        "--out",
        out_s,
        "--fail-on",
        "naive.silent-loss>0",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("policies: strict"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn names_of_every_scenario_and_policy_list_pass_the_pre_run_check() {
    let ok = [
        "max(proxy.naive.client-reconnect)>1s",
        "p99(strict.call)>5s",
        "naive.silent-loss>0",
        "finding.llm-truncated>0",
        "cut.mid-delta>0",
    ];
    let v = tearline::cmd::replay::vocabulary(
        Scenario::Reset250ms,
        &[Policy::Strict, Policy::Naive],
        1,
    );
    for t in ok {
        let t: tearline::report::Threshold = t.parse().expect("parses");
        assert!(v.check(&t).is_ok(), "{t}");
    }
    let stateless = tearline::cmd::replay::vocabulary(Scenario::Stateless, &[Policy::Strict], 1);
    let retry: tearline::report::Threshold = "p99(retry.call)>1s".parse().expect("parses");
    assert!(
        stateless.check(&retry).is_ok(),
        "stateless adds a retry phase"
    );
    assert!(v.check(&retry).is_err(), "reset-250ms has no retry phase");
    let llm = tearline::cmd::replay::vocabulary(Scenario::LlmTruncation, &[Policy::Strict], 1);
    let ttft: tearline::report::Threshold = "p99(strict.time-to-first-token)>1s"
        .parse()
        .expect("parses");
    assert!(llm.check(&ttft).is_ok());
    assert!(v.check(&ttft).is_err());
}
