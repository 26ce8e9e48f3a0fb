//! SSE fan-out: many concurrent SSE streams through the proxy's HTTP observer, each carrying
//! events of several MiB (one `data:` line each). Checks: every byte of every stream delivered
//! (length and hash), proxy RSS peak ≤ 200 MB.
//!
//! The upstream server is a child process ([`super::sse_server`]), so this process, the server
//! and the proxy hold 1, 1 and 2 fds per stream: the proxy is the process `RLIMIT_NOFILE`
//! limits, and the default stream count is the largest it allows. Every stream ends as one
//! [`End`]; failures are counted by kind (with the `io::ErrorKind`), never lumped together.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Barrier, Semaphore};
use xxhash_rust::xxh3::Xxh3;

use super::common::{self, Args, RssPeak, mib, verdict};
use super::sse_server::Body;

/// Fds a process needs besides one (bench, server) or two (proxy) per stream.
const FD_SLACK: u64 = 64;
/// A stream that delivers nothing for this long counts as stalled.
const STALL: Duration = Duration::from_secs(120);

/// How one stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Complete,
    /// `connect` to the proxy failed.
    Connect(ErrorKind),
    /// Sending the request failed.
    Request(ErrorKind),
    /// A read failed (reset, …) after `got` body bytes.
    Read(ErrorKind),
    /// EOF before the full body.
    Short,
    /// The full length, another hash.
    Mismatch,
    /// No byte for [`STALL`].
    Stalled,
}

struct Stream {
    end: End,
    got: u64,
    connect: Duration,
    at: Duration,
}

/// The most streams `RLIMIT_NOFILE` allows (the proxy needs two fds per stream) and the limit.
fn fitting_streams() -> (u64, u64) {
    let limit = common::nofile_limit().unwrap_or(1024);
    (limit.saturating_sub(FD_SLACK) / 2, limit)
}

/// Opens a stream, waits for all others to open, reads it to the end.
async fn client(
    port: u16,
    body: Arc<(usize, u64, u64)>,
    ready: Arc<Barrier>,
    opening: Arc<Semaphore>,
    t0: Instant,
    sock_buf: u32,
) -> Stream {
    let (head_len, want_len, want_hash) = *body;
    let permit = opening.acquire_owned().await.ok();
    let c0 = Instant::now();
    let conn = async {
        let sock = tokio::net::TcpSocket::new_v4().map_err(|e| End::Connect(e.kind()))?;
        if sock_buf > 0 {
            let _ = sock.set_recv_buffer_size(sock_buf);
        }
        let mut s = sock
            .connect(([127, 0, 0, 1], port).into())
            .await
            .map_err(|e| End::Connect(e.kind()))?;
        s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
            .await
            .map_err(|e| End::Request(e.kind()))?;
        Ok(s)
    }
    .await;
    let connect = c0.elapsed();
    drop(permit);
    // Every stream is open before any is read: they are all in flight at once.
    ready.wait().await;
    let done = |end, got| Stream {
        end,
        got,
        connect,
        at: t0.elapsed(),
    };
    let mut s = match conn {
        Ok(s) => s,
        Err(end) => return done(end, 0),
    };
    let mut buf = vec![0u8; 16 * 1024];
    let mut skipped = 0usize;
    let (mut got, mut h) = (0u64, Xxh3::new());
    loop {
        let n = match tokio::time::timeout(STALL, s.read(&mut buf)).await {
            Err(_) => return done(End::Stalled, got),
            Ok(Err(e)) => return done(End::Read(e.kind()), got),
            Ok(Ok(0)) => {
                let end = if got != want_len {
                    End::Short
                } else if h.digest() != want_hash {
                    End::Mismatch
                } else {
                    End::Complete
                };
                return done(end, got);
            }
            Ok(Ok(n)) => n,
        };
        let mut piece = &buf[..n];
        if skipped < head_len {
            let k = (head_len - skipped).min(piece.len());
            skipped += k;
            piece = &piece[k..];
        }
        got += piece.len() as u64;
        h.update(piece);
    }
}

