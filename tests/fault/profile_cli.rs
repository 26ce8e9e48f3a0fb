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
    assert!(lines[1].ends_with("unknown-kind.toml:4:8: unknown fault kind 'latncy'; known: latency, bandwidth, slicer, slow_close, timeout, reset, limit_data, stall, outage, sse_cut, idle, buffer"), "{}", lines[1]);
}

#[test]
fn list_of_a_missing_directory_is_an_error_naming_it() {
    let err = list(Path::new("/nonexistent-dir"), &mut Vec::new()).expect_err("missing");
    assert!(err.to_string().starts_with("cannot list /nonexistent-dir:"));
}
