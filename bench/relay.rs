//! Relay benchmark: direct loopback vs through tearline, in one run, printed side by side.
//!
//! Sections: one 1 GiB stream, 8 and 64 parallel streams (1 GiB in total each), echo
//! ping-pong round trips (p50/p99 and what the proxy adds), and one 1 GiB stream through a
//! 100 ms latency fault vs no fault (latency must shift the stream, not cap it). Load and proxy
//! run in separate tokio runtimes (two worker threads each), as separate processes would.
//!
//! Run: `cargo bench --bench relay` (`-- --quick` for a 64 MiB smoke run, `-- --buffer-kib N`
//! for the proxy's read buffer size, default 64; `-- --no-splice` for the copying path only;
//! `-- --latency-only` for the latency case alone, with the default queue budgets;
//! `-- --proxy-threads N` for the proxy runtime's worker threads, default 2;
//! `-- --proxy-current-thread` to run the proxy on one current-thread runtime instead, the
//! runtime-layout experiment of issue 15). Besides MiB/s it prints the proxy threads' CPU and
//! context switches (wake-ups) per GiB and per echo round trip.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use tearline::fault::{Chunk, ConnRng, Fault, FaultFactory, Plan};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::vocab::Direction;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::time::Instant;

const MIB: u64 = 1024 * 1024;
const IO_BUF: usize = 256 * 1024;

/// A fixed latency: every byte leaves `delay` after its chunk arrived.
struct Latency(Duration);

impl Fault for Latency {
    fn kind(&self) -> &'static str {
        "bench-latency"
    }
    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        for s in plan.slices_mut() {
            s.at = chunk.arrived + self.0;
        }
    }
}

struct LatencyFactory(Duration);

impl FaultFactory for LatencyFactory {
    fn kind(&self) -> &'static str {
        "bench-latency"
    }
    fn direction(&self) -> Direction {
        Direction::Upstream
    }
    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        Some(Box::new(Latency(self.0)))
    }
}

fn runtime(name: &str, workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Reads every connection to EOF, then closes it (the sender's signal that all arrived).
async fn sink_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
    let addr = l.local_addr().expect("sink addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let mut buf = vec![0u8; IO_BUF];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// Echoes every connection.
async fn echo_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
    let addr = l.local_addr().expect("echo addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// Sends `bytes` on one connection and waits until the server closed after reading them all.
async fn one_stream(addr: SocketAddr, bytes: u64) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let _ = s.set_nodelay(true);
    let buf = vec![0xa5u8; IO_BUF];
    let mut left = bytes;
    while left > 0 {
        let n = (left as usize).min(buf.len());
        s.write_all(&buf[..n]).await.expect("write");
        left -= n as u64;
    }
    s.shutdown().await.expect("shutdown");
    let mut b = [0u8; 16];
    while s.read(&mut b).await.map(|n| n > 0).unwrap_or(false) {}
}

/// Context switches (voluntary + involuntary) of this process's proxy threads so far, from
/// /proc/self/task/*/status: each voluntary one is a park and a later wake-up.
fn proxy_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut n = 0;
    for t in tasks.flatten() {
        let dir = t.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.starts_with("proxy") {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        n += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    n
}

/// CPU seconds used so far by this process's threads, split into (proxy runtime, the rest),
/// from /proc/self/task/*/stat (utime + stime, USER_HZ = 100).
fn cpu_seconds() -> (f64, f64) {
    let (mut proxy, mut rest) = (0u64, 0u64);
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0.0, 0.0);
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        let fields: Vec<&str> = stat
            .rfind(')')
            .map_or("", |i| &stat[i + 1..])
            .split_whitespace()
            .collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
            .sum();
        if comm.starts_with("proxy") {
            proxy += ticks;
        } else {
            rest += ticks;
        }
    }
    (proxy as f64 / 100.0, rest as f64 / 100.0)
}

/// One side of a comparison: best MiB/s and CPU seconds per GiB (proxy threads, the rest).
#[derive(Default)]
struct Side {
    best: f64,
    cpu_proxy: f64,
    cpu_rest: f64,
    /// Proxy threads' context switches per GiB.
    switches: f64,
}

/// Best of `rounds` (a, b) runs, measured alternately so both see the same machine load, with
/// the CPU each side used per GiB.
fn best_pair(
    load: &Runtime,
    (a, b): (SocketAddr, SocketAddr),
    total: u64,
    streams: u64,
    rounds: usize,
) -> (Side, Side) {
    let (mut x, mut y) = (Side::default(), Side::default());
    let gib = (total * rounds as u64) as f64 / (1024 * MIB) as f64;
    for _ in 0..rounds {
        for (addr, side) in [(a, &mut x), (b, &mut y)] {
            let (p0, r0) = cpu_seconds();
            let s0 = proxy_switches();
            side.best = side
                .best
                .max(load.block_on(throughput(addr, total, streams)));
            let (p1, r1) = cpu_seconds();
            side.cpu_proxy += (p1 - p0) / gib;
            side.cpu_rest += (r1 - r0) / gib;
            side.switches += (proxy_switches() - s0) as f64 / gib;
        }
    }
    (x, y)
}

/// MiB/s for `total` bytes over `streams` parallel connections.
async fn throughput(addr: SocketAddr, total: u64, streams: u64) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| tokio::spawn(one_stream(addr, total / streams)))
        .collect();
    for t in tasks {
        t.await.expect("stream task");
    }
    (total as f64 / MIB as f64) / started.elapsed().as_secs_f64()
}

