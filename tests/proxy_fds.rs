//! 1,000 concurrent connections echo correctly and release every file descriptor.
//! (Its own test binary: the fd count of the process must not see other tests' sockets.)

#[path = "common/proxy/mod.rs"]
mod proxy_support;

use std::sync::Arc;
use std::time::Duration;

use proxy_support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Barrier;
use tokio::time::{Instant, timeout};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_connections_echo_and_release_their_fds() {
    timeout(Duration::from_secs(60), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |_| {}).await;
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
