//! Fuzz target `load`: the load client's HTTP/1.1 reader facing hostile server bytes.
//!
//! A loopback server reads the client's request, writes the input's payload (in pieces the
//! control bytes choose, each flushed), then closes. Invariants checked: the client never
//! panics or hangs, and a peer that closed is never reported as a timeout; the outcome (status,
//! headers, body bytes, how the body ended) is the same whether the bytes arrive whole or in
//! pieces; a body never holds more bytes than the server sent; a `Content-Length` body that
//! ended by its framing holds exactly that many bytes.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

use crate::load::config::Target;
use crate::load::http::{Conn, HttpError, Next, Request};

use super::{Input, pieces};

/// How a body read ended.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Head(&'static str),
    Body {
        status: u16,
        headers: Vec<(String, String)>,
        data: Vec<u8>,
        end: Result<(), &'static str>,
    },
}

async fn serve(listener: TcpListener, bytes: Vec<u8>, bounds: Vec<usize>) {
    let Ok((mut s, _)) = listener.accept().await else {
        return;
    };
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    for piece in pieces(&bytes, &bounds) {
        if s.write_all(piece).await.is_err() || s.flush().await.is_err() {
            return;
        }
        tokio::task::yield_now().await;
    }
    let _ = s.shutdown().await;
    // Wait for the client to close, then reset: no TIME_WAIT left behind per input.
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
}

async fn exchange(bytes: &[u8], bounds: Vec<usize>) -> Outcome {
    let listener = match TcpListener::bind("127.0.0.1:0").await {
        Ok(l) => l,
        Err(e) => panic!("binding a loopback listener: {e}"),
    };
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    let server = tokio::spawn(serve(listener, bytes.to_vec(), bounds));
    let target = Target {
        host: "127.0.0.1".to_owned(),
        port,
        path: "/mcp".to_owned(),
        tls: None,
        h2: None,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let outcome = client(&target, deadline).await;
    let _ = server.await;
    outcome
}

async fn client(target: &Target, deadline: Instant) -> Outcome {
    let conn = match Conn::connect(target, Duration::from_secs(5)).await {
        Ok(c) => c,
        Err(e) => panic!("connecting to the loopback server: {e}"),
    };
    let req = Request {
        method: "POST",
        headers: &[("Accept", "application/json, text/event-stream")],
        body: b"{}",
    };
    let mut resp = match conn.send(target, &req, deadline).await {
        Ok(r) => r,
        Err(e) => return Outcome::Head(kind(&e)),
    };
    let mut data = Vec::new();
    let end = loop {
        match resp.body.next(deadline).await {
            Ok(Next::Data(d)) => {
                assert!(!d.is_empty(), "empty data piece");
                data.extend_from_slice(d);
            }
            Ok(Next::End) => break Ok(()),
            Err(e) => break Err(kind(&e)),
        }
    };
    Outcome::Body {
        status: resp.status,
        headers: resp.headers,
        data,
        end,
    }
}

fn kind(e: &HttpError) -> &'static str {
    assert!(
        !matches!(e, HttpError::Timeout),
        "the server closed, yet the client reports a timeout"
    );
    e.kind()
}

/// The target.
pub fn fuzz(data: &[u8]) {
    let input = Input::new(data);
    let bytes = input.payload;
    let (whole, split) = super::block_on(async {
        let whole = exchange(bytes, Vec::new()).await;
        let split = exchange(bytes, input.splits(bytes.len())).await;
        (whole, split)
    });
    assert_eq!(whole, split, "the outcome depends on how the bytes arrived");
    if let Outcome::Body {
        status,
        headers,
        data,
        end,
    } = &whole
    {
        assert!(data.len() <= bytes.len(), "more body bytes than were sent");
        let chunked = headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked"));
        let length = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse::<u64>().ok());
        if let (false, Some(len), Ok(()), false) =
            (chunked, length, end, *status == 204 || *status == 304)
        {
            assert_eq!(
                data.len() as u64,
                len,
                "Content-Length body ended early or late"
            );
        }
    }
}