/// Round-trip times (ns) of `n` 64-byte ping-pongs after a warm-up.
async fn rtt(addr: SocketAddr, n: usize) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 10_000_000_000, 3).expect("histogram");
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let _ = s.set_nodelay(true);
    let msg = [7u8; 64];
    let mut back = [0u8; 64];
    for i in 0..(n + 1_000) {
        let t = Instant::now();
        s.write_all(&msg).await.expect("ping");
        s.read_exact(&mut back).await.expect("pong");
        if i >= 1_000 {
            h.saturating_record(t.elapsed().as_nanos() as u64);
        }
    }
    h
}

struct Proxied {
    addr: SocketAddr,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
}

fn start_proxy(
    rt: &tokio::runtime::Handle,
    upstream: SocketAddr,
    inflight: usize,
    buffer: usize,
    zero_copy: bool,
) -> Proxied {
    rt.block_on(async {
        // Binding needs no driver, so `Handle::block_on` also serves a current-thread runtime
        // whose own thread drives the spawned tasks.
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = l.local_addr().expect("proxy addr");
        let mut cfg = ProxyConfig::new("bench", upstream.to_string());
        cfg.max_inflight_bytes = inflight;
        cfg.buffer_size = buffer;
        cfg.zero_copy = zero_copy;
        let proxy = Proxy::new(cfg);
        let shutdown = CancellationToken::new();
        tokio::spawn(proxy::run(l, proxy.clone(), shutdown.clone()));
        Proxied {
            addr,
            proxy,
            shutdown,
        }
    })
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1_000.0
}

