//! The pumps' read buffers follow the bytes in flight, not the connections open: an idle
//! direction holds none, and many busy directions share the proxy's read budget — with every
//! byte still delivered in order.

use std::time::Duration;

use crate::common::proxy::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// Polls `cond` every 5 ms until it holds or `limit` passes; whether it held.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cond()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_open_connections_hold_no_read_buffer() {
    timeout(Duration::from_secs(30), async {
        let echo = echo_server().await;
        // The copying path (the zero-copy one reads into no user-space buffer at all).
        let p = start_proxy(echo, |c| c.zero_copy = false).await;
        let mut conns = Vec::new();
        for i in 0..20u8 {
            let mut s = TcpStream::connect(p.addr).await.unwrap();
            s.write_all(&[i; 100]).await.unwrap();
            let mut back = [0u8; 100];
            s.read_exact(&mut back).await.unwrap();
            assert_eq!(back, [i; 100]);
            conns.push(s);
        }
        // A buffer is given back once its chunk is written; the client may see the echo first.
        let idle = eventually(Duration::from_secs(5), || p.proxy.read_buffers().held == 0).await;
        let g = p.proxy.read_buffers();
        assert!(idle, "20 idle connections still hold read buffers: {g:?}");
        assert_eq!(g.bytes, 0);
        assert_eq!(p.proxy.stats().connections_open(), 20);
        // Every connection still relays: buffers are taken again when bytes arrive.
        for (i, s) in conns.iter_mut().enumerate() {
            let msg = vec![i as u8 ^ 0xff; 70_000];
            s.write_all(&msg).await.unwrap();
            let mut back = vec![0u8; msg.len()];
            s.read_exact(&mut back).await.unwrap();
            assert!(back == msg, "connection {i} echoed other bytes");
        }
        drop(conns);
        let back = eventually(Duration::from_secs(5), || {
            p.proxy.stats().connections_open() == 0 && p.proxy.read_buffers().held == 0
        })
        .await;
        assert!(back, "after close: {:?}", p.proxy.read_buffers());
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direction_that_ended_holds_no_read_buffer_while_the_other_stays_open() {
    timeout(Duration::from_secs(30), async {
        // An upstream that reads what it gets and keeps every connection open after the
        // client's EOF (a server still streaming its answer, say).
        let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let up_addr = upstream.local_addr().unwrap();
        let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel();
        let holder = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut s, _)) = upstream.accept().await {
                let tx = got_tx.clone();
                held.push(tokio::spawn(async move {
                    let mut all = Vec::new();
                    let _ = s.read_to_end(&mut all).await;
                    let _ = tx.send(all.len());
                    // Held open until the test ends.
                    std::future::pending::<()>().await;
                    drop(s);
                }));
            }
        });
        let p = start_proxy(up_addr, |c| c.zero_copy = false).await;
        let mut clients = Vec::new();
        for i in 0..10u8 {
            let mut s = TcpStream::connect(p.addr).await.unwrap();
            s.write_all(&[i; 1000]).await.unwrap();
            s.shutdown().await.unwrap();
            clients.push(s);
        }
        for _ in 0..10 {
            assert_eq!(
                got_rx.recv().await,
                Some(1000),
                "the upstream got the bytes and EOF"
            );
        }
        let idle = eventually(Duration::from_secs(5), || p.proxy.read_buffers().held == 0).await;
        assert!(
            idle,
            "10 connections whose upstream direction ended still hold read buffers: {:?}",
            p.proxy.read_buffers()
        );
        assert_eq!(p.proxy.stats().connections_open(), 10);
        holder.abort();
        p.shutdown.cancel();
        drop(clients);
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_directions_share_the_read_budget_and_every_byte_arrives() {
    const CONNS: u64 = 16;
    const BUDGET: usize = 64 * 1024;
    timeout(Duration::from_secs(60), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |c| {
            c.zero_copy = false;
            c.buffer_size = 64 * 1024;
            c.read_budget = BUDGET;
        })
        .await;
        let mut tasks = Vec::new();
        for i in 0..CONNS {
            let addr = p.addr;
            tasks.push(tokio::spawn(async move {
                let s = TcpStream::connect(addr).await.unwrap();
                let (mut r, mut w) = s.into_split();
                let writer = tokio::spawn(async move {
                    let sum = send_random(&mut w, 4 << 20, 100 + i, 100_000)
                        .await
                        .unwrap();
                    w.shutdown().await.unwrap();
                    sum
                });
                let got = recv_all(&mut r, 200 + i).await.unwrap();
                (writer.await.unwrap(), got)
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let (sent, got) = t.await.unwrap();
            assert_eq!(got.len(), 4 << 20, "connection {i} short");
            assert_eq!(sent, got, "connection {i} echoed other bytes");
        }
        let g = p.proxy.read_buffers();
        // 32 directions at 64 KiB each would be 2 MiB; shared, the lent bytes stay within the
        // budget plus the 4 KiB floor per holder (plus one share for takes racing on the other
        // core).
        let bound = BUDGET + 2 * CONNS as usize * 4096 + BUDGET;
        assert!(
            g.peak_bytes <= bound,
            "peak {} > {bound}: {g:?}",
            g.peak_bytes
        );
        assert!(g.peak_bytes > 0, "the copying path lent no buffer at all");
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
        assert_eq!(p.proxy.read_buffers().held, 0, "a pump kept its buffer");
    })
    .await
    .unwrap();
}
