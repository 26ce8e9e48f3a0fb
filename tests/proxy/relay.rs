//! The relay over real loopback sockets: byte-exactness, half-close, refused upstreams,
//! shutdown drain and the slow-reader memory bound.

use crate::common;
use std::time::Duration;

use crate::common::proxy::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

const MIB: u64 = 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_256_mib_each_way_at_once_byte_exact() {
    timeout(Duration::from_secs(120), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |_| {}).await;
        let s = TcpStream::connect(p.addr).await.unwrap();
        let (mut r, mut w) = s.into_split();
        let total = 256 * MIB;
        let writer = tokio::spawn(async move {
            let sum = send_random(&mut w, total, 7, 200_000).await.unwrap();
            w.shutdown().await.unwrap();
            sum
        });
        let reader = tokio::spawn(async move { recv_all(&mut r, 11).await.unwrap() });
        let sent = writer.await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got.len(), total);
        assert_eq!(sent, got, "echoed stream differs from the sent one");
        let snap = p.proxy.stats().snapshot();
        assert_eq!(snap.bytes_upstream, total);
        assert_eq!(snap.bytes_downstream, total);
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
    })
    .await
    .unwrap();
}

/// One side shuts down its write half; the other still sends 10 MiB, all of which arrives.
async fn half_close_case(client_closes_first: bool) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |_| {}).await;
    let client = TcpStream::connect(p.addr).await.unwrap();
    let server = accepted.recv().await.unwrap();
    let (mut closer, mut talker) = if client_closes_first {
        (client, server)
    } else {
        (server, client)
    };
    closer.write_all(b"bye").await.unwrap();
    closer.shutdown().await.unwrap();
    // The talker sees the closer's bytes, then EOF.
    let mut got = Vec::new();
    talker.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"bye");
    // …and can still send 10 MiB the other way.
    let total = 10 * MIB;
    let (mut tr, mut tw) = talker.into_split();
    let send = tokio::spawn(async move {
        let s = send_random(&mut tw, total, 3, 65_536).await.unwrap();
        tw.shutdown().await.unwrap();
        let _ = tr.read(&mut [0u8; 1]).await;
        s
    });
    let received = recv_all(&mut closer, 5).await.unwrap();
    let sent = send.await.unwrap();
    assert_eq!(received.len(), total);
    assert_eq!(received, sent);
}

#[tokio::test]
async fn half_close_from_client_is_propagated() {
    timeout(Duration::from_secs(30), half_close_case(true))
        .await
        .unwrap();
}

#[tokio::test]
async fn half_close_from_server_is_propagated() {
    timeout(Duration::from_secs(30), half_close_case(false))
        .await
        .unwrap();
}

