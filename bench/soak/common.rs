//! Shared pieces of the reliability benches: arguments, the proxy and lab processes, a tiny
//! HTTP client for the control API, and /proc sampling of a process.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `--name value` arguments; `--quick` picks the short defaults.
pub struct Args {
    pairs: Vec<(String, String)>,
    pub quick: bool,
}

impl Args {
    pub fn new(argv: &[String]) -> Args {
        let mut pairs = Vec::new();
        let mut quick = false;
        let mut i = 0;
        while i < argv.len() {
            if argv[i] == "--quick" {
                quick = true;
            } else if let Some((name, v)) =
                argv[i].strip_prefix("--").and_then(|a| a.split_once('='))
            {
                pairs.push((name.to_owned(), v.to_owned()));
            } else if let Some(name) = argv[i].strip_prefix("--")
                && let Some(v) = argv.get(i + 1)
            {
                pairs.push((name.to_owned(), v.clone()));
                i += 1;
            }
            i += 1;
        }
        Args { pairs, quick }
    }

    /// The text of `--name`, if given.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a repeated `--name` (`--name V` or `--name=V`), in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The value of `--name`, else `quick` under `--quick`, else `full`.
    pub fn num(&self, name: &str, full: u64, quick: u64) -> u64 {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(if self.quick { quick } else { full })
    }
}

