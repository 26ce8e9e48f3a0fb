//! A peer program as a child process: its stdout read line by line as JSON into a shared log
//! the test can wait on, its stderr kept for failure messages, and the process killed when the
//! handle drops (no peer outlives its test).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The JSON lines a peer printed so far (a line that is not JSON is kept as a string).
#[derive(Clone, Default)]
pub struct Log {
    lines: Arc<Mutex<Vec<Value>>>,
    changed: Arc<Notify>,
}

impl Log {
    pub fn snapshot(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }
}

/// A running peer.
pub struct Peer {
    pub name: String,
    child: Child,
    log: Log,
    stderr: Arc<Mutex<String>>,
}

impl Peer {
    /// Starts `cmd` (a peer command from `tests/peers`), reading its stdout as JSON lines.
    pub fn spawn(name: &str, cmd: std::process::Command) -> Peer {
        let mut cmd = Command::from(cmd);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the {name} peer: {e}"));
        let log = Log::default();
        let out = child.stdout.take().unwrap();
        let l = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v = serde_json::from_str(&line).unwrap_or(Value::String(line));
                l.lines.lock().unwrap().push(v);
                l.changed.notify_waiters();
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().unwrap();
        let e2 = stderr.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut s = e2.lock().unwrap();
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 16_384 {
                    let cut = s.len() - 8_192;
                    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                    s.drain(..cut);
                }
            }
        });
        Peer {
            name: name.to_owned(),
            child,
            log,
            stderr,
        }
    }

    pub fn log(&self) -> Vec<Value> {
        self.log.snapshot()
    }

    /// What the peer wrote on stderr so far (its last 8 to 16 KiB), kept after it exits.
    pub fn stderr(&self) -> Arc<Mutex<String>> {
        self.stderr.clone()
    }

    fn describe(&self) -> String {
        format!(
            "{} logged:\n{}\nstderr:\n{}",
            self.name,
            self.log()
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
            self.stderr.lock().unwrap()
        )
    }

    /// Waits until a logged line satisfies `pred` (panics naming what was logged after
    /// `limit`) and returns that line.
    pub async fn wait_for(
        &self,
        what: &str,
        limit: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let notified = self.log.changed.notified();
            if let Some(v) = self.log.snapshot().into_iter().find(&pred) {
                return v;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "{} did not log {what} within {limit:?}; {}",
                    self.name,
                    self.describe()
                );
            }
        }
    }

    /// Waits for the process to exit (killing it after `limit`); returns its exit code and log.
    pub async fn finish(mut self, limit: Duration) -> (Option<i32>, Vec<Value>) {
        let status = match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(s) => s.ok().and_then(|s| s.code()),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        };
        // The reader task may still hold the last lines: wait for stdout to close.
        let deadline = Instant::now() + Duration::from_secs(2);
        while Arc::strong_count(&self.log.lines) > 1 && Instant::now() < deadline {
            let notified = self.log.changed.notified();
            let _ = tokio::time::timeout(Duration::from_millis(50), notified).await;
        }
        (status, self.log())
    }

    /// Waits for the process to exit and panics with its log unless it exited with 0.
    pub async fn succeed(self, limit: Duration) -> Vec<Value> {
        let name = self.name.clone();
        let stderr = self.stderr.clone();
        let (code, log) = self.finish(limit).await;
        assert_eq!(
            code,
            Some(0),
            "{name} did not finish with 0 within {limit:?}; it logged:\n{}\nstderr:\n{}",
            log.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
            stderr.lock().unwrap()
        );
        log
    }
}

/// A server peer that printed `{"event":"listening","port":P}`.
pub struct Server {
    pub peer: Peer,
    pub port: u16,
}

impl Server {
    pub async fn start(name: &str, cmd: std::process::Command) -> Server {
        let peer = Peer::spawn(name, cmd);
        let line = peer
            .wait_for("its port", Duration::from_secs(15), |v| {
                v["event"] == "listening"
            })
            .await;
        let port = line["port"].as_u64().expect("a port") as u16;
        Server { peer, port }
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}
