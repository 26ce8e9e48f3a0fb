//! Churn: connections opened and closed (FIN) or reset (RST) through the proxy as fast as the
//! machine allows, half each. Checks: open connections return to 0, the proxy's fds, threads
//! and RSS return to their baseline (fds and threads exactly; RSS within 16 MiB), and with the
//! HTTP observer every audit store that follows connections or streams
//! (`tearline_audit_tracked`) is empty after the grace wait, so RSS that stays is not the
//! audit's state. The proxy inherits the environment: allocator settings
//! (`MALLOC_ARENA_MAX`, `MALLOC_TRIM_THRESHOLD_`) reach it from the bench's command line.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket};

use super::common::{self, Args, RssPeak, mib, verdict};

/// Reads each connection to its end (or reset) and drops it.
async fn sink(listener: TcpListener) {
    while let Ok((mut s, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        });
    }
}

async fn churn(port: u16, n: u64, parallel: u64, failed: Arc<AtomicU64>) {
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..parallel)
        .map(|_| {
            let (next, failed) = (next.clone(), failed.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return;
                    }
                    let Ok(sock) = TcpSocket::new_v4() else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
                    let Ok(mut s) = sock.connect(addr).await else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
                    if i % 2 == 1 {
                        // Reset: SO_LINGER 0, then close.
                        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                    } else {
                        let _ = s.shutdown().await;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.await;
    }
}

/// The audit's store gauges from `/metrics` (`store`, entries).
async fn audit_stores(api: u16) -> Vec<(String, f64)> {
    let (_, text) = common::http(api, "GET", "/metrics", "", "").await;
    text.lines()
        .filter_map(|l| l.strip_prefix("tearline_audit_tracked{store=\""))
        .filter_map(|l| {
            let (name, rest) = l.split_once("\"}")?;
            Some((name.to_owned(), rest.trim().parse().ok()?))
        })
        .collect()
}

/// Stores whose entries follow connections and streams (the others hold findings).
fn follows_connections(store: &str) -> bool {
    !matches!(store, "findings" | "loss_keys")
}

async fn settle(api: u16) -> f64 {
    let mut open = f64::NAN;
    for _ in 0..300 {
        open = common::metric(api, "tearline_proxy_connections_open").await;
        if open == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    open
}

pub async fn run(args: &Args) -> bool {
    let n = args.num("conns", 1_000_000, 20_000);
    let parallel = args.num("parallel", 128, 64).max(1);
    println!(
        "== churn: {n} connections, {parallel} at a time, half closed (FIN), half reset (RST), observe {}",
        args.text("observe").unwrap_or("http")
    );
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let up_port = upstream.local_addr().expect("addr").port();
    tokio::spawn(sink(upstream));
    let (listen, api) = (common::free_port(), common::free_port());
    // `--observe bytes` relays without the HTTP observer and the audit (a comparison run).
    let observe = args.text("observe").unwrap_or("http");
    let proxy = common::proxy(listen, up_port, api, &["--observe", observe]).await;
    let failed = Arc::new(AtomicU64::new(0));
    // Warm-up: the runtime's threads and allocator pools exist before the baseline.
    churn(listen, 2_000.min(n), parallel, failed.clone()).await;
    settle(api).await;
    let (rss0, fds0, thr0) = common::proc_stats(proxy.pid());
    println!(
        "  baseline: fds {fds0}, threads {thr0}, RSS {:.1} MiB",
        mib(rss0)
    );
    let peak = RssPeak::start(proxy.pid());
    let rounds = args.num("rounds", 1, 2).max(1);
    // The audit keeps an ended stream for its grace period (60 s) and forgets it at its next
    // sweep; `GET /findings` runs one. Each round waits that out before measuring.
    let grace = args.num("grace-wait", 62, 62);
    let mut after = Vec::new();
    let mut open = f64::NAN;
    let (mut fds1, mut thr1) = (0, 0);
    let mut stores_left = Vec::new();
    for round in 1..=rounds {
        let start = Instant::now();
        churn(listen, n, parallel, failed.clone()).await;
        let secs = start.elapsed().as_secs_f64();
        open = settle(api).await;
        let settled = common::proc_stats(proxy.pid()).0;
        if observe == "http" && grace > 0 {
            tokio::time::sleep(Duration::from_secs(grace)).await;
            let asked = Instant::now();
            let (status, _) = common::http(api, "GET", "/findings", "", "").await;
            println!(
                "  round {round}: GET /findings (runs the sweep) answered {status} in {:.0} ms",
                asked.elapsed().as_secs_f64() * 1e3
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (rss1, f, t) = common::proc_stats(proxy.pid());
        (fds1, thr1) = (f, t);
        after.push(rss1);
        if observe == "http" {
            let stores = audit_stores(api).await;
            let shown: Vec<String> = stores.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!(
                "  round {round}: audit stores after the grace: {}",
                shown.join(", ")
            );
            stores_left = stores
                .into_iter()
                .filter(|(k, v)| follows_connections(k) && *v > 0.0)
                .collect();
        }
        println!(
            "  round {round}: {n} connections in {secs:.1} s ({:.0}/s); open after {open}; \
             RSS settled {:.1} MiB, {grace} s later (after an audit sweep) {:.1} MiB; fds {f}, threads {t}",
            n as f64 / secs,
            mib(settled),
            mib(rss1)
        );
    }
    let total = common::metric(api, "tearline_proxy_connections_total").await;
    println!(
        "  {} failed to connect; proxy counted {total} connections (warm-up included); peak RSS {:.1} MiB",
        failed.load(Ordering::Relaxed),
        mib(peak.peak())
    );
    let first = after[0];
    let last = after[after.len() - 1];
    let mut ok = verdict(
        "open connections",
        open == 0.0,
        &format!("{open} at the end"),
    );
    ok &= verdict("fds", fds1 <= fds0, &format!("{fds0} -> {fds1}"));
    ok &= verdict("threads", thr1 <= thr0, &format!("{thr0} -> {thr1}"));
    if observe == "http" && grace > 0 {
        ok &= verdict(
            "audit stores empty after the grace",
            stores_left.is_empty(),
            &format!("non-empty: {stores_left:?}"),
        );
    }
    ok &= verdict(
        "RSS flat across rounds",
        last <= first + 16 * 1024,
        &format!(
            "baseline {:.1} MiB, after round 1 {:.1} MiB, after round {rounds} {:.1} MiB (allowed: round 1 + 16 MiB)",
            mib(rss0),
            mib(first),
            mib(last)
        ),
    );
    println!(
        "  RSS vs the pre-churn baseline: {:+.1} MiB",
        mib(last) - mib(rss0)
    );
    ok
}
