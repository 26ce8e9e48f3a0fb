//! Churn: connections opened and closed (FIN) or reset (RST) through the proxy as fast as the
//! machine allows, half each. Checks: open connections return to 0, and the proxy's fds,
//! threads and RSS return to their baseline (fds and threads exactly; RSS within 16 MiB).

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
    println!("== churn: {n} connections, {parallel} at a time, half closed (FIN), half reset (RST)");
    let upstream = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let up_port = upstream.local_addr().expect("addr").port();
    tokio::spawn(sink(upstream));
    let (listen, api) = (common::free_port(), common::free_port());
    let proxy = common::proxy(listen, up_port, api, &[]).await;
    let failed = Arc::new(AtomicU64::new(0));
    // Warm-up: the runtime's threads and allocator pools exist before the baseline.
    churn(listen, 2_000.min(n), parallel, failed.clone()).await;
    settle(api).await;
    let (rss0, fds0, thr0) = common::proc_stats(proxy.pid());
    let peak = RssPeak::start(proxy.pid());
    let start = Instant::now();
    churn(listen, n, parallel, failed.clone()).await;
    let secs = start.elapsed().as_secs_f64();
    let open = settle(api).await;
    let (rss1, fds1, thr1) = common::proc_stats(proxy.pid());
    let total = common::metric(api, "tearline_proxy_connections_total").await;
    println!(
        "  {n} connections in {secs:.1} s ({:.0}/s), {} failed to connect; proxy counted {total}",
        n as f64 / secs,
        failed.load(Ordering::Relaxed)
    );
    println!("  baseline: fds {fds0}, threads {thr0}, RSS {:.1} MiB", mib(rss0));
    println!(
        "  after:    fds {fds1}, threads {thr1}, RSS {:.1} MiB (peak {:.1} MiB), open connections {open}",
        mib(rss1),
        mib(peak.peak())
    );
    let mut ok = verdict("open connections", open == 0.0, &format!("{open} at the end"));
    ok &= verdict("fds", fds1 <= fds0, &format!("{fds0} -> {fds1}"));
    ok &= verdict("threads", thr1 <= thr0, &format!("{thr0} -> {thr1}"));
    ok &= verdict(
        "RSS",
        rss1 <= rss0 + 16 * 1024,
        &format!("{:.1} -> {:.1} MiB (allowed +16 MiB)", mib(rss0), mib(rss1)),
    );
    ok
}
