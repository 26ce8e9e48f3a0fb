//! `sent-after-cancel` end to end: a tiny scripted 2026-07-28 server behind the proxy keeps a
//! `subscriptions/listen` stream open; the client opens a `tools/call` stream, reads its first
//! progress event and closes it (which cancels the call). A server that then sends the call's
//! progress and response on the listen stream is reported once; one that stays silent is not.
//! Real loopback sockets, no fixed ports, every wait bounded.

use std::sync::Arc;
use std::time::Duration;

use crate::common::audit::e2e::{Tap, ev, post, read_request, within};
use tearline::audit::{AuditConfig, Auditor, FindingKind as K};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{ObservationSink, http1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

const V: Option<&str> = Some("2026-07-28");
const HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                    Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";

fn chunk(text: &str) -> Vec<u8> {
    format!("{:x}\r\n{text}\r\n", text.len()).into_bytes()
}

fn progress(token: &str, n: u64) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"{token}","progress":{n}}}}}"#
    )
}

/// A server whose first connection is the listen stream and second the call; `misbehave`: it
/// sends the cancelled call's progress and response on the listen stream.
async fn server(misbehave: bool) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind server");
    let addr = listener.local_addr().expect("addr");
    let cancelled = Arc::new(Notify::new());
    tokio::spawn(async move {
        let Ok((mut listen, _)) = listener.accept().await else {
            return;
        };
        let c = cancelled.clone();
        tokio::spawn(async move {
            read_request(&mut listen).await;
            let ack = r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{}}"#;
            let mut out = HEAD.as_bytes().to_vec();
            out.extend(chunk(&ev("\n", None, None, &[ack])));
            if listen.write_all(&out).await.is_err() {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), c.notified()).await;
            let mut tail = Vec::new();
            if misbehave {
                tail.extend(chunk(&ev("\n", None, None, &[&progress("p-7", 2)])));
                let late = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#;
                tail.extend(chunk(&ev("\n", None, None, &[late])));
            }
            let done = r#"{"jsonrpc":"2.0","id":100,"result":{"resultType":"complete"}}"#;
            tail.extend(chunk(&ev("\n", None, None, &[done])));
            tail.extend_from_slice(b"0\r\n\r\n");
            let _ = listen.write_all(&tail).await;
            let _ = listen.shutdown().await;
        });
        let Ok((mut call, _)) = listener.accept().await else {
            return;
        };
        read_request(&mut call).await;
        let mut out = HEAD.as_bytes().to_vec();
        out.extend(chunk(&ev("\n", None, None, &[&progress("p-7", 1)])));
        let _ = call.write_all(&out).await;
        // Keep the stream alive until the client's close reaches us (bounded).
        for _ in 0..250 {
            if call.write_all(&chunk(": working\n\n")).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cancelled.notify_one();
    });
    addr
}

/// Reads from `s` until `needle` appeared or the stream ended; returns what was read.
async fn read_until(s: &mut TcpStream, needle: &str) -> String {
    let mut got = Vec::new();
    let mut tmp = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(needle) {
        match s.read(&mut tmp).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&tmp[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

async fn run(misbehave: bool) -> Arc<Tap> {
    let upstream = server(misbehave).await;
    let (tx, mut closed) = watch::channel(0u64);
    let tap = Arc::new(Tap {
        auditor: Auditor::new(AuditConfig::default()),
        closed: tx,
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
    let addr = listener.local_addr().expect("proxy addr");
    let proxy = Proxy::new(ProxyConfig::new("sent-after-cancel", upstream.to_string()));
    let sink: Arc<dyn ObservationSink> = tap.clone();
    proxy.set_sink(Some(sink.clone()));
    proxy.set_observer_factory(Arc::new(move |conn| {
        http1::observer_pair(conn, sink.clone())
    }));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));

    let listen_body = r#"{"jsonrpc":"2.0","id":100,"method":"subscriptions/listen","params":{}}"#;
    let mut listen = TcpStream::connect(addr).await.expect("connect");
    listen
        .write_all(post(None, V, listen_body).as_bytes())
        .await
        .expect("write");
    let _ = listen.shutdown().await;
    assert!(
        read_until(&mut listen, "acknowledged")
            .await
            .contains("acknowledged")
    );

    let call = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"append","arguments":{},"_meta":{"progressToken":"p-7"}}}"#;
    let mut c = TcpStream::connect(addr).await.expect("connect");
    c.write_all(post(None, V, call).as_bytes())
        .await
        .expect("write");
    let _ = c.shutdown().await;
    assert!(read_until(&mut c, "p-7").await.contains("p-7"));
    drop(c); // closing the response stream cancels the call

    let rest = read_until(&mut listen, "\"id\":100").await;
    assert_eq!(rest.contains("\"id\":7"), misbehave, "{rest}");
    drop(listen);
    closed.wait_for(|n| *n >= 2).await.expect("both closed");
    shutdown.cancel();
    let _ = task.await;
    tap.auditor.finish();
    tap
}

#[tokio::test]
async fn server_sending_for_a_cancelled_call_on_the_listen_stream_yields_sent_after_cancel() {
    within(async {
        let tap = run(true).await;
        let f = tap.auditor.findings();
        let kinds: Vec<K> = f.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, vec![K::SentAfterCancel], "{f:#?}");
        assert_eq!(f[0].ids, vec!["7".to_owned()]);
        assert!(
            f[0].detail.contains("progress notification"),
            "{}",
            f[0].detail
        );
    })
    .await
    .expect("timeout");
}

#[tokio::test]
async fn server_silent_after_the_close_yields_no_finding() {
    within(async {
        let tap = run(false).await;
        let f = tap.auditor.findings();
        assert!(f.is_empty(), "{f:#?}");
    })
    .await
    .expect("timeout");
}
