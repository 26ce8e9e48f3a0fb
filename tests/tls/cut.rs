//! Cuts of a TLS client session: at `before-dispatch` a `fin` cut ends the session without
//! `close_notify` by default (a truncation the client sees as an error, recorded as
//! `truncated`), or with it when the proxy is told to (`close-notify`, recorded so).

use std::time::Duration;

use crate::common::tls::*;
use tearline::fault::sse_cut::{SseCutConfig, factory};
use tearline::tls::{FinEnd, TlsEnd};
use tearline::wire::{Observation, SseClass};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::timeout;

const REQUEST: &str = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 46\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\"}";
const EVENT: &str =
    "event: message\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";

/// A plain server answering every request with one chunked SSE event, then waiting.
async fn sse_server() -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; REQUEST.len()];
                if s.read_exact(&mut buf).await.is_err() {
                    return;
                }
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{EVENT}\r\n0\r\n\r\n",
                    EVENT.len()
                );
                let _ = s.write_all(resp.as_bytes()).await;
                let mut rest = Vec::new();
                let _ = s.read_to_end(&mut rest).await;
            });
        }
    });
    addr
}

/// Runs one `fin` cut at before-dispatch; returns the client's bytes, how its read ended, and
/// the recorded TLS end.
async fn cut(fin: FinEnd) -> (String, std::io::Result<()>, Option<TlsEnd>) {
    let proxy_ca = tempfile::tempdir().unwrap();
    let t = terminator(proxy_ca.path());
    let ca_file = t.ca_file().unwrap().to_owned();
    let cfg: SseCutConfig = toml::from_str("at = \"before-dispatch\"\naction = \"fin\"").unwrap();
    let p = start_proxy(
        &sse_server().await.to_string(),
        |c| {
            c.tls.client = Some(t);
            c.tls.fin = fin;
        },
        vec![factory(cfg)],
    )
    .await;
    let mut s = tls_connect(p.addr, "localhost", &ca_file).await.unwrap();
    s.write_all(REQUEST.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        match s.read(&mut buf).await {
            Ok(0) => break Ok(()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => break Err(e),
        }
    };
    // The record is made before the socket is closed, so it is there once the client saw the end.
    let obs = p.rec.0.lock().unwrap().clone();
    let recorded = obs.iter().find_map(|o| match o {
        Observation::Cut { point, .. } => {
            assert_eq!(point.class, Some(SseClass::BeforeDispatch));
            Some(point.tls_end)
        }
        _ => None,
    });
    (
        String::from_utf8_lossy(&got).into_owned(),
        end,
        recorded.expect("a cut was recorded"),
    )
}

#[tokio::test]
async fn fin_cut_without_close_notify_is_a_truncation_the_client_sees() {
    timeout(Duration::from_secs(20), async {
        let (got, end, tls_end) = cut(FinEnd::Truncate).await;
        assert!(
            got.ends_with('\n') && !got.contains(EVENT),
            "cut after a field line, before the blank line: {got:?}"
        );
        let err = end.expect_err("a TLS client must see the missing close_notify");
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof, "{err}");
        assert_eq!(tls_end, Some(TlsEnd::Truncated));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn fin_cut_with_close_notify_is_a_clean_tls_end_mid_event() {
    timeout(Duration::from_secs(20), async {
        let (got, end, tls_end) = cut(FinEnd::CloseNotify).await;
        assert!(
            got.ends_with('\n') && !got.contains(EVENT),
            "cut after a field line, before the blank line: {got:?}"
        );
        end.expect("close_notify: the TLS session ends cleanly");
        assert_eq!(tls_end, Some(TlsEnd::CloseNotify));
    })
    .await
    .unwrap();
}
