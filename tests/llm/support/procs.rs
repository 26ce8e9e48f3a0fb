//! The `tearline` binary as users run it (`serve`, `proxy`), as child processes whose output
//! lines the tests wait for. A child is killed when dropped; every wait is bounded (20 s).

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `tearline` child process; its stdout and stderr lines arrive on channels and are also
/// kept in full (to grep them).
pub struct Proc {
    pub child: Child,
    pub out: Receiver<String>,
    pub err: Receiver<String>,
    pub all: Arc<Mutex<String>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines_of(r: impl Read + Send + 'static, all: Arc<Mutex<String>>) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if let Ok(mut a) = all.lock() {
                a.push_str(&line);
                a.push('\n');
            }
            let _ = tx.send(strip_ansi(&line));
        }
    });
    rx
}

/// `line` without ANSI colour sequences.
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

/// Starts `tearline ARGS`.
pub fn spawn(args: &[&str]) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tearline");
    let all = Arc::new(Mutex::new(String::new()));
    let out = lines_of(child.stdout.take().expect("stdout"), all.clone());
    let err = lines_of(child.stderr.take().expect("stderr"), all.clone());
    Proc {
        child,
        out,
        err,
        all,
    }
}

/// The first line of `rx` containing `needle` within 20 s.
pub fn wait_line(rx: &Receiver<String>, needle: &str) -> String {
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
pub fn after<'a>(line: &'a str, before: &str, end: char) -> &'a str {
    line.split_once(before)
        .map_or("", |(_, r)| r.split(end).next().unwrap_or(""))
}

/// Sends SIGTERM and waits (at most 20 s) for the process to exit.
pub fn terminate(p: &mut Proc) {
    let term = Command::new("kill")
        .args(["-TERM", &p.child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.child.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "tearline did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
