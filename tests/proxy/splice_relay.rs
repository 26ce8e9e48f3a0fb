//! The zero-copy (splice) path over real loopback sockets: byte-exactness, and the same
//! half-close, RST and slow-reader behaviour as the copying path (each case runs on both).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::common::proxy::*;
use tearline::wire::ObservationSink;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const MIB: u64 = 1024 * 1024;

/// The two relay paths: zero-copy on (splice) or off (copying pump).
const PATHS: [bool; 2] = [true, false];

fn path_name(zero_copy: bool) -> &'static str {
    if zero_copy { "splice" } else { "copy" }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn splice_relays_256_mib_each_way_at_once_byte_exact() {
    timeout(Duration::from_secs(120), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |_| {}).await;
        let s = TcpStream::connect(p.addr).await.unwrap();
        let (mut r, mut w) = s.into_split();
        let total = 256 * MIB;
        let writer = tokio::spawn(async move {
            let sum = send_random(&mut w, total, 21, 200_000).await.unwrap();
            w.shutdown().await.unwrap();
            sum
        });
        let reader = tokio::spawn(async move { recv_all(&mut r, 23).await.unwrap() });
        let sent = writer.await.unwrap();
        let got = reader.await.unwrap();
        assert_eq!(got.len(), total);
        assert_eq!(sent, got, "echoed stream differs from the sent one");
        let snap = p.proxy.stats().snapshot();
        assert_eq!(snap.bytes_upstream, total);
        assert_eq!(snap.bytes_downstream, total);
        assert_eq!(
            snap.bytes_spliced,
            2 * total,
            "with no fault and byte mode every byte goes zero-copy"
        );
        assert_eq!(snap.bytes_buffered, 0);
        p.shutdown.cancel();
        p.task.await.unwrap().unwrap();
    })
    .await
    .unwrap();
}

/// Non-HTTP bytes under the HTTP observer: the observer declares the stream opaque after its
/// first bytes, and the rest of the stream goes zero-copy, byte-exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opaque_stream_under_the_http_observer_goes_zero_copy() {
    struct Nothing;
    impl ObservationSink for Nothing {
        fn record(&self, _: tearline::wire::Observation) {}
    }
    timeout(Duration::from_secs(60), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |_| {}).await;
        let sink: Arc<dyn ObservationSink> = Arc::new(Nothing);
        p.proxy.set_observer_factory(Arc::new(move |conn| {
            tearline::wire::http1::observer_pair(conn, sink.clone())
        }));
        let s = TcpStream::connect(p.addr).await.unwrap();
        let (mut r, mut w) = s.into_split();
        let total = 32 * MIB;
        let writer = tokio::spawn(async move {
            // A TLS ClientHello record header: not HTTP/1.x.
            w.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).await.unwrap();
            let mut sum = Sum::default();
            sum.feed(&[0x16, 0x03, 0x01, 0x02, 0x00]);
            let rest = send_random(&mut w, total, 5, 100_000).await.unwrap();
            w.shutdown().await.unwrap();
            (sum, rest)
        });
        let mut head = [0u8; 5];
        r.read_exact(&mut head).await.unwrap();
        assert_eq!(head, [0x16, 0x03, 0x01, 0x02, 0x00]);
        let got = recv_all(&mut r, 9).await.unwrap();
        let (_, sent) = writer.await.unwrap();
        assert_eq!(got, sent, "the stream after the first bytes differs");
        // Until the observer has seen enough bytes to call the stream opaque (the 5-byte record
        // header alone may arrive in a read of its own and leave the head undecided), a few
        // chunks per direction take the copying path; how many depends on how reads fall.
        // Everything after them is spliced: at most 4 read buffers per direction are copied.
        let spliced = p.proxy.stats().bytes_spliced();
        assert!(
            spliced >= 2 * total - 2 * 4 * 64 * 1024,
            "only {spliced} of {} bytes went zero-copy",
            2 * total
        );
    })
    .await
    .unwrap();
}

/// One side shuts down its write half; the other still sends 4 MiB, all of which arrives.
async fn half_close_case(zero_copy: bool, client_closes_first: bool) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |c| c.zero_copy = zero_copy).await;
    let client = TcpStream::connect(p.addr).await.unwrap();
    let server = accepted.recv().await.unwrap();
    let (mut closer, mut talker) = if client_closes_first {
        (client, server)
    } else {
        (server, client)
    };
    closer.write_all(b"bye").await.unwrap();
    closer.shutdown().await.unwrap();
    let mut got = Vec::new();
    talker.read_to_end(&mut got).await.unwrap();
    assert_eq!(got, b"bye");
    let total = 4 * MIB;
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
    let spliced = p.proxy.stats().bytes_spliced();
    assert_eq!(
        spliced > 0,
        zero_copy,
        "{} path: {spliced} bytes spliced",
        path_name(zero_copy)
    );
}

