//! As users run it: `tearline serve` and `tearline proxy` as processes, the proxy with an
//! `sse_cut` profile and `--tls-self-signed` (the client trusts the CA from the printed trust
//! line through `NODE_EXTRA_CA_CERTS`), and the published TypeScript MCP SDK client (pinned in
//! tests/peers). The cuts in the proxy's cuts log land at the requested SSE class, and the
//! findings in its findings log (written when SIGTERM ends the run) are the same as over plain
//! HTTP.

use crate::common;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// A child process killed (if still running) on drop.
struct Proc {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines_of(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(strip_ansi(&line)).is_err() {
                break;
            }
        }
    });
    rx
}

/// `line` without ANSI colour sequences (the servers' log lines are coloured).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn spawn(args: &[&str]) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tearline");
    let out = lines_of(child.stdout.take().expect("stdout"));
    let err = lines_of(child.stderr.take().expect("stderr"));
    Proc { child, out, err }
}

/// The first line of `rx` containing `needle` within 20 s.
fn wait_line(rx: &Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(needle) => return l,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no line with {needle:?} within 20 s; saw {seen:?}");
}

/// The text after `before` up to the next `end` character.
fn after<'a>(line: &'a str, before: &str, end: char) -> &'a str {
    line.split_once(before)
        .map_or("", |(_, r)| r.split(end).next().unwrap_or(""))
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

struct Run {
    client: String,
    /// (class, tls_end) of every cut record.
    cuts: Vec<(String, String)>,
    /// Findings by kind.
    findings: BTreeMap<String, u64>,
}

async fn one_run(tls: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let lab = spawn(&["serve", "--listen", "127.0.0.1:0"]);
    let lab_addr = after(&wait_line(&lab.err, "lab server listening"), "addr=", ' ').to_owned();
    // One cut per connection, in the third event's data value (priming is event 0).
    let profile = dir.path().join("cut.toml");
    std::fs::write(
        &profile,
        "[[fault]]\nname = \"cut\"\nkind = \"sse_cut\"\ndirection = \"downstream\"\n\
         at = \"mid-value\"\nleg = \"first\"\naction = \"reset\"\nevents = [2, 2]\n",
    )
    .unwrap();
    let cuts_log = dir.path().join("cuts.jsonl");
    let findings_log = dir.path().join("findings.jsonl");
    let ca_dir = dir.path().join("ca");
    let p = |x: &Path| x.to_str().expect("utf-8 temp path").to_owned();
    let mut args: Vec<String> = [
        "proxy",
        "--api",
        "off",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &lab_addr,
        "--seed",
        "7",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend([
        "--profile".into(),
        p(&profile),
        "--cuts-log".into(),
        p(&cuts_log),
        "--findings-log".into(),
        p(&findings_log),
    ]);
    if tls {
        args.extend([
            "--tls-self-signed".into(),
            "--tls-ca-dir".into(),
            p(&ca_dir),
        ]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut proxy = spawn(&args);
    // The trust line (TLS only) and the listening line, in whatever order they come.
    let (mut ca, mut port) = (None::<PathBuf>, None::<String>);
    while port.is_none() || (tls && ca.is_none()) {
        let line = wait_line(&proxy.out, "");
        if line.contains("TLS: trust the tearline local CA ") {
            ca = Some(PathBuf::from(after(&line, "local CA ", ' ')));
        } else if line.contains(" listening on ") {
            let listen = after(&line, " listening on ", ' ');
            port = listen.rsplit(':').next().map(str::to_owned);
        }
    }
    let port = port.unwrap_or_default();

    let scheme = if tls { "https" } else { "http" };
    let mut cmd = common::peers::node();
    cmd.current_dir(common::peers::dir())
        .arg("js/sdk_progress_call.mjs")
        .arg(format!("{scheme}://localhost:{port}/mcp"));
    if let Some(ca) = &ca {
        assert!(
            ca.starts_with(&ca_dir),
            "the CA is kept in --tls-ca-dir: {ca:?}"
        );
        cmd.env("NODE_EXTRA_CA_CERTS", ca);
    }
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the SDK client finishes")
        .expect("node starts");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SIGTERM: the proxy drains, settles the audit and syncs the findings log.
    let term = Command::new("kill")
        .args(["-TERM", &proxy.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while proxy.child.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "the proxy did not stop on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = proxy.err.try_iter().count();
    drop(lab);
    let cuts = jsonl(&cuts_log)
        .iter()
        .map(|c| {
            (
                c["class"].as_str().unwrap_or("-").to_owned(),
                c["tls_end"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    let mut findings = BTreeMap::new();
    for f in jsonl(&findings_log) {
        *findings
            .entry(f["kind"].as_str().unwrap_or("?").to_owned())
            .or_insert(0) += 1;
    }
    Run {
        client: String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        cuts,
        findings,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_client_through_the_proxy_binary_with_self_signed_tls_matches_plain() {
    let plain = one_run(false).await;
    let tls = one_run(true).await;
    assert!(!plain.cuts.is_empty(), "no cut over plain HTTP");
    for cut in &plain.cuts {
        assert_eq!(cut, &("mid-value".to_owned(), "-".to_owned()));
    }
    assert_eq!(
        tls.cuts.len(),
        plain.cuts.len(),
        "{:?} vs {:?}",
        tls.cuts,
        plain.cuts
    );
    for cut in &tls.cuts {
        assert_eq!(cut, &("mid-value".to_owned(), "truncated".to_owned()));
    }
    assert!(!plain.findings.is_empty(), "the audit found nothing");
    assert_eq!(tls.findings, plain.findings, "audit findings differ");
    assert_eq!(tls.client, plain.client, "the client's outcome differs");
    eprintln!("client: {} findings: {:?}", tls.client, tls.findings);
}
