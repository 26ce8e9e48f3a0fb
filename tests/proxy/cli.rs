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

// ---- timed phases and --watch, through the binary over loopback sockets ----

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// An echo server on a free port (one thread per connection).
fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut s = s;
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// A running `tearline proxy`, killed on drop; its stdout and stderr lines arrive on channels.
struct Running {
    child: std::process::Child,
    out: Receiver<String>,
    err: Receiver<String>,
    listen: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines_of(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The first line of `rx` containing `needle` within 10 s.
fn wait_line(rx: &Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(needle) => return l,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no line with {needle:?} within 10 s; saw {seen:?}");
}

fn start_proxy(profile: &std::path::Path, extra: &[&str]) -> Running {
    let up = echo_server().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args([
            "proxy",
            "--api",
            "off",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &up,
        ])
        .arg("--profile")
        .arg(profile)
        .args(extra)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    let mut running = Running {
        child,
        out,
        err,
        listen: String::new(),
    };
    let line = wait_line(&running.out, " listening on ");
    running.listen = line
        .split(" listening on ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_default()
        .to_owned();
    running
}

/// A client connection through the proxy that stays open.
struct Conn(TcpStream);

impl Conn {
    fn open(addr: &str) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Conn(s)
    }

    /// Time for 4 bytes to come back.
    fn round_trip(&mut self) -> Duration {
        let t0 = Instant::now();
        self.0.write_all(b"ping").unwrap();
        let mut buf = [0u8; 4];
        self.0
            .read_exact(&mut buf)
            .expect("the connection is still open and echoes");
        assert_eq!(&buf, b"ping");
        t0.elapsed()
    }
}

const SLOW: Duration = Duration::from_millis(400);

/// Polls new connections (bounded) until one's round trip is `slow` (or not); returns when.
fn until_new_connections_are(addr: &str, slow: bool) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if (Conn::open(addr).round_trip() >= SLOW) == slow {
            return Instant::now();
        }
    }
    panic!(
        "new connections never became {}",
        if slow { "slow" } else { "fast" }
    );
}

#[test]
fn a_phase_change_applies_to_new_and_live_connections() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("phases.toml");
    std::fs::write(
        &profile,
        "[[fault]]\nname = \"slow\"\nkind = \"latency\"\nlatency_ms = 400\n\n\
         [[phase]]\nname = \"clean\"\nduration_ms = 1500\nfaults = []\n\n\
         [[phase]]\nname = \"slowed\"\nfaults = [\"slow\"]\n",
    )
    .unwrap();
    let p = start_proxy(&profile, &[]);
    let started = Instant::now();
    let mut live = Conn::open(&p.listen);
    let first = live.round_trip();
    assert!(first < SLOW, "the clean phase is slow: {first:?}");
    let slowed = until_new_connections_are(&p.listen, true);
    assert!(
        slowed - started >= Duration::from_millis(1300),
        "the second phase began {:?} after start, before the first ended",
        slowed - started
    );
    // The chunk each pump was already waiting for when the phase changed is planned with the
    // old chain; the next one with the new chain.
    live.round_trip();
    let after = live.round_trip();
    assert!(
        after >= SLOW,
        "the live connection did not switch to the new phase: {after:?}"
    );
}

#[test]
fn watch_applies_a_valid_edit_to_live_connections_and_rejects_a_bad_one_keeping_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("watched.toml");
    let slow = "[[fault]]\nname = \"lag\"\nkind = \"latency\"\nlatency_ms = 400\n";
    let fast = "[[fault]]\nname = \"lag\"\nkind = \"latency\"\nlatency_ms = 1\n";
    std::fs::write(&profile, slow).unwrap();
    let p = start_proxy(&profile, &["--watch"]);
    wait_line(&p.out, "watching");
    let mut live = Conn::open(&p.listen);
    assert!(
        live.round_trip() >= SLOW,
        "the first profile is not in force"
    );

    std::fs::write(&profile, fast).unwrap();
    wait_line(&p.out, "reloaded");
    until_new_connections_are(&p.listen, false);
    // One chunk per direction may still be planned with the old chain (see the phase test).
    live.round_trip();
    let after = live.round_trip();
    assert!(
        after < SLOW,
        "the live connection kept the old faults: {after:?}"
    );

    // Line 4 holds the bad value of latency_ms. The slower setting must not leak in.
    let bad = "[[fault]]\nname = \"lag\"\nkind = \"latency\"\nlatency_ms = \"900\"\n";
    std::fs::write(&profile, bad).unwrap();
    let shown = profile.display().to_string();
    let line = wait_line(&p.err, &format!("{shown}:4:"));
    let col = line
        .split(&format!("{shown}:4:"))
        .nth(1)
        .and_then(|r| r.split(':').next())
        .unwrap_or_default();
    assert!(col.parse::<u32>().is_ok(), "no file:line:col in {line}");
    assert!(line.contains("latency_ms"), "{line}");
    assert!(line.contains("unchanged"), "{line}");
    assert!(
        live.round_trip() < SLOW,
        "a bad edit changed the live connection"
    );
    assert!(
        Conn::open(&p.listen).round_trip() < SLOW,
        "a bad edit changed new connections"
    );
}

/// A profile whose `[[proxy]]` tables bring their own addresses, and `--listen`/`--upstream`
/// beside it: one of the two would be ignored, so the proxy refuses to start and says which.
/// The same profile without the flags serves its own proxy.
#[test]
fn listen_and_upstream_beside_a_profiles_own_proxies_are_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let up = echo_server().to_string();
    let profile = dir.path().join("own.toml");
    std::fs::write(
        &profile,
        format!(
            "[[proxy]]\nname = \"own\"\nlisten = \"127.0.0.1:0\"\nupstream = \"{up}\"\n\n\
             [[fault]]\nkind = \"latency\"\nlatency_ms = 1\n"
        ),
    )
    .unwrap();
    let path = profile.to_string_lossy().into_owned();
    let (code, err) = run(&[
        "proxy",
        "--api",
        "off",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &up,
        "--profile",
        &path,
    ]);
    assert_eq!(code, 2, "{err}");
    let line = error_line(&err);
    assert!(
        line.contains("defines 1 [[proxy]]")
            && line.contains("--listen and --upstream would be ignored"),
        "{err}"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_tearline"))
        .args(["proxy", "--api", "off", "--profile", &path])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let line = wait_line(&out, " listening on ");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("own"), "{line}");
}