#[tokio::test]
async fn half_close_is_propagated_the_same_on_both_paths() {
    for zero_copy in PATHS {
        for client_first in [true, false] {
            timeout(
                Duration::from_secs(30),
                half_close_case(zero_copy, client_first),
            )
            .await
            .unwrap();
        }
    }
}

/// The `resetter` side sends 256 KiB, which the other side reads whole; then it closes with
/// RST. The other side's next read fails with a reset, promptly.
async fn reset_case(zero_copy: bool, server_resets: bool) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |c| c.zero_copy = zero_copy).await;
    let client = TcpStream::connect(p.addr).await.unwrap();
    let server = accepted.recv().await.unwrap();
    let (mut resetter, mut other) = if server_resets {
        (server, client)
    } else {
        (client, server)
    };
    let mut data = vec![0u8; 256 * 1024];
    Gen::new(77).fill(&mut data);
    resetter.write_all(&data).await.unwrap();
    let mut got = vec![0u8; data.len()];
    other.read_exact(&mut got).await.unwrap();
    assert!(
        got == data,
        "{} path: bytes before the RST differ",
        path_name(zero_copy)
    );
    socket2::SockRef::from(&resetter)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    drop(resetter);
    let (rest, err) = timeout(Duration::from_secs(5), read_until_end(&mut other))
        .await
        .expect("the RST reached the other side within 5 s");
    assert!(rest.is_empty(), "bytes after the RST: {}", rest.len());
    assert_eq!(
        err,
        Some(std::io::ErrorKind::ConnectionReset),
        "{} path, server resets: {server_resets}",
        path_name(zero_copy)
    );
    assert_eq!(p.proxy.stats().bytes_spliced() > 0, zero_copy);
}

#[tokio::test]
async fn a_reset_is_passed_on_as_a_reset_on_both_paths() {
    for zero_copy in PATHS {
        for server_resets in [true, false] {
            timeout(
                Duration::from_secs(30),
                reset_case(zero_copy, server_resets),
            )
            .await
            .unwrap();
        }
    }
}

/// A reader taking 1 KiB every 10 ms while the server pushes as fast as it can: the proxy holds
/// at most one buffer (the 64 KiB read buffer, or the pipe, asked for at 256 KiB) and the
/// server is held back by the kernel buffers, on both paths.
async fn slow_reader_case(zero_copy: bool) {
    let (server_addr, mut accepted) = accepting_server().await;
    let p = start_proxy(server_addr, |c| {
        c.zero_copy = zero_copy;
        c.pipe_size = 256 * 1024;
    })
    .await;
    let mut client = TcpStream::connect(p.addr).await.unwrap();
    let mut server = accepted.recv().await.unwrap();
    let pushed = Arc::new(AtomicU64::new(0));
    let pushed2 = pushed.clone();
    let pusher = tokio::spawn(async move {
        let chunk = vec![0x5a_u8; 64 * 1024];
        while server.write_all(&chunk).await.is_ok() {
            pushed2.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
    });
    let mut buf = [0u8; 1024];
    let mut read = 0u64;
    let mut peak = 0u64;
    for _ in 0..60 {
        client.read_exact(&mut buf).await.unwrap();
        read += buf.len() as u64;
        peak = peak.max(p.proxy.stats().bytes_buffered());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let name = path_name(zero_copy);
    let bound = if zero_copy { 256 * 1024 } else { 64 * 1024 };
    assert!(
        peak <= bound,
        "{name} path buffered {peak} bytes, bound {bound}"
    );
    assert!(peak > 0, "{name} path: the gauge never saw the held bytes");
    let pushed = pushed.load(Ordering::Relaxed);
    assert!(
        pushed < read + 64 * MIB,
        "{name} path: server pushed {pushed} bytes for {read} read"
    );
    assert_eq!(p.proxy.stats().bytes_spliced() > 0, zero_copy);
    pusher.abort();
}

#[tokio::test]
async fn slow_reader_keeps_memory_bounded_on_both_paths() {
    for zero_copy in PATHS {
        timeout(Duration::from_secs(30), slow_reader_case(zero_copy))
            .await
            .unwrap();
    }
}