/// Toxiproxy closes the client of an unreachable upstream with FIN (`client.Close()`); a client
/// that probes "is the proxy up" by dialing and reading must see an orderly end, not a reset —
/// also when it sent bytes first (closing a socket with unread bytes would send RST).
#[tokio::test]
async fn refused_upstream_closes_client_with_fin_at_once_and_proxy_keeps_serving() {
    timeout(Duration::from_secs(10), async {
        // A port that refuses: bind, take the address, close.
        let dead = {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap()
        };
        // "At once": the client is closed long before the connect timeout (and the test's).
        let p = start_proxy(dead, |c| c.connect_timeout = Duration::from_secs(60)).await;
        for i in 0..3 {
            let mut c = TcpStream::connect(p.addr).await.unwrap();
            if i > 0 {
                c.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
            }
            let (bytes, err) = read_until_end(&mut c).await;
            assert!(bytes.is_empty());
            assert_eq!(err, None, "connection {i}: FIN expected, not a reset");
        }
        assert_eq!(p.proxy.stats().snapshot().connections_refused, 3);
        // The same proxy serves once the upstream exists.
        p.proxy.set_upstream(echo_server().await.to_string());
        let mut c = TcpStream::connect(p.addr).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn shutdown_stops_accepting_and_ends_after_connections_drain() {
    timeout(Duration::from_secs(10), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |c| c.drain_timeout = Duration::from_secs(5)).await;
        let mut open = TcpStream::connect(p.addr).await.unwrap();
        open.write_all(b"a").await.unwrap();
        let mut one = [0u8; 1];
        open.read_exact(&mut one).await.unwrap();
        p.shutdown.cancel();
        // New connections are no longer accepted (the listener is closed).
        let refused = async {
            loop {
                match TcpStream::connect(p.addr).await {
                    Err(_) => break,
                    Ok(mut c) => {
                        // Accepted by the backlog before the close: must not be served.
                        let (b, _) = read_until_end(&mut c).await;
                        assert!(b.is_empty());
                        tokio::task::yield_now().await;
                    }
                }
            }
        };
        timeout(Duration::from_secs(2), refused).await.unwrap();
        // The open connection still works while draining.
        open.write_all(b"b").await.unwrap();
        open.read_exact(&mut one).await.unwrap();
        assert_eq!(&one, b"b");
        assert!(
            !p.task.is_finished(),
            "run ended before the connection drained"
        );
        open.shutdown().await.unwrap();
        let (rest, err) = read_until_end(&mut open).await;
        assert!(rest.is_empty() && err.is_none());
        p.task.await.unwrap().unwrap();
        assert_eq!(p.proxy.stats().connections_open(), 0);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn shutdown_resets_connections_left_after_the_drain_timeout() {
    timeout(Duration::from_secs(10), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |c| c.drain_timeout = Duration::from_millis(200)).await;
        let mut open = TcpStream::connect(p.addr).await.unwrap();
        open.write_all(b"a").await.unwrap();
        let mut one = [0u8; 1];
        open.read_exact(&mut one).await.unwrap();
        let started = Instant::now();
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(200));
        let (_, err) = read_until_end(&mut open).await;
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
    })
    .await
    .unwrap();
}

/// A reader taking 1 KiB every 10 ms while the server pushes as fast as it can. Without faults
/// the proxy holds at most one read buffer per direction (64 KiB), because a blocked write stops
/// the pump from reading; with a delaying fault, at most the queue budget plus two chunks.
async fn slow_reader_case(delay: Option<Duration>, bound: u64) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |c| {
        c.max_inflight_bytes = MIB as usize;
        // The zero-copy path holds up to one pipe instead of one read buffer: same bound.
        c.pipe_size = 64 * 1024;
    })
    .await;
    if let Some(d) = delay {
        p.proxy.set_faults(common::proxy::faults::scripted(
            tearline::vocab::Direction::Downstream,
            &[common::proxy::faults::Act::Delay(d)],
        ));
    }
    let mut client = TcpStream::connect(p.addr).await.unwrap();
    let mut server = accepted.recv().await.unwrap();
    let pushed = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let pushed2 = pushed.clone();
    let pusher = tokio::spawn(async move {
        let chunk = vec![0x5a_u8; 64 * 1024];
        while server.write_all(&chunk).await.is_ok() {
            pushed2.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let mut buf = [0u8; 1024];
    let mut read = 0u64;
    let mut peak = 0u64;
    for _ in 0..100 {
        client.read_exact(&mut buf).await.unwrap();
        read += buf.len() as u64;
        peak = peak.max(p.proxy.stats().bytes_buffered());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(peak <= bound, "proxy buffered {peak} bytes, bound {bound}");
    if delay.is_some() {
        assert!(peak >= MIB / 2, "the queue was never used ({peak} bytes)");
    }
    // The server is held back too: it got no further than the kernel buffers allow.
    let pushed = pushed.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        pushed < read + 64 * MIB,
        "server pushed {pushed} bytes for {read} read"
    );
    pusher.abort();
}

#[tokio::test]
async fn slow_reader_keeps_proxy_buffering_within_one_read_buffer() {
    timeout(Duration::from_secs(30), slow_reader_case(None, 64 * 1024))
        .await
        .unwrap();
}

/// The delay is long enough that the queue fills to its 1 MiB budget at any throughput above
/// 5 MB/s: with 1 ms, a loaded machine moving under 512 MB/s never held 512 KiB in the queue,
/// and the "queue was used" check measured the machine's speed, not the relay.
#[tokio::test]
async fn slow_reader_behind_a_delay_keeps_buffering_within_the_queue_budget() {
    let bound = MIB + 2 * 64 * 1024;
    timeout(
        Duration::from_secs(30),
        slow_reader_case(Some(Duration::from_millis(200)), bound),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn upstream_reset_resets_the_client_promptly() {
    timeout(Duration::from_secs(10), async {
        let (server_addr, mut accepted) = accepting_server().await;
        let p = start_proxy(server_addr, |_| {}).await;
        let mut client = TcpStream::connect(p.addr).await.unwrap();
        let server = accepted.recv().await.unwrap();
        client.write_all(b"hello").await.unwrap();
        socket2::SockRef::from(&server)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(server);
        let (got, err) = read_until_end(&mut client).await;
        assert!(got.is_empty());
        // Promptly: within the test's timeout, with the client still open (no idle timer).
        assert_eq!(err, Some(std::io::ErrorKind::ConnectionReset));
    })
    .await
    .unwrap();
}
