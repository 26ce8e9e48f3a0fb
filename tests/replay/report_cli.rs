//! `tearline report show|merge` through the real binary: exit codes 0 / 99 / 2, printed
//! summary and verdicts, merged interval logs.

use crate::common;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use tearline::report::{hlog, write_all};

/// Runs the binary with `args`, killing it if it has not finished within 30 s.
fn tearline(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tearline {args:?} did not finish in 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn saved_report(dir: &Path, seed: u64) -> String {
    let written = write_all(&common::report::report(seed), dir).expect("write_all");
    written.json.to_str().expect("utf-8 path").to_owned()
}

#[test]
fn show_with_a_failing_threshold_exits_99_and_names_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = saved_report(dir.path(), 1);
    let out = tearline(&[
        "report",
        "show",
        &json,
        "--fail-on",
        "strict.silent-loss>0",
        "--fail-on",
        "naive.silent-loss>0",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(99), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("Client outcomes per policy"),
        "summary printed"
    );
    assert!(
        stdout.contains("FAILED naive.silent-loss>0  (actual 12)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ok     strict.silent-loss>0  (actual 0)"),
        "{stdout}"
    );
}

#[test]
fn show_with_holding_thresholds_exits_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = saved_report(dir.path(), 1);
    let out = tearline(&[
        "report",
        "show",
        &json,
        "--fail-on",
        "strict.silent-loss>0",
        "--fail-on",
        "p50(call)>2s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let dir_arg = dir.path().to_str().expect("utf-8");
    let out = tearline(&["report", "show", dir_arg, "--fail-on", "cuts<1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a report directory reads its report.json"
    );
}

#[test]
fn malformed_threshold_exits_2_with_the_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = saved_report(dir.path(), 1);
    let out = tearline(&["report", "show", &json, "--fail-on", "p99(call)>2"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("column 12: expected a time unit after the number: us, ms or s"),
        "{stderr}"
    );
}

#[test]
fn unknown_policy_or_missing_file_exits_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = saved_report(dir.path(), 1);
    let out = tearline(&["report", "show", &json, "--fail-on", "lazy.calls>0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("no policy `lazy`"));

    let missing = dir.path().join("missing.json");
    let out = tearline(&["report", "show", missing.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.json"));
}

#[test]
fn merge_writes_one_log_holding_every_interval_of_its_inputs() {
    let (a, b) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    saved_report(a.path(), 1);
    saved_report(b.path(), 500);
    let out_path = a.path().join("all.hlog");
    let (ia, ib) = (a.path().join("report.hlog"), b.path().join("report.hlog"));
    let out = tearline(&[
        "report",
        "merge",
        ia.to_str().expect("utf-8"),
        ib.to_str().expect("utf-8"),
        "-o",
        out_path.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("strict.call"));
    let merged = hlog::load(&out_path).expect("merged log parses");
    let inputs = [hlog::load(&ia).expect("a"), hlog::load(&ib).expect("b")];
    assert_eq!(
        merged.intervals.len(),
        inputs[0].intervals.len() + inputs[1].intervals.len()
    );
    let totals = merged.totals().expect("adds");
    let call = &totals["strict.call"];
    assert_eq!(call.len(), 4_000, "2,000 values from each input");
}

#[test]
fn show_lists_the_reports_metric_names_and_takes_per_phase_proxy_histograms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut report = common::report::report(1);
    // What replay records: the audit's histograms per phase.
    let h = report.proxy_histograms["client-reconnect"]
        .histogram
        .clone();
    report.add_proxy_histogram("naive.client-reconnect", h);
    let json = write_all(&report, dir.path()).expect("write_all").json;
    let json = json.to_str().expect("utf-8 path");

    let out = tearline(&[
        "report",
        "show",
        json,
        "--fail-on",
        "max(proxy.naive.client-reconnect)>3600s",
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let names = stdout
        .split("Metric names for --fail-on")
        .nth(1)
        .unwrap_or_default();
    for name in [
        "proxy.naive.client-reconnect",
        "proxy.client-reconnect",
        "strict.call",
        "naive.COUNTER",
        "finding.llm-truncated",
        "cut.mid-delta",
    ] {
        assert!(names.contains(name), "{name} not listed:\n{stdout}");
    }
    assert!(
        !names.contains("retry."),
        "a policy the report lacks:\n{names}"
    );

    let out = tearline(&[
        "report",
        "show",
        json,
        "--fail-on",
        "max(proxy.strict.client-reconnect)>1s",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("proxy.naive.client-reconnect"), "{stderr}");
}