/// The number after `name` on the command line, if any.
fn flag(args: &[String], name: &str) -> Option<usize> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let latency_only = args.iter().any(|a| a == "--latency-only");
    let zero_copy = !args.iter().any(|a| a == "--no-splice");
    let buffer = flag(&args, "--buffer-kib").map_or(64 * 1024, |k| k.max(1) * 1024);
    let total = if quick { 64 * MIB } else { 1024 * MIB };
    let total = flag(&args, "--mib").map_or(total, |m| m.max(1) as u64 * MIB);
    let rtts = if quick { 2_000 } else { 20_000 };
    let rounds = if quick { 1 } else { 3 };
    let load = runtime("load", 2);
    let current = args.iter().any(|a| a == "--proxy-current-thread");
    let workers = flag(&args, "--proxy-threads").unwrap_or(2).max(1);
    let proxy_rt = ProxyRuntime::new(current, workers);
    let proxy_rt = &proxy_rt.handle;
    let (sink, echo) = load.block_on(async { (sink_server().await, echo_server().await) });
    let inflight = ProxyConfig::new("defaults", "-").max_inflight_bytes;
    let p_sink = start_proxy(proxy_rt, sink, inflight, buffer, zero_copy);
    let p_echo = start_proxy(proxy_rt, echo, inflight, buffer, zero_copy);
    let gib = total as f64 / 1024.0 / MIB as f64;
    println!(
        "tearline relay benchmark: loopback, {} cores, proxy buffer {} KiB, {gib:.3} GiB per throughput case, {}, proxy runtime: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        p_sink.proxy.config().buffer_size / 1024,
        if zero_copy {
            "zero-copy on"
        } else {
            "copying path only (--no-splice)"
        },
        if current {
            "one current-thread runtime".to_owned()
        } else {
            format!("multi-thread, {workers} worker(s)")
        }
    );
    println!(
        "{:<26} {:>12} {:>12} {:>8}   goal",
        format!("throughput, best of {rounds}"),
        "direct",
        "proxied",
        "ratio"
    );
    // Warm-up: connections, page faults, allocator.
    best_pair(&load, (sink, p_sink.addr), 64 * MIB, 8, 1);
    let sections: &[(u64, &str)] = if latency_only {
        &[]
    } else {
        &[(1, "≥ 0.80"), (8, ""), (64, "")]
    };
    for &(streams, goal) in sections {
        let (ds, ps) = best_pair(&load, (sink, p_sink.addr), total, streams, rounds);
        let (d, p) = (ds.best, ps.best);
        println!(
            "{:<26} {:>8.0} MiB/s {:>6.0} MiB/s {:>8.2}   {goal}",
            format!("{streams} stream(s)"),
            d,
            p,
            p / d
        );
        let (dc, pc) = (ds.cpu_proxy + ds.cpu_rest, ps.cpu_proxy + ps.cpu_rest);
        println!(
            "{:<26} CPU s/GiB: direct {dc:.2}, proxied {pc:.2} (proxy threads {:.2}, {:.0} context switches/GiB); CPU-bound ratio {:.2}",
            "",
            ps.cpu_proxy,
            ps.switches,
            if pc > 0.0 { dc / pc } else { 0.0 }
        );
    }
    let rtts = if latency_only { 0 } else { rtts };
    let hd = load.block_on(rtt(echo, rtts));
    let (c0, s0) = (cpu_seconds().0, proxy_switches());
    let hp = load.block_on(rtt(p_echo.addr, rtts));
    let (c1, s1) = (cpu_seconds().0, proxy_switches());
    if !latency_only {
        let per = (rtts + 1_000) as f64;
        println!(
            "echo round trip, 64 B, {rtts} round trips (µs); proxy threads per round trip: {:.1} µs CPU, {:.2} context switches:",
            (c1 - c0) * 1e6 / per,
            (s1 - s0) as f64 / per
        );
    }
    let quantiles: &[(f64, &str, f64)] = if latency_only {
        &[]
    } else {
        &[(0.5, "p50", 20.0), (0.99, "p99", 100.0)]
    };
    for &(q, name, goal) in quantiles {
        let (d, p) = (hd.value_at_quantile(q), hp.value_at_quantile(q));
        println!(
            "  {name}: direct {:>7.1}   proxied {:>7.1}   added {:>7.1}   goal added ≤ {goal}",
            us(d),
            us(p),
            us(p.saturating_sub(d))
        );
    }
    // Through latency, with the default budgets (the queue must hold bandwidth × latency:
    // throughput ≤ max_inflight_bytes / latency); the peak of `bytes_buffered` is sampled.
    let p_lat = start_proxy(proxy_rt, sink, inflight, buffer, zero_copy);
    p_lat
        .proxy
        .set_faults(vec![Arc::new(LatencyFactory(Duration::from_millis(100)))]);
    let stats = p_lat.proxy.clone();
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let on = sampling.clone();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0u64;
        while on.load(std::sync::atomic::Ordering::Relaxed) {
            peak = peak.max(stats.stats().bytes_buffered());
            std::thread::sleep(Duration::from_millis(5));
        }
        peak
    });
    let (base, lat) = best_pair(&load, (p_sink.addr, p_lat.addr), total, 1, rounds);
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().unwrap_or(0);
    let (base, lat) = (base.best, lat.best);
    let cfg = p_lat.proxy.config();
    println!(
        "through 100 ms latency (client→server, default budgets: {} MiB per direction, {} MiB per proxy): no fault {base:.0} MiB/s, latency {lat:.0} MiB/s, ratio {:.2}   goal ≥ 0.50",
        cfg.max_inflight_bytes / MIB as usize,
        cfg.max_buffered_bytes / MIB,
        lat / base
    );
    println!(
        "  peak bytes_buffered during the latency runs: {:.1} MiB",
        peak as f64 / MIB as f64
    );
    let residence = p_sink.proxy.stats().snapshot().residence_us;
    println!(
        "proxy residence time (no fault, µs): p50 {} p99 {} max {}",
        residence.value_at_quantile(0.5),
        residence.value_at_quantile(0.99),
        residence.max()
    );
    for p in [p_sink, p_echo, p_lat] {
        p.shutdown.cancel();
    }
}

/// The proxy's runtime: multi-thread with `workers` threads, or one current-thread runtime
/// driven by its own thread (named `proxy-ct`, so its CPU counts as the proxy's).
struct ProxyRuntime {
    handle: tokio::runtime::Handle,
    _rt: Option<Runtime>,
    _stop: Option<std::sync::mpsc::Sender<()>>,
}

impl ProxyRuntime {
    fn new(current: bool, workers: usize) -> Self {
        if !current {
            let rt = runtime("proxy", workers);
            return ProxyRuntime {
                handle: rt.handle().clone(),
                _rt: Some(rt),
                _stop: None,
            };
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("proxy-ct".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                tx.send(rt.handle().clone()).expect("send handle");
                // Drive the proxy's tasks until main drops the sender.
                rt.block_on(async {
                    let _ = tokio::task::spawn_blocking(move || stopped.recv()).await;
                });
            })
            .expect("proxy thread");
        ProxyRuntime {
            handle: rx.recv().expect("proxy runtime handle"),
            _rt: None,
            _stop: Some(stop),
        }
    }
}
