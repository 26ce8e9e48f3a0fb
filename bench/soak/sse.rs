//! SSE fan-out: many concurrent SSE streams through the proxy's HTTP observer, each carrying
//! events of several MiB (one `data:` line each). Checks: every byte of every stream delivered
//! (length and hash), proxy RSS peak ≤ 200 MB.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Barrier;
use xxhash_rust::xxh3::Xxh3;

use super::common::{self, Args, RssPeak, mib, verdict};

const PIECE: usize = 64 * 1024;

/// The body every stream carries: `events` events of `size` bytes of data each.
struct Body {
    head: Vec<u8>,
    filler: Vec<u8>,
    size: u64,
    events: u64,
}

impl Body {
    fn len(&self) -> u64 {
        self.events * (6 + self.size + 2)
    }
    fn hash(&self) -> u64 {
        let mut h = Xxh3::new();
        for _ in 0..self.events {
            h.update(b"data: ");
            let mut left = self.size;
            while left > 0 {
                let n = left.min(PIECE as u64) as usize;
                h.update(&self.filler[..n]);
                left -= n as u64;
            }
            h.update(b"\n\n");
        }
        h.digest()
    }
}

async fn server(listener: TcpListener, body: Arc<Body>) {
    while let Ok((mut s, _)) = listener.accept().await {
        let body = body.clone();
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            if s.write_all(&body.head).await.is_err() {
                return;
            }
            for _ in 0..body.events {
                if s.write_all(b"data: ").await.is_err() {
                    return;
                }
                let mut left = body.size;
                while left > 0 {
                    let n = left.min(PIECE as u64) as usize;
                    if s.write_all(&body.filler[..n]).await.is_err() {
                        return;
                    }
                    left -= n as u64;
                }
                if s.write_all(b"\n\n").await.is_err() {
                    return;
                }
            }
            let _ = s.shutdown().await;
        });
    }
}

/// Opens a stream, waits for all others to open, reads it to the end: (body bytes, hash).
async fn client(port: u16, head_len: usize, ready: Arc<Barrier>) -> Option<(u64, u64)> {
    let conn = async {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
            .await
            .ok()?;
        Some(s)
    }
    .await;
    // Every stream is open before any is read: they are all in flight at once.
    ready.wait().await;
    let mut s = conn?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut skipped = 0usize;
    let (mut got, mut h) = (0u64, Xxh3::new());
    loop {
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            return Some((got, h.digest()));
        }
        let mut piece = &buf[..n];
        if skipped < head_len {
            let k = (head_len - skipped).min(piece.len());
            skipped += k;
            piece = &piece[k..];
        }
        got += piece.len() as u64;
        h.update(piece);
    }
}

pub async fn run(args: &Args) -> bool {
    let streams = args.num("streams", 10_000, 1_000);
    let event_mib = args.num("event-mib", 4, 4);
    let events = args.num("events", 1, 1);
    println!(
        "== sse fan-out: {streams} concurrent streams × {events} event(s) of {event_mib} MiB, HTTP observer on"
    );
    let mut filler = vec![b'x'; PIECE];
    for (i, b) in filler.iter_mut().enumerate() {
        *b = b"abcdefghijklmnopqrstuvwxyz0123456789{}\":,"[i % 41];
    }
    let body = Arc::new(Body {
        head: b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
            .to_vec(),
        filler,
        size: event_mib * 1024 * 1024,
        events,
    });
    let (want_len, want_hash) = (body.len(), body.hash());
    let head_len = body.head.len();
    // A deep accept queue: every stream's upstream connect arrives at once.
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.bind("127.0.0.1:0".parse().expect("addr"))
        .expect("bind");
    let upstream = sock.listen(8192).expect("listen");
    let up_port = upstream.local_addr().expect("addr").port();
    tokio::spawn(server(upstream, body));
    let (listen, api) = (common::free_port(), common::free_port());
    let max = format!("{}", streams + 16);
    let proxy = common::proxy(
        listen,
        up_port,
        api,
        &["--max-connections", &max, "--connect-timeout", "60s"],
    )
    .await;
    let rss0 = common::proc_stats(proxy.pid()).0;
    let peak = RssPeak::start(proxy.pid());
    let ready = Arc::new(Barrier::new(streams as usize));
    let start = Instant::now();
    let clients: Vec<_> = (0..streams)
        .map(|_| tokio::spawn(client(listen, head_len, ready.clone())))
        .collect();
    let (mut complete, mut bytes, mut empty, mut failed) = (0u64, 0u64, 0u64, 0u64);
    for c in clients {
        match c.await {
            Ok(Some((len, hash))) => {
                bytes += len;
                if len == want_len && hash == want_hash {
                    complete += 1;
                } else if len == 0 {
                    empty += 1;
                }
            }
            _ => failed += 1,
        }
    }
    println!("  streams with no body: {empty}; connect/read errors: {failed}");
    let secs = start.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss1, fds, _) = common::proc_stats(proxy.pid());
    let events_seen = common::metric(api, "tearline_proxy_bytes_total").await;
    println!(
        "  {complete}/{streams} streams complete, {:.0} MiB delivered in {secs:.1} s ({:.0} MiB/s)",
        bytes as f64 / 1048576.0,
        bytes as f64 / 1048576.0 / secs
    );
    println!(
        "  proxy RSS start {:.1} MiB, peak {:.1} MiB, end {:.1} MiB; fds at end {fds}; first bytes counter {events_seen}",
        mib(rss0),
        mib(peak.peak()),
        mib(rss1)
    );
    let mut ok = verdict(
        "every byte",
        complete == streams,
        &format!("{complete}/{streams} streams with the full length and hash"),
    );
    ok &= verdict(
        "RSS",
        peak.peak() * 1024 <= 200_000_000,
        &format!(
            "peak {:.1} MB (limit 200 MB)",
            peak.peak() as f64 * 1024.0 / 1e6
        ),
    );
    ok
}
