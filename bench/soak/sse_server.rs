//! The SSE fan-out's upstream server, run as a child process (`soak sse-server`, hidden) so
//! that the bench process and the server each hold one fd per stream: with the client sockets
//! and the server sockets in one process, that process (two fds per stream) and not the proxy
//! was the limit under `RLIMIT_NOFILE`.
//!
//! Protocol with the parent: the child prints `port N` on stdout once it listens; when its stdin
//! closes it prints one `served … accept_errors …` line with its counters and exits (so it never
//! outlives the bench). Invariant: every response is the same [`Body`], byte for byte.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use xxhash_rust::xxh3::Xxh3;

use super::common::Args;

const PIECE: usize = 64 * 1024;
/// How long a served stream waits for the peer to close before dropping the socket.
const HOLD: std::time::Duration = std::time::Duration::from_secs(600);

/// The response every stream carries: a head, then `events` events of `size` data bytes each.
pub struct Body {
    pub head: Vec<u8>,
    filler: Vec<u8>,
    size: u64,
    events: u64,
}

impl Body {
    pub fn new(event_mib: u64, events: u64) -> Body {
        let mut filler = vec![b'x'; PIECE];
        for (i, b) in filler.iter_mut().enumerate() {
            *b = b"abcdefghijklmnopqrstuvwxyz0123456789{}\":,"[i % 41];
        }
        Body {
            head:
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                    .to_vec(),
            filler,
            size: event_mib * 1024 * 1024,
            events,
        }
    }

    /// Length of the body after the head.
    pub fn len(&self) -> u64 {
        self.events * (6 + self.size + 2)
    }

    /// XXH3-64 of the body after the head.
    pub fn hash(&self) -> u64 {
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

    async fn send(&self, s: &mut tokio::net::TcpStream) -> std::io::Result<()> {
        s.write_all(&self.head).await?;
        for _ in 0..self.events {
            s.write_all(b"data: ").await?;
            let mut left = self.size;
            while left > 0 {
                let n = left.min(PIECE as u64) as usize;
                s.write_all(&self.filler[..n]).await?;
                left -= n as u64;
            }
            s.write_all(b"\n\n").await?;
        }
        // FIN after the body (the socket itself stays open until the peer closes).
        s.shutdown().await
    }
}

#[derive(Default)]
struct Counters {
    accepted: AtomicU64,
    served: AtomicU64,
    accept_errors: AtomicU64,
    request_errors: AtomicU64,
    write_errors: AtomicU64,
}

async fn serve(listener: TcpListener, body: Arc<Body>, n: Arc<Counters>) {
    loop {
        let mut s = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // EMFILE and the like: count, say so once in a while, back off a little.
                if n.accept_errors
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(1000)
                {
                    eprintln!("sse-server: accept failed: {e}");
                }
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
        };
        n.accepted.fetch_add(1, Ordering::Relaxed);
        let (body, n) = (body.clone(), n.clone());
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => {
                        n.request_errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    Ok(k) => req.extend_from_slice(&buf[..k]),
                }
            }
            match body.send(&mut s).await {
                Ok(()) => n.served.fetch_add(1, Ordering::Relaxed),
                Err(_) => n.write_errors.fetch_add(1, Ordering::Relaxed),
            };
            // Hold the socket until the peer closes, as a live SSE server does. Dropped at
            // once, it would be an orphan still holding up to its send buffer of the body,
            // and under TCP memory pressure (`tcp_mem`) the kernel kills orphans with a RST
            // ("TCP: out of memory", TcpExtTCPAbortOnMemory): that reset, relayed by the
            // proxy, was what failed streams at 5,000.
            let _ = tokio::time::timeout(HOLD, async {
                while s.read(&mut buf).await.is_ok_and(|k| k > 0) {}
            })
            .await;
        });
    }
}

/// The child's main: listen, print the port, serve until stdin closes, print the counters.
pub async fn run(args: &Args) -> bool {
    let body = Arc::new(Body::new(
        args.num("event-mib", 4, 4),
        args.num("events", 1, 1),
    ));
    // A deep accept queue (the kernel caps it at net.core.somaxconn): every stream's upstream
    // connect arrives at once.
    let listener = tokio::net::TcpSocket::new_v4()
        .and_then(|s| {
            // Accepted sockets inherit the listener's send buffer size (0: autotuning).
            let sock_buf = args.num("sock-buf", 0, 0) as u32;
            if sock_buf > 0 {
                s.set_send_buffer_size(sock_buf)?;
            }
            s.bind("127.0.0.1:0".parse().expect("addr"))?;
            s.listen(8192)
        })
        .expect("sse-server: listen on 127.0.0.1");
    let port = listener.local_addr().expect("addr").port();
    let n = Arc::new(Counters::default());
    tokio::spawn(serve(listener, body, n.clone()));
    let mut out = tokio::io::stdout();
    let _ = out.write_all(format!("port {port}\n").as_bytes()).await;
    let _ = out.flush().await;
    // Serve until the parent closes our stdin (or dies).
    let mut line = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    while stdin.read_line(&mut line).await.is_ok_and(|k| k > 0) {
        line.clear();
    }
    let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let _ = out
        .write_all(
            format!(
                "served {} accepted {} accept_errors {} request_errors {} write_errors {}\n",
                g(&n.served),
                g(&n.accepted),
                g(&n.accept_errors),
                g(&n.request_errors),
                g(&n.write_errors)
            )
            .as_bytes(),
        )
        .await;
    let _ = out.flush().await;
    true
}
