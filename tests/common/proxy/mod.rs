//! Shared helpers of the proxy tests: a proxy on port 0, echo and sink servers, checksums.
//!
//! Every helper binds 127.0.0.1:0 before anything connects, so no test sleeps for start-up.
#![allow(dead_code)]

pub mod faults;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running proxy.
pub struct Running {
    pub addr: SocketAddr,
    pub proxy: Arc<Proxy>,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), proxy::ProxyError>>,
}

/// Starts a proxy to `upstream` with `cfg` edited by `edit`.
pub async fn start_proxy(upstream: SocketAddr, edit: impl FnOnce(&mut ProxyConfig)) -> Running {
    let mut cfg = ProxyConfig::new("test", upstream.to_string());
    cfg.drain_timeout = Duration::from_secs(2);
    edit(&mut cfg);
    // The deep backlog `tearline proxy` listens with: a burst of a thousand connects is queued.
    // With tokio's 1,024 the queue overflows under load and the kernel answers with SYN
    // cookies, which can reset a client or accept a stale segment as a new connection.
    let listener = proxy::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::new(cfg);
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    Running {
        addr,
        proxy,
        shutdown,
        task,
    }
}

/// An echo server: each connection copies what it reads back, then shuts down its write side
/// after EOF.
pub async fn echo_server() -> SocketAddr {
    // The proxy's deep backlog: a burst of thousands of connections is queued, not dropped.
    let listener = proxy::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                if tokio::io::copy(&mut r, &mut w).await.is_ok() {
                    let _ = w.shutdown().await;
                }
            });
        }
    });
    addr
}

/// A server whose connections are handed to the test one by one.
pub async fn accepting_server() -> (SocketAddr, tokio::sync::mpsc::Receiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            if tx.send(s).await.is_err() {
                break;
            }
        }
    });
    (addr, rx)
}

/// A 64-bit checksum of a byte stream, fed piecewise (order-sensitive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sum {
    h: u64,
    n: u64,
}

impl Default for Sum {
    fn default() -> Self {
        Sum {
            h: 0xcbf2_9ce4_8422_2325,
            n: 0,
        }
    }
}

impl Sum {
    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.h = (self.h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.n += bytes.len() as u64;
    }
    pub fn len(&self) -> u64 {
        self.n
    }
}

/// A deterministic pseudo-random byte source (xorshift), cheap enough for hundreds of MiB.
pub struct Gen(u64);

impl Gen {
    pub fn new(seed: u64) -> Self {
        Gen(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

/// Writes `total` pseudo-random bytes in random-sized writes (1..=max_write), returns the sum.
pub async fn send_random<W: AsyncWriteExt + Unpin>(
    w: &mut W,
    total: u64,
    seed: u64,
    max_write: usize,
) -> std::io::Result<Sum> {
    let mut g = Gen::new(seed);
    let mut buf = vec![0u8; max_write];
    let mut sum = Sum::default();
    let mut left = total;
    while left > 0 {
        let n = ((g.next() as usize % max_write) + 1).min(left as usize);
        g.fill(&mut buf[..n]);
        w.write_all(&buf[..n]).await?;
        sum.feed(&buf[..n]);
        left -= n as u64;
    }
    Ok(sum)
}

/// Reads to EOF in random-sized reads, returns the sum.
pub async fn recv_all<R: AsyncReadExt + Unpin>(r: &mut R, seed: u64) -> std::io::Result<Sum> {
    let mut g = Gen::new(seed);
    let mut buf = vec![0u8; 256 * 1024];
    let mut sum = Sum::default();
    loop {
        let want = (g.next() as usize % buf.len()) + 1;
        let n = r.read(&mut buf[..want]).await?;
        if n == 0 {
            return Ok(sum);
        }
        sum.feed(&buf[..n]);
    }
}

/// Reads to EOF or error; returns the bytes read and the error kind, if any.
pub async fn read_until_end(s: &mut TcpStream) -> (Vec<u8>, Option<std::io::ErrorKind>) {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) => return (out, None),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) => return (out, Some(e.kind())),
        }
    }
}
