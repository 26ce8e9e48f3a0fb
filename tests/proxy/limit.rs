//! The connection limit: a connection over it is refused at once and counted, never left
//! unserved in the backlog; the default limit follows the open-file limit.

use std::time::Duration;

use tearline::proxy::{ProxyConfig, fd_limit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::common::proxy::*;

async fn echoes(c: &mut TcpStream) -> bool {
    if c.write_all(b"ping").await.is_err() {
        return false;
    }
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).await.is_ok() && &buf == b"ping"
}

#[tokio::test]
async fn connections_over_the_limit_are_refused_at_once_and_counted() {
    timeout(Duration::from_secs(20), async {
        let echo = echo_server().await;
        let p = start_proxy(echo, |c| c.max_connections = 3).await;
        let mut served = Vec::new();
        for _ in 0..3 {
            let mut c = TcpStream::connect(p.addr).await.unwrap();
            assert!(echoes(&mut c).await);
            served.push(c);
        }
        for i in 0..2 {
            let mut c = TcpStream::connect(p.addr).await.unwrap();
            // Before, the connect succeeded (backlog) and no byte ever flowed.
            let (bytes, err) = read_until_end(&mut c).await;
            assert!(bytes.is_empty(), "over-limit connection {i} was served");
            assert_eq!(
                err,
                Some(std::io::ErrorKind::ConnectionReset),
                "refused visibly"
            );
        }
        let s = p.proxy.stats().snapshot();
        assert_eq!((s.connections_over_limit, s.connections_refused), (2, 2));
        // A freed slot serves the next connection.
        drop(served.pop());
        let mut next = loop {
            let mut c = TcpStream::connect(p.addr).await.unwrap();
            if echoes(&mut c).await {
                break c;
            }
            // The closed connection's task may not have ended yet: refused, counted, retried.
            tokio::task::yield_now().await;
        };
        assert!(echoes(&mut next).await);
    })
    .await
    .unwrap();
}

#[test]
fn the_default_limit_is_what_the_open_file_limit_allows_not_4096() {
    let soft = fd_limit::soft_limit();
    let cfg = ProxyConfig::new("p", "127.0.0.1:1");
    assert_eq!(cfg.max_connections, fd_limit::connections_for(soft));
    if let Some(n) = soft {
        assert_eq!(
            cfg.max_connections as u64,
            (n.saturating_sub(fd_limit::RESERVED) / 2).max(1)
        );
    }
}