/// A free loopback port (bound then released: a bench, not a test).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A `tearline` child process, killed on drop.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// This process's soft `RLIMIT_NOFILE` (children inherit it), from `/proc/self/limits`.
pub fn nofile_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// A `TcpExt` counter of `/proc/net/netstat` (e.g. `TCPAbortOnMemory`: sockets the kernel
/// reset because TCP memory ran out), system-wide.
pub fn tcp_ext(name: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut rows = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (rows.next(), rows.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// (pages of kernel memory all TCP sockets hold now, the `tcp_mem` hard limit in pages).
pub fn tcp_mem_pages() -> (u64, u64) {
    let now = std::fs::read_to_string("/proc/net/sockstat")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| l.rsplit(' ').next().and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    let max = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem")
        .unwrap_or_default()
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (now, max)
}

/// Where `SOAK_LOG` asks children's stderr to go (appended), else nowhere.
fn child_stderr() -> Stdio {
    std::env::var_os("SOAK_LOG")
        .and_then(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .ok()
        })
        .map_or_else(Stdio::null, Stdio::from)
}

/// The SSE fan-out's upstream server: this bench binary re-run as `sse-server`.
pub struct SseServer {
    pub port: u16,
    child: tokio::process::Child,
    out: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

/// Starts the `sse-server` child and reads its port (bounded: 10 s).
pub async fn sse_server(event_mib: u64, events: u64, sock_buf: u32) -> Option<SseServer> {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().ok()?)
        .args(["sse-server", "--event-mib", &event_mib.to_string()])
        .args(["--events", &events.to_string()])
        .args(["--sock-buf", &sock_buf.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(child_stderr())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    let mut out = tokio::io::BufReader::new(child.stdout.take()?).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), out.next_line())
        .await
        .ok()?
        .ok()??;
    let port = line.strip_prefix("port ")?.parse().ok()?;
    Some(SseServer { port, child, out })
}

impl SseServer {
    /// Closes the child's stdin and returns its counters line (bounded: 10 s).
    pub async fn finish(mut self) -> String {
        drop(self.child.stdin.take());
        let line = tokio::time::timeout(Duration::from_secs(10), self.out.next_line()).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        match line {
            Ok(Ok(Some(l))) => l,
            _ => "(no counters: the child did not answer)".to_owned(),
        }
    }
}

/// Starts `tearline <args>` quietly.
pub fn spawn(args: &[&str]) -> Proc {
    // SOAK_LOG=FILE keeps the children's warnings (appended) for a look after the run.
    let stderr = child_stderr();
    // SOAK_WRAP="heaptrack -o FILE" (whitespace-split) runs tearline under a tool; the pid,
    // RSS and fds printed are then the wrapper's, not the proxy's.
    let wrap = std::env::var("SOAK_WRAP").unwrap_or_default();
    let mut wrap = wrap.split_whitespace();
    let mut cmd = match wrap.next() {
        Some(tool) => {
            let mut c = Command::new(tool);
            c.args(wrap).arg(env!("CARGO_BIN_EXE_tearline"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_tearline")),
    };
    let child = cmd
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn tearline");
    Proc { child }
}

/// Starts `tearline proxy` relaying `listen` → `upstream` with its API on `api`.
pub async fn proxy(listen: u16, upstream: u16, api: u16, extra: &[&str]) -> Proc {
    let l = format!("127.0.0.1:{listen}");
    let u = format!("127.0.0.1:{upstream}");
    let a = format!("127.0.0.1:{api}");
    let mut args = vec!["proxy", "--listen", &l, "--upstream", &u, "--api", &a];
    args.extend_from_slice(extra);
    let p = spawn(&args);
    wait_http(api).await;
    p
}

/// Waits (bounded) until something answers HTTP on `port`.
pub async fn wait_http(port: u16) {
    for _ in 0..200 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {port} after 10 s");
}

/// One HTTP/1.1 request with `Connection: close`; (status, body).
pub async fn http(port: u16, method: &str, path: &str, headers: &str, body: &str) -> (u16, String) {
    let fut = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.ok()?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let status = text.get(9..12)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
        Some((status, body))
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .ok()
        .flatten()
        .unwrap_or((0, String::new()))
}

/// A control-API call; panics unless the status is 2xx.
pub async fn api(port: u16, method: &str, path: &str, body: &str) -> String {
    let (status, text) = http(port, method, path, "", body).await;
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {text}"
    );
    text
}

/// A Prometheus gauge or counter (first sample of `name`), from `/metrics`.
pub async fn metric(api_port: u16, name: &str) -> f64 {
    let (_, text) = http(api_port, "GET", "/metrics", "", "").await;
    text.lines()
        .find(|l| l.starts_with(name) && !l.starts_with('#'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// (RSS in KiB, open fds, threads) of `pid`.
pub fn proc_stats(pid: u32) -> (u64, usize, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (field("VmRSS:"), fds, field("Threads:"))
}

/// Samples `pid`'s RSS and the kernel's TCP memory every 50 ms; the peaks are the largest seen.
pub struct RssPeak {
    peak: Arc<AtomicU64>,
    tcp_peak: Arc<AtomicU64>,
    stop: tokio_util::sync::CancellationToken,
}

impl RssPeak {
    pub fn start(pid: u32) -> RssPeak {
        let peak = Arc::new(AtomicU64::new(proc_stats(pid).0));
        let tcp_peak = Arc::new(AtomicU64::new(tcp_mem_pages().0));
        let stop = tokio_util::sync::CancellationToken::new();
        let (p, t, s) = (peak.clone(), tcp_peak.clone(), stop.clone());
        tokio::spawn(async move {
            while !s.is_cancelled() {
                p.fetch_max(proc_stats(pid).0, Ordering::Relaxed);
                t.fetch_max(tcp_mem_pages().0, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        RssPeak {
            peak,
            tcp_peak,
            stop,
        }
    }

    /// Largest RSS seen, KiB.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// Largest kernel TCP memory seen (all sockets of the machine), pages.
    pub fn tcp_peak(&self) -> u64 {
        self.tcp_peak.load(Ordering::Relaxed)
    }
}

impl Drop for RssPeak {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Deterministic filler: xorshift64 stream.
pub struct Filler(u64);

impl Filler {
    pub fn new(seed: u64) -> Filler {
        Filler(seed | 1)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            let b = x.to_le_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
    }
}

/// Prints a result line and returns whether it passed.
pub fn verdict(name: &str, ok: bool, detail: &str) -> bool {
    println!("  [{}] {name}: {detail}", if ok { "ok" } else { "FAIL" });
    ok
}