/// Prints one line per way streams ended: count, body bytes, when (since start).
fn report_ends(ends: &[Stream]) {
    let mut by: BTreeMap<End, (u64, u64, Duration, Duration)> = BTreeMap::new();
    for s in ends {
        let e = by
            .entry(s.end)
            .or_insert((0, 0, Duration::MAX, Duration::ZERO));
        e.0 += 1;
        e.1 += s.got;
        e.2 = e.2.min(s.at);
        e.3 = e.3.max(s.at);
    }
    for (end, (n, got, first, last)) in by {
        println!(
            "  ended {end:?}: {n} stream(s), {:.1} MiB of body, at {:.1}–{:.1} s",
            got as f64 / 1048576.0,
            first.as_secs_f64(),
            last.as_secs_f64()
        );
    }
    let mut c: Vec<Duration> = ends.iter().map(|s| s.connect).collect();
    c.sort();
    if let (Some(med), Some(max)) = (c.get(c.len() / 2), c.last()) {
        let slow = c
            .iter()
            .filter(|d| **d >= Duration::from_millis(900))
            .count();
        println!(
            "  connect+request: median {:.1} ms, max {:.1} ms, {slow} took ≥ 0.9 s (a SYN retransmit)",
            med.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    }
}

/// The proxy's counters that explain refusals and memory (from `/metrics`).
async fn proxy_counters(api: u16) -> String {
    let (_, text) = common::http(api, "GET", "/metrics", "", "").await;
    let wanted = [
        "tearline_proxy_connections_open",
        "tearline_proxy_connections_total",
        "tearline_proxy_connections_refused_total",
        "tearline_audit_tracked",
        "tearline_audit_dropped_total",
    ];
    text.lines()
        .filter(|l| !l.starts_with('#') && wanted.iter().any(|w| l.starts_with(w)))
        .filter(|l| !l.ends_with(" 0"))
        .map(|l| l.replace("tearline_", "").replace("{proxy=\"proxy\"}", ""))
        .collect::<Vec<_>>()
        .join(", ")
}

pub async fn run(args: &Args) -> bool {
    let (fit, limit) = fitting_streams();
    let streams = match args.text("streams").and_then(|v| v.parse::<u64>().ok()) {
        Some(n) if n > fit => {
            println!(
                "== sse fan-out: [FAIL] --streams {n} does not fit: RLIMIT_NOFILE is {limit} and the \
                 proxy needs 2 fds per stream + {FD_SLACK}, so at most {fit} streams; raise the \
                 limit (`ulimit -n`) or ask for fewer"
            );
            return false;
        }
        Some(n) => n,
        None if args.quick => 1_000,
        None => {
            if fit < 10_000 {
                println!(
                    "  (streams lowered from 10000 to {fit}: RLIMIT_NOFILE is {limit}, the proxy \
                     needs 2 fds per stream + {FD_SLACK})"
                );
            }
            fit.min(10_000)
        }
    };
    let event_mib = args.num("event-mib", 4, 4);
    let events = args.num("events", 1, 1);
    // At most this many connects in flight (0: all at once, as the burst).
    let open_parallel = args.num("open-parallel", 0, 0);
    // The bench's own sockets (client receive, server send buffers) are capped at this many
    // bytes (0: kernel autotuning), so that N × 4 MiB in flight does not take the whole
    // machine's TCP memory (`tcp_mem`): other processes' sockets would suffer.
    let sock_buf = args.num("sock-buf-kib", 256, 256) as u32 * 1024;
    let extra: Vec<&str> = args.all("proxy-arg");
    println!(
        "== sse fan-out: {streams} concurrent streams × {events} event(s) of {event_mib} MiB, HTTP observer on{}",
        if extra.is_empty() {
            String::new()
        } else {
            format!(", proxy args {extra:?}")
        }
    );
    let body = Body::new(event_mib, events);
    let want = Arc::new((body.head.len(), body.len(), body.hash()));
    let Some(server) = common::sse_server(event_mib, events, sock_buf).await else {
        return verdict("server", false, "the sse-server child did not start");
    };
    let (listen, api) = (common::free_port(), common::free_port());
    let max = format!("{}", streams + 16);
    let mut proxy_args = vec!["--max-connections", &max, "--connect-timeout", "60s"];
    proxy_args.extend(extra.iter().copied());
    let proxy = common::proxy(listen, server.port, api, &proxy_args).await;
    let rss0 = common::proc_stats(proxy.pid()).0;
    let aborts0 = common::tcp_ext("TCPAbortOnMemory");
    let peak = RssPeak::start(proxy.pid());
    let ready = Arc::new(Barrier::new(streams as usize + 1));
    let opening = Arc::new(Semaphore::new(if open_parallel == 0 {
        Semaphore::MAX_PERMITS
    } else {
        open_parallel as usize
    }));
    let start = Instant::now();
    let clients: Vec<_> = (0..streams)
        .map(|_| {
            tokio::spawn(client(
                listen,
                want.clone(),
                ready.clone(),
                opening.clone(),
                start,
                sock_buf,
            ))
        })
        .collect();
    ready.wait().await;
    let opened = start.elapsed().as_secs_f64();
    // Every stream open (or failed), none read yet: each proxy connection holds what it can.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_open = common::proc_stats(proxy.pid()).0;
    println!(
        "  all {streams} connects done in {opened:.1} s; proxy RSS with every stream open and unread: {:.1} MiB ({:.1} KiB per stream over start)",
        mib(rss_open),
        (rss_open.saturating_sub(rss0)) as f64 / streams as f64
    );
    println!("  proxy then: {}", proxy_counters(api).await);
    let mut ends = Vec::with_capacity(streams as usize);
    for c in clients {
        if let Ok(s) = c.await {
            ends.push(s);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    report_ends(&ends);
    let complete = ends.iter().filter(|s| s.end == End::Complete).count() as u64;
    let bytes: u64 = ends.iter().map(|s| s.got).sum();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss1, fds, _) = common::proc_stats(proxy.pid());
    println!("  proxy at end: {}", proxy_counters(api).await);
    println!("  server: {}", server.finish().await);
    let (_, tcp_max) = common::tcp_mem_pages();
    println!(
        "  kernel: TCP memory peak {:.0} MiB of tcp_mem's {:.0} MiB (whole machine); sockets reset for lack of it (TcpExt TCPAbortOnMemory) during the run: {}",
        peak.tcp_peak() as f64 * 4096.0 / 1048576.0,
        tcp_max as f64 * 4096.0 / 1048576.0,
        common::tcp_ext("TCPAbortOnMemory").saturating_sub(aborts0)
    );
    println!(
        "  {complete}/{streams} streams complete, {:.0} MiB delivered in {secs:.1} s ({:.0} MiB/s)",
        bytes as f64 / 1048576.0,
        bytes as f64 / 1048576.0 / secs
    );
    println!(
        "  proxy RSS start {:.1} MiB, peak {:.1} MiB ({:.1} KiB per stream over start), end {:.1} MiB; fds at end {fds}",
        mib(rss0),
        mib(peak.peak()),
        (peak.peak().saturating_sub(rss0)) as f64 / streams as f64,
        mib(rss1)
    );
    let mut ok = verdict(
        "every byte",
        complete == streams,
        &format!("{complete}/{streams} streams with the full length and hash"),
    );
    ok &= verdict(
        "RSS",
        peak.peak() * 1024 <= 200_000_000,
        &format!(
            "peak {:.1} MB (limit 200 MB)",
            peak.peak() as f64 * 1024.0 / 1e6
        ),
    );
    ok
}
