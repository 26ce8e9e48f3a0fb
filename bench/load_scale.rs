//! Scale benchmark of the load client: N concurrent sessions against the in-process lab
//! server, closed loop, the `blob` tool. The lab and the client run on separate runtimes
//! whose threads are named, so the client's own CPU time is read from
//! `/proc/self/task/*/{comm,stat}` apart from the server's.
//!
//! Prints, per run: calls/s, events/s, the client's CPU share (CPU seconds per wall second,
//! 1.0 = one core), CPU µs per event and the lab's CPU share; then ratios of the large run against a 10-session
//! baseline measured in the same process. Linux only (reads /proc).
//!
//! Run: `cargo bench --bench load_scale` (optional env: SESSIONS=1000 SECS=10 SIZE=16384).

use std::time::{Duration, Instant};

use tearline::lab::{LabConfig, serve};
use tearline::load::{self, LoadConfig, Stop, Target};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Clock ticks per second of /proc stat times (USER_HZ, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds (user + system) of this process's threads whose name starts with `prefix`.
fn cpu_of(prefix: &str) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let mut ticks = 0u64;
    for task in dir.flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !name.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        // Fields after the `(comm)`: state is field 3; utime, stime are fields 14 and 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let get = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        ticks += get(11) + get(12);
    }
    ticks as f64 / TICKS
}

struct Figures {
    sessions: usize,
    calls_per_s: f64,
    events_per_s: f64,
    cpu_share: f64,
    cpu_us_per_event: f64,
    lab_cpu_share: f64,
    ok: u64,
    calls: u64,
    p99_call_ms: f64,
}

fn run_once(target: &Target, sessions: usize, secs: u64, size: u64) -> Figures {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tl-load")
        .enable_all()
        .build()
        .expect("client runtime");
    let mut cfg = LoadConfig::new(
        target.clone(),
        "blob",
        serde_json::json!({"size": size, "lines": 3}),
    );
    cfg.sessions = sessions;
    cfg.stop = Stop::Duration(Duration::from_secs(secs));
    cfg.connect_timeout = Duration::from_secs(10);
    let cpu0 = cpu_of("tl-load");
    let lab0 = cpu_of("tl-lab");
    let t0 = Instant::now();
    let outcome = rt
        .block_on(load::run(cfg, CancellationToken::new()))
        .expect("load run");
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_of("tl-load") - cpu0;
    let lab_cpu = cpu_of("tl-lab") - lab0;
    drop(rt);
    let c = outcome.counters;
    Figures {
        sessions,
        calls_per_s: c.calls as f64 / wall,
        events_per_s: c.events as f64 / wall,
        cpu_share: cpu / wall,
        cpu_us_per_event: cpu * 1e6 / (c.events.max(1) as f64),
        lab_cpu_share: lab_cpu / wall,
        ok: c.ok,
        calls: c.calls,
        p99_call_ms: outcome.histograms["call"].value_at_quantile(0.99) as f64 / 1000.0,
    }
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let sessions = env_or("SESSIONS", 1000) as usize;
    let secs = env_or("SECS", 10);
    let size = env_or("SIZE", 16 * 1024);
    let lab_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("tl-lab")
        .enable_all()
        .build()
        .expect("lab runtime");
    let listener = lab_rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind lab");
    let port = listener.local_addr().expect("lab addr").port();
    let shutdown = CancellationToken::new();
    let lab = lab_rt.spawn(serve(listener, LabConfig::default(), shutdown.clone()));
    let target = Target::parse(&format!("http://127.0.0.1:{port}/mcp")).expect("target");

    let base = run_once(&target, 10, secs.min(5), size);
    let big = run_once(&target, sessions, secs, size);
    println!("load_scale: blob size={size} lines=3, closed loop, lab in-process (own runtime)");
    println!(
        "{:>9} {:>10} {:>11} {:>10} {:>12} {:>10} {:>12} {:>12}",
        "sessions",
        "calls/s",
        "events/s",
        "cpu-share",
        "cpu-us/event",
        "lab-cpu",
        "ok/calls",
        "p99-call-ms"
    );
    for f in [&base, &big] {
        println!(
            "{:>9} {:>10.0} {:>11.0} {:>10.2} {:>12.1} {:>10.2} {:>12} {:>12.1}",
            f.sessions,
            f.calls_per_s,
            f.events_per_s,
            f.cpu_share,
            f.cpu_us_per_event,
            f.lab_cpu_share,
            format!("{}/{}", f.ok, f.calls),
            f.p99_call_ms
        );
    }
    println!(
        "ratio {}/{} sessions: events/s x{:.2}, cpu-us/event x{:.2}",
        big.sessions,
        base.sessions,
        big.events_per_s / base.events_per_s.max(1e-9),
        big.cpu_us_per_event / base.cpu_us_per_event.max(1e-9)
    );
    shutdown.cancel();
    let _ = lab_rt.block_on(lab);
}
