//! `tearline proxy` with bad input exits non-zero with one line naming the problem.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn error_line(stderr: &str) -> &str {
    stderr
        .lines()
        .find(|l| l.starts_with("error:") || l.starts_with("tearline:"))
        .unwrap_or("")
}

#[test]
fn unparseable_listen_address_is_named() {
    let (code, err) = run(&[
        "proxy",
        "--listen",
        "127.0.0.1:notaport",
        "--upstream",
        "127.0.0.1:1",
    ]);
    assert_eq!(code, 2);
    let line = error_line(&err);
    assert!(
        line.contains("127.0.0.1:notaport") && line.contains("--listen"),
        "{err}"
    );
}

#[test]
fn unparseable_upstream_is_named() {
    let (code, err) = run(&[
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "nohostport",
    ]);
    assert_eq!(code, 2);
    assert!(error_line(&err).contains("nohostport"), "{err}");
}

#[test]
fn missing_upstream_is_named() {
    let (code, err) = run(&["proxy", "--listen", "127.0.0.1:0"]);
    assert_eq!(code, 2);
    assert!(error_line(&err).contains("--upstream"), "{err}");
}

#[test]
fn bad_size_is_named() {
    let (code, err) = run(&[
        "proxy",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:1",
        "--buffer-size",
        "12parsecs",
    ]);
    assert_eq!(code, 2);
    assert!(error_line(&err).contains("12parsecs"), "{err}");
}

#[test]
fn listen_address_in_use_is_one_line_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = run(&["proxy", "--listen", &addr, "--upstream", "127.0.0.1:1"]);
    assert_eq!(code, 2);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("tearline:")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(&addr), "{err}");
}
