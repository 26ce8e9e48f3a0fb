//! A signal mid-run: `replay` and `load` stop their calls in flight, still print and write what
//! ran, mark it interrupted (which signal, during which phase, which phases never ran), skip
//! `--fail-on`, and exit 128 + the signal's number (130 for SIGINT, 143 for SIGTERM). A run no
//! signal stops is not marked.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// When to send the signal.
enum Ready<'a> {
    /// Once a stderr line contains this.
    Line(&'a str),
    /// Once this holds (checked every 20 ms, for at most 60 s).
    When(&'a dyn Fn() -> bool),
}

/// Starts `tearline ARGS` with stdout and stderr piped; sends `signal` once `ready`; returns
/// (exit code, stdout, stderr). Bounded: the child is killed if it has not ended 60 s after
/// the signal.
fn interrupt_when(args: &[&str], ready: Ready<'_>, signal: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tearline");
    let stdout = child.stdout.take().expect("stdout");
    let out = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap_or_default());
    let mut err = String::new();
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    match ready {
        Ready::Line(ready) => {
            for line in lines.by_ref() {
                let line = line.expect("stderr line");
                err.push_str(&line);
                err.push('\n');
                if line.contains(ready) {
                    break;
                }
            }
            assert!(err.contains(ready), "never ready:\n{err}");
        }
        Ready::When(ready) => {
            let mut polls = 0;
            while !ready() {
                polls += 1;
                assert!(polls < 3000, "never ready");
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    let pid = child.id().to_string();
    let sent = Command::new("kill").args([signal, &pid]).status();
    assert!(sent.is_ok_and(|s| s.success()), "kill {signal} {pid}");
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        for line in lines.map_while(Result::ok) {
            s.push_str(&line);
            s.push('\n');
        }
        s
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("tearline did not end 60 s after {signal}:\n{err}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    err.push_str(&rest.join().unwrap_or_default());
    (
        status.code().unwrap_or(-1),
        out.join().unwrap_or_default(),
        err,
    )
}

#[test]
fn sigint_during_the_first_phase_exits_130_and_the_report_says_what_did_not_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_dir = dir.path().join("report");
    let out_arg = out_dir.to_string_lossy().into_owned();
    let (code, stdout, stderr) = interrupt_when(
        &[
            "replay",
            "--seed",
            "3",
            "--calls",
            "100000",
            "--size",
            "65536",
            "--out",
            &out_arg,
            "--fail-on",
            "naive.silent-loss>0",
        ],
        Ready::Line("tearline replay: strict client"),
        "-INT",
    );
    assert_eq!(code, 130, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("INTERRUPTED by SIGINT") && stdout.contains("phases not run: naive"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "FAIL --fail-on 'naive.silent-loss>0': not evaluated, the run was interrupted"
        ),
        "{stdout}"
    );
    assert!(stderr.contains("SIGINT received"), "{stderr}");
    let json = std::fs::read_to_string(out_dir.join("report.json")).expect("report.json");
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    let i = &report["facts"]["interrupted"];
    assert_eq!(i["signal"], "SIGINT", "{i}");
    assert_eq!(i["during"], "strict", "{i}");
    assert_eq!(i["not_run"], serde_json::json!(["naive"]), "{i}");
    assert!(
        report["policies"].get("naive").is_none(),
        "a phase that never ran has no outcome"
    );
    let html = std::fs::read_to_string(out_dir.join("report.html")).expect("report.html");
    assert!(html.contains("INTERRUPTED by SIGINT"));
}

#[test]
fn sigterm_during_load_exits_143_and_a_finished_load_is_not_marked() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = tokio_util::sync::CancellationToken::new();
    let lab = tearline::lab::LabConfig::default();
    let runs = lab.side_effects.clone();
    rt.spawn(tearline::lab::serve(listener, lab, stop.clone()));
    let target = format!("http://{addr}/mcp");
    let dir = tempfile::tempdir().expect("tempdir");
    let report_dir = dir.path().join("agent");
    let report_arg = report_dir.to_string_lossy().into_owned();
    // `append` counts its runs on the server: the first one says the load is under way.
    let under_way = move || runs.get() > 0;
    let (code, stdout, stderr) = interrupt_when(
        &[
            "load",
            "--target",
            &target,
            "--duration",
            "60s",
            "--tool",
            "append",
            "--args",
            r#"{"amount":1}"#,
            "--report-dir",
            &report_arg,
            "--policy",
            "both",
            "--fail-on",
            "calls>0",
        ],
        Ready::When(&under_way),
        "-TERM",
    );
    assert_eq!(code, 143, "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("FAIL --fail-on 'calls>0': not evaluated, the run was interrupted"),
        "{stdout}"
    );
    assert!(
        stdout.contains("INTERRUPTED by SIGTERM") && stdout.contains("phases not run: naive"),
        "{stdout}"
    );
    let json = std::fs::read_to_string(report_dir.join("report.json")).expect("report.json");
    let report: serde_json::Value = serde_json::from_str(&json).expect("json");
    assert_eq!(report["facts"]["interrupted"]["signal"], "SIGTERM");

    // The same load, finished: exit 0, nothing marked.
    let done = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args([
            "load", "--target", &target, "--calls", "3", "--tool", "blob",
        ])
        .args(["--args", r#"{"size":1024}"#, "--json"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run load");
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert_eq!(done.status.code(), Some(0), "{stdout}");
    assert!(!stdout.contains("interrupted"), "{stdout}");
    stop.cancel();
}

/// A wrong `--upstream` is named as the user wrote it, before any phase: not tearline's own
/// proxy port and a "Broken pipe" later.
#[test]
fn an_unreachable_upstream_is_named_before_the_run() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port");
    let upstream = closed.to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(["replay", "--upstream", &upstream, "--calls", "2", "--out"])
        .arg(dir.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run replay");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot reach --upstream {upstream}")) && err.contains("refused"),
        "{err}"
    );
    assert!(
        !err.contains("Broken pipe") && !err.contains("phase"),
        "{err}"
    );
}
