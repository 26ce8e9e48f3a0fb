//! 1,000 concurrent connections echo correctly and release every file descriptor.
//! (Its own test binary: the fd count of the process must not see other tests' sockets; its
//! tests run one at a time, through [`SERIAL`].)

#[path = "common/proxy/mod.rs"]
mod proxy_support;

use std::sync::Arc;
use std::time::Duration;

use proxy_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Barrier;
use tokio::time::{Instant, timeout};

/// Held by each test: they count the process's descriptors and need most of them.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_connections_echo_and_release_their_fds() {
    let _serial = SERIAL.lock().await;
    timeout(Duration::from_secs(60), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |_| {}).await;
        // Once the accept loop runs (it holds a spare descriptor for running out of them).
        while p.proxy.listen_addr().is_none() {
            tokio::task::yield_now().await;
        }
        let baseline = open_fds();
        let n = 1_000;
        let all_echoed = Arc::new(Barrier::new(n));
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let addr = p.addr;
            let all_echoed = all_echoed.clone();
            tasks.push(tokio::spawn(async move {
                let mut c = TcpStream::connect(addr).await.unwrap();
                let mut data = vec![0u8; 4096 + i];
                Gen::new(i as u64 + 1).fill(&mut data);
                c.write_all(&data).await.unwrap();
                let mut back = vec![0u8; data.len()];
                c.read_exact(&mut back).await.unwrap();
                assert_eq!(back, data, "connection {i} echoed wrong bytes");
                // Every connection is open at this point.
                all_echoed.wait().await;
                c.shutdown().await.unwrap();
                let (rest, err) = read_until_end(&mut c).await;
                assert!(rest.is_empty() && err.is_none());
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(p.proxy.stats().snapshot().connections_total, n as u64);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let now_open = open_fds();
            if now_open <= baseline && p.proxy.stats().connections_open() == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "fds: {now_open} open, {baseline} before; connections open: {}",
                p.proxy.stats().connections_open()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(p.proxy.stats().bytes_buffered(), 0);
    })
    .await
    .unwrap();
}

/// The load: 4,300 connections through a proxy with the default limit all echo (the
/// old default of 4,096 left the last ones unserved in the backlog, without a word).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_connections_than_the_old_default_limit_all_relay() {
    let _serial = SERIAL.lock().await;
    let n: usize = 4_300;
    // The test process holds the clients, the proxy's two sockets each and the echo server's.
    let need = (n as u64) * 4 + 512;
    let soft = tearline::proxy::fd_limit::raise_to_hard().unwrap_or(u64::MAX);
    assert!(
        soft >= need,
        "this test needs {need} open files (ulimit -n); the hard limit allows {soft}"
    );
    timeout(Duration::from_secs(120), async {
        let echo = echo_server().await;
        // Copying relay: zero-copy pipes would add up to four descriptors a connection, which
        // this process (clients and servers in one) cannot spare; the limit is the same.
        let p = start_proxy(echo, |c| c.zero_copy = false).await;
        assert!(p.proxy.config().max_connections >= n);
        // Opened in bursts of 500 (a listen queue holds net.core.somaxconn, often 4,096),
        // every one kept open until all echoed.
        let mut open = Vec::with_capacity(n);
        for batch in (0..n).collect::<Vec<_>>().chunks(500) {
            let mut tasks = Vec::with_capacity(batch.len());
            for &i in batch {
                let addr = p.addr;
                tasks.push(tokio::spawn(async move {
                    let mut c = TcpStream::connect(addr).await.unwrap();
                    let data = (i as u64).to_le_bytes();
                    c.write_all(&data).await.unwrap();
                    let mut back = [0u8; 8];
                    c.read_exact(&mut back).await.unwrap();
                    assert_eq!(back, data, "connection {i}");
                    c
                }));
            }
            for t in tasks {
                open.push(t.await.unwrap());
            }
        }
        assert_eq!(open.len(), n);
        assert_eq!(p.proxy.stats().connections_open(), n as u64);
        let s = p.proxy.stats().snapshot();
        assert_eq!(
            (s.connections_total, s.connections_over_limit),
            (n as u64, 0)
        );
    })
    .await
    .unwrap();
}
