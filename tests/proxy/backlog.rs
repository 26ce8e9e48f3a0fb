//! The proxy's listen backlog is as deep as the kernel allows, not tokio's 1,024: clients
//! beyond the accept loop (a burst it has not accepted yet) wait in the queue instead of having
//! their SYNs dropped. (It holds ~1,300 sockets.)

use std::time::Duration;

use crate::common::proxy::*;
use tearline::proxy::{self, ProxyConfig, ProxySpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Clients queued at once: more than tokio's default backlog (1,024) holds.
const QUEUED: usize = 1_300;

fn read_number(path: &str, field: usize) -> Option<usize> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or(text.lines().next()?);
    line.split_whitespace().nth(field)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_beyond_a_thousand_wait_in_the_backlog_until_the_proxy_accepts() {
    let somaxconn = read_number("/proc/sys/net/core/somaxconn", 0).unwrap_or(0);
    let nofile = read_number("/proc/self/limits", 3).unwrap_or(0);
    if somaxconn <= QUEUED || nofile < QUEUED + 200 {
        // The kernel caps every backlog at somaxconn: no deeper queue can be shown here.
        eprintln!("skipped: net.core.somaxconn {somaxconn}, RLIMIT_NOFILE {nofile}");
        return;
    }
    timeout(Duration::from_secs(60), async {
        let echo = echo_server().await;
        let mut config = ProxyConfig::new("backlog", echo.to_string());
        config.drain_timeout = Duration::from_millis(200);
        let (listener, p) = proxy::bind(ProxySpec {
            listen: "127.0.0.1:0".parse().unwrap(),
            config,
            faults: Vec::new(),
        })
        .await
        .unwrap();
        let addr = listener.local_addr().unwrap();
        // Nothing accepts yet: every client queues in the backlog. A dropped SYN is
        // retransmitted after 1 s: a connect that takes that long did not fit in the queue.
        let mut queued = Vec::with_capacity(QUEUED);
        for i in 0..QUEUED {
            match timeout(Duration::from_millis(900), TcpStream::connect(addr)).await {
                Ok(Ok(s)) => queued.push(s),
                Ok(Err(e)) => panic!("queued client {i}: connect failed: {e}"),
                Err(_) => panic!(
                    "queued client {i}: no handshake within 900 ms (its SYN was dropped: the \
                     accept queue holds only {i} clients)"
                ),
            }
        }
        let shutdown = proxy::CancellationToken::new();
        let task = tokio::spawn(proxy::run(listener, p.clone(), shutdown.clone()));
        // The accept loop drains the queue: the last queued client is served too.
        let mut last = queued.pop().unwrap();
        last.write_all(b"ok").await.unwrap();
        let mut b = [0u8; 2];
        last.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"ok", "the last queued client was served");
        drop(queued);
        shutdown.cancel();
        let _ = task.await;
    })
    .await
    .expect("the test took over 60 s");
}
