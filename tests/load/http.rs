//! The load client's HTTP/1.1 reader over real sockets: chunked bodies decode identically
//! whatever the read boundaries, a body ends cleanly if and only if its framing says so, and a
//! connection is reused only after a clean end.

use std::time::Duration;

use tearline::load::Target;
use tearline::load::http::{Conn, HttpError, Next, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

const CHUNKED: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\
5;ext=1\r\nhello\r\n1\r\n \r\nb\r\nworld\r\n:x\r\n\r\n0\r\nX-Trailer: 1\r\n\r\n";
const DECODED: &[u8] = b"hello world\r\n:x\r\n";

/// Serves one connection per entry of `replies`: reads a request, writes the reply in two
/// writes split at `split`, then keeps the connection open for `keep` more requests.
async fn server(replies: Vec<(Vec<u8>, usize)>, keep: usize) -> Target {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        for (reply, split) in replies {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            sock.set_nodelay(true).unwrap();
            for _ in 0..=keep {
                let mut buf = [0u8; 2048];
                if matches!(sock.read(&mut buf).await, Ok(0) | Err(_)) {
                    break;
                }
                let (a, b) = reply.split_at(split.min(reply.len()));
                let _ = sock.write_all(a).await;
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _ = sock.write_all(b).await;
            }
        }
    });
    Target::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap()
}

async fn get(target: &Target, conn: Option<Conn>) -> Result<Response, HttpError> {
    let conn = match conn {
        Some(c) => c,
        None => Conn::connect(target, Duration::from_secs(2)).await?,
    };
    let req = Request {
        method: "GET",
        headers: &[("Accept", "text/event-stream")],
        body: b"",
    };
    conn.send(target, &req, Instant::now() + Duration::from_secs(5))
        .await
}

async fn body_of(resp: &mut Response) -> Result<Vec<u8>, HttpError> {
    resp.body
        .read_all(Instant::now() + Duration::from_secs(5))
        .await
}

#[tokio::test]
async fn chunked_body_decodes_the_same_at_every_split() {
    tokio::time::timeout(Duration::from_secs(30), async {
        let replies: Vec<_> = (1..CHUNKED.len()).map(|i| (CHUNKED.to_vec(), i)).collect();
        let n = replies.len();
        let target = server(replies, 0).await;
        for i in 0..n {
            let mut resp = get(&target, None).await.unwrap();
            assert!(resp.is_event_stream());
            assert_eq!(
                body_of(&mut resp).await.unwrap(),
                DECODED,
                "split at {}",
                i + 1
            );
            assert!(
                resp.body.into_conn().is_some(),
                "clean chunked end is reusable"
            );
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn eof_inside_a_chunk_is_truncation_not_an_end() {
    tokio::time::timeout(Duration::from_secs(10), async {
        let cut = CHUNKED.len() - 30;
        let target = server(vec![(CHUNKED[..cut].to_vec(), cut)], 0).await;
        let mut resp = get(&target, None).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Vec::new();
        let err = loop {
            match resp.body.next(deadline).await {
                Ok(Next::Data(d)) => seen.extend_from_slice(d),
                Ok(Next::End) => panic!("a truncated body must not end cleanly"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, HttpError::Truncated), "{err:?}");
        assert!(DECODED.starts_with(&seen));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn content_length_body_ends_and_the_connection_is_reused() {
    tokio::time::timeout(Duration::from_secs(10), async {
        let reply = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec();
        let target = server(vec![(reply, 20)], 1).await;
        let mut resp = get(&target, None).await.unwrap();
        assert_eq!(body_of(&mut resp).await.unwrap(), b"hello");
        let conn = resp.body.into_conn().expect("reusable after a clean end");
        let mut resp = get(&target, Some(conn)).await.unwrap();
        assert_eq!(body_of(&mut resp).await.unwrap(), b"hello");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn close_delimited_body_ends_at_eof_and_is_not_reused() {
    tokio::time::timeout(Duration::from_secs(10), async {
        let reply = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbye".to_vec();
        let target = server(vec![(reply, 3)], 0).await;
        let mut resp = get(&target, None).await.unwrap();
        assert_eq!(body_of(&mut resp).await.unwrap(), b"bye");
        assert!(resp.body.into_conn().is_none());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn malformed_chunk_size_is_an_error() {
    tokio::time::timeout(Duration::from_secs(10), async {
        let reply =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"
                .to_vec();
        let target = server(vec![(reply, 10)], 0).await;
        let mut resp = get(&target, None).await.unwrap();
        assert!(matches!(body_of(&mut resp).await, Err(HttpError::BadChunk)));
    })
    .await
    .unwrap();
}
