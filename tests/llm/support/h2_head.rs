//! Where the lab's first response head begins on an h2c connection: the byte offset (from the
//! server's first byte) of its first `HEADERS` frame, read off the bytes of a real exchange
//! (the `h2` crate as client, through a relay that keeps what the server wrote).
//!
//! Why: over HTTP/1.1 a server's first byte is its response, so a reset at downstream byte 0
//! is "RST before the response" and the request has reached the server. Over h2 the server
//! speaks first (`SETTINGS`, before any request is read), so the h2 form of that cut is a
//! reset at the first byte of the response's `HEADERS`: the server's connection preface and
//! acknowledgements reach the client, the answer does not, and the request was read.
//!
//! Invariant: what precedes the first `HEADERS` is the server's connection-level frames,
//! which do not depend on the request (so a `GET /` measures it for every LLM request).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// `HEADERS` (RFC 9113 §6.2).
const HEADERS: u8 = 0x1;

/// The offset of the first `HEADERS` frame in `server` (the bytes a server wrote on an h2
/// connection, which has no preface of its own), or `None` when it holds none whole.
pub fn first_headers(server: &[u8]) -> Option<u64> {
    let mut at = 0usize;
    // Bounded: every step moves past one whole frame (9 header bytes at least).
    while at + 9 <= server.len() {
        let h = &server[at..at + 9];
        if h[3] == HEADERS {
            return Some(at as u64);
        }
        let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
        at += 9 + len;
    }
    None
}

/// The bytes the lab at `lab` writes on an h2c connection before its first response head.
pub async fn lab_bytes_before_response(lab: SocketAddr) -> u64 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a relay");
    let relay = listener.local_addr().expect("relay address");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    tokio::spawn(async move {
        let Ok((down, _)) = listener.accept().await else {
            return;
        };
        let Ok(up) = TcpStream::connect(lab).await else {
            return;
        };
        let (mut dr, mut dw) = down.into_split();
        let (mut ur, mut uw) = up.into_split();
        let requests = async {
            let _ = tokio::io::copy(&mut dr, &mut uw).await;
            let _ = uw.shutdown().await;
        };
        let answers = async {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = ur.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                // Kept before it is written: the client may read the head and look at the
                // record before this task runs again.
                keep.lock()
                    .expect("relay record")
                    .extend_from_slice(&buf[..n]);
                if dw.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
            let _ = dw.shutdown().await;
        };
        tokio::join!(requests, answers);
    });
    let tcp = TcpStream::connect(relay).await.expect("connect the relay");
    let (client, conn) = h2::client::handshake(tcp).await.expect("h2c handshake");
    let driver = tokio::spawn(conn);
    let mut client = client.ready().await.expect("h2 client ready");
    let req = http::Request::get(format!("http://{lab}/"))
        .body(())
        .expect("a request");
    let (resp, _) = client.send_request(req, true).expect("send the request");
    let head = tokio::time::timeout(std::time::Duration::from_secs(10), resp)
        .await
        .expect("the lab answers within 10 s");
    head.expect("a response head");
    drop(client);
    driver.abort();
    let server = seen.lock().expect("relay record").clone();
    first_headers(&server).expect("the lab's response HEADERS were relayed")
}

#[cfg(test)]
mod tests {
    use super::{HEADERS, first_headers};

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend([kind, 0, 0, 0, 0, 1]);
        f.extend(payload);
        f
    }

    #[test]
    fn the_first_headers_frame_is_found_past_the_connection_frames() {
        let mut b = frame(0x4, &[0; 12]); // SETTINGS
        b.extend(frame(0x4, &[])); // its ACK
        b.extend(frame(0x8, &[0, 1, 0, 0])); // WINDOW_UPDATE
        let at = b.len() as u64;
        b.extend(frame(HEADERS, &[0x88]));
        assert_eq!(first_headers(&b), Some(at));
        assert_eq!(
            first_headers(&b[..at as usize + 5]),
            None,
            "an unfinished header"
        );
    }
}
