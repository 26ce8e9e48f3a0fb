//! `tearline profiles list|validate`: output lines and the all-valid verdict that sets the exit
//! status.

use std::path::{Path, PathBuf};

use tearline::cmd::profiles::{list, validate};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn list_shows_each_shipped_profile_with_its_description() {
    let mut out = Vec::new();
    let ok = list(&root().join("profiles"), &mut out).expect("lists");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(ok, "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("reset-250ms "))
        .expect("reset-250ms is listed");
    assert!(line.contains("250 ms outage"), "{line}");
    assert!(text.lines().any(|l| l.starts_with("flaky-mobile ")));
    assert!(text.lines().any(|l| l.starts_with("latency-jitter ")));
}

#[test]
fn list_flags_an_invalid_profile_and_reports_not_all_valid() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("good.toml"),
        "description = \"fine\"\n[[fault]]\nkind = \"latency\"\nlatency_ms = 1\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("bad.toml"), "[[fault]]\nkind = \"nope\"\n").expect("write");
    std::fs::write(dir.path().join("notes.txt"), "not a profile").expect("write");
    let mut out = Vec::new();
    let ok = list(dir.path(), &mut out).expect("lists");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!ok);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("bad   INVALID: ")
            && lines[0].contains(":2:8: unknown fault kind 'nope'")
    );
    assert_eq!(lines[1], "good  fine");
}

#[test]
fn validate_prints_ok_or_the_located_error_per_file() {
    let files: Vec<PathBuf> = vec![
        root().join("profiles/reset-250ms.toml"),
        root().join("tests/profiles_broken/unknown-kind.toml"),
    ];
    let mut out = Vec::new();
    let ok = validate(&files, &mut out).expect("validates");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!ok);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with("reset-250ms.toml: ok (0 proxies, 1 faults)"),
        "{}",
        lines[0]
    );
    assert!(lines[1].ends_with("unknown-kind.toml:4:8: unknown fault kind 'latncy'; known: latency, bandwidth, slicer, slow_close, timeout, reset, limit_data, stall, outage, sse_cut, idle, buffer, goaway, hold_headers, flow_stall, refuse_streams"), "{}", lines[1]);
}

#[test]
fn list_of_a_missing_directory_is_an_error_naming_it() {
    let err = list(Path::new("/nonexistent-dir"), &mut Vec::new()).expect_err("missing");
    // The OS error is the source, said once (not also in the message).
    assert_eq!(err.to_string(), "cannot list /nonexistent-dir");
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert!(source.is_some_and(|s| s.contains("No such file")));
}

/// Runs the binary in `dir` (not the checkout) with stdout going to `stdout`.
fn tearline_in(dir: &Path, args: &[&str], stdout: std::process::Stdio) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(stdout)
        .output()
        .expect("run tearline")
}

#[test]
fn the_shipped_profiles_are_listed_and_shown_from_any_directory() {
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let piped = std::process::Stdio::piped;
    let out = tearline_in(elsewhere.path(), &["profiles", "list"], piped());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(
        text.lines().count(),
        tearline::profile::shipped::SHIPPED.len()
    );
    assert!(text.lines().any(|l| l.starts_with("gateway-idle-kill ")));
    let out = tearline_in(
        elsewhere.path(),
        &["profiles", "show", "reset-250ms"],
        piped(),
    );
    let shipped = std::fs::read_to_string(root().join("profiles/reset-250ms.toml")).expect("read");
    assert_eq!(String::from_utf8_lossy(&out.stdout), shipped);
    let out = tearline_in(elsewhere.path(), &["profiles", "show", "nope"], piped());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("no shipped profile is named 'nope'") && err.contains("reset-250ms"));
}

#[test]
fn an_invalid_profile_exits_2_and_a_valid_one_0() {
    let broken = root().join("tests/profiles_broken/unknown-kind.toml");
    let good = root().join("profiles/reset-250ms.toml");
    let piped = std::process::Stdio::piped;
    let run = |f: &Path| {
        let path = f.to_string_lossy().into_owned();
        tearline_in(root(), &["profiles", "validate", &path], piped())
    };
    assert_eq!(run(&broken).status.code(), Some(2));
    assert_eq!(run(&good).status.code(), Some(0));
}

#[test]
fn output_into_a_closed_pipe_ends_quietly_with_0() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = tearline_in(root(), &["profiles", "list"], writer.into());
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        (Some(0), "")
    );
    // The same with a large output printed by `println!` (report show, replay): no panic text.
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = tearline_in(root(), &["proxy", "--help"], writer.into());
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).as_ref()
        ),
        (Some(0), "")
    );
}
