//! One `tearline` command line run as a user's shell runs it (`sh -c 'exec LINE'`, so
//! quotes, `~`, globs, redirections and comments mean what they mean to a user), with its
//! output captured line by line: to a bounded deadline for commands that end, or until it
//! announces the addresses it listens on for servers, which are then probed and stopped with
//! SIGINT as a user stops them.
//!
//! Invariants: every wait is bounded (a command past its deadline is killed and reported with
//! its output); a spawned process is killed when its [`Running`] is dropped, so no test leaves
//! one behind.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a command is started: its line, directory and environment.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The shell line (already rewritten).
    pub line: String,
    /// Working directory.
    pub dir: PathBuf,
    /// Environment variables set (on top of this process's).
    pub env: Vec<(String, String)>,
}

/// A started command and everything it printed so far.
pub struct Running {
    child: Child,
    output: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    line: String,
}

/// What an address announcement says: the control API or a relay/lab listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// `control API listening addr=…`.
    Api,
    /// A proxy's `listening … listen=…` or the lab's `lab server listening addr=…`.
    Service,
}

impl Launch {
    /// Starts the command.
    pub fn spawn(&self) -> Running {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(format!("exec {}", self.line))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // Whatever the machine sets, logs are plain text at the commands' own default level.
        cmd.env_remove("RUST_LOG").env_remove("TEARLINE_CA_DIR");
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `{}`: {e}", self.line));
        let output = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { break };
                    let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
                    out.push_str(&line);
                    out.push('\n');
                }
            }));
        }
        Running {
            child,
            output,
            readers,
            line: self.line.clone(),
        }
    }
}

impl Running {
    /// Everything printed so far (stdout and stderr, line by line).
    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits for the exit code, at most `limit`; `Err` (with the output) when it ran longer
    /// (it is then killed) or died of a signal.
    pub fn wait(&mut self, limit: Duration) -> Result<i32, String> {
        let deadline = Instant::now() + limit;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    // The readers end when the pipes close (the process is gone): wait for them,
                    // bounded, so the output is whole.
                    let end = Instant::now() + Duration::from_secs(5);
                    while Instant::now() < end && !self.readers.iter().all(|r| r.is_finished()) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    return status.code().ok_or_else(|| {
                        format!("`{}` died of a signal:\n{}", self.line, self.output())
                    });
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "`{}` still ran after {limit:?} (killed):\n{}",
                        self.line,
                        self.output()
                    ));
                }
            }
        }
    }

    /// Waits until the command announced a listener of each kind in `needs`, at most `limit`;
    /// returns every address announced by then.
    pub fn listening(
        &mut self,
        needs: &[Listener],
        limit: Duration,
    ) -> Result<Vec<(Listener, SocketAddr)>, String> {
        let deadline = Instant::now() + limit;
        loop {
            let found = announced(&self.output());
            if needs.iter().all(|n| found.iter().any(|(k, _)| k == n)) {
                return Ok(found);
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "`{}` ended ({status}) before announcing {needs:?}:\n{}",
                    self.line,
                    self.output()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "`{}` announced no {needs:?} within {limit:?}:\n{}",
                    self.line,
                    self.output()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGINT (a user's Ctrl-C) and waits for the exit code, at most `limit`.
    pub fn interrupt(&mut self, limit: Duration) -> Result<i32, String> {
        let pid = i32::try_from(self.child.id()).expect("a pid fits in i32");
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid).expect("a child's pid is positive"),
            rustix::process::Signal::INT,
        );
        self.wait(limit)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The addresses a command's output announced, in order.
pub fn announced(output: &str) -> Vec<(Listener, SocketAddr)> {
    let after = |line: &str, key: &str| -> Option<SocketAddr> {
        let (_, rest) = line.split_once(key)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    output
        .lines()
        .filter_map(|l| {
            if l.contains("control API listening") {
                after(l, "addr=").map(|a| (Listener::Api, a))
            } else if l.contains("lab server listening") {
                after(l, "addr=").map(|a| (Listener::Service, a))
            } else if l.contains("listening") {
                after(l, "listen=").map(|a| (Listener::Service, a))
            } else {
                None
            }
        })
        .collect()
}

/// Sends `GET path` over `stream` and returns what came back (at most 4 KiB, bounded wait).
fn ask(mut stream: impl Read + Write, path: &str) -> std::io::Result<String> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes())?;
    let mut buf = vec![0u8; 4096];
    let mut got = 0;
    while got < 12 {
        let n = stream.read(&mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(String::from_utf8_lossy(&buf[..got]).into_owned())
}

/// Asks `GET path` at `addr` (over TLS trusting `ca` when given) and returns the status line's
/// code; `Err` with what happened when no HTTP answer came.
pub fn http_status(addr: SocketAddr, path: &str, ca: Option<&Path>) -> Result<u16, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let answer = match ca {
        None => ask(tcp, path),
        Some(ca) => {
            let conn = rustls::ClientConnection::new(
                client_config(ca),
                "localhost".try_into().expect("a name"),
            )
            .map_err(|e| e.to_string())?;
            ask(rustls::StreamOwned::new(conn, tcp), path)
        }
    }
    .map_err(|e| format!("GET {path} at {addr}: {e}"))?;
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("GET {path} at {addr}: no HTTP answer: {answer:?}"))
}

/// A TLS client trusting only the CA certificates in `ca`.
fn client_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca).expect("the CA file reads") {
        roots
            .add(cert.expect("a PEM certificate"))
            .expect("a CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}
