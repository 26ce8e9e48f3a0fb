//! The lab over HTTP/2 on its one port: h2c by prior knowledge and h2 by ALPN over TLS,
//! answered by Debian's curl (nghttp2) and by hyper's http2 client. The MCP behaviour must be
//! the same as over HTTP/1.1: a session, a streamed call, an exact resume by `Last-Event-ID`,
//! and a reader that goes away (its stream reset) seen as a disconnect the resume repairs.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tearline::lab::{LabConfig, serve_tls};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::common::lab_client::{Lab, call, within};
use crate::common::tls::terminator;

const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

/// What curl printed with `-i`: the status line, the headers (names lower-cased), the body.
struct Curl {
    status_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Curl {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Runs curl with `args` (plus `-sS -i`), bounded by 20 s; fails the test if curl fails.
async fn curl(args: &[&str]) -> Curl {
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        tokio::process::Command::new("curl")
            .args(["-sS", "-i", "--max-time", "15"])
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("curl finished within 20 s")
    .expect("curl runs");
    assert!(
        out.status.success(),
        "curl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let split = out
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("curl printed a response head");
    let head = String::from_utf8_lossy(&out.stdout[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("").trim().to_owned();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Curl {
        status_line,
        headers,
        body: out.stdout[split + 4..].to_vec(),
    }
}

const MCP_HEADERS: [&str; 4] = [
    "-H",
    "Accept: application/json, text/event-stream",
    "-H",
    "Content-Type: application/json",
];

/// initialize + a 5-progress call + a resume from its third event, all over one curl mode
/// (`mode` = `--http2-prior-knowledge` or `--http2 -k`); returns the status lines seen.
async fn session_call_and_resume(url: &str, mode: &[&str]) -> Vec<String> {
    let with = |extra: &[&str]| -> Vec<String> {
        mode.iter()
            .chain(extra.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        curl(&refs).await
    };
    let mut post = MCP_HEADERS.to_vec();
    post.extend(["-X", "POST", "--data-binary", INIT, url]);
    let init = run(with(&post)).await;
    let sid = init
        .header("mcp-session-id")
        .expect("initialize answered with a session id")
        .to_owned();
    let session_header = format!("Mcp-Session-Id: {sid}");
    let body = String::from_utf8(call(1, "progress", r#"{"n":5}"#)).unwrap();
    let mut post = MCP_HEADERS.to_vec();
    post.extend([
        "-H",
        &session_header,
        "-X",
        "POST",
        "--data-binary",
        &body,
        url,
    ]);
    let called = run(with(&post)).await;
    assert_eq!(called.header("content-type"), Some("text/event-stream"));
    let text = String::from_utf8(called.body.clone()).expect("UTF-8 events");
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .collect();
    assert_eq!(ids, ["1-0", "1-1", "1-2", "1-3", "1-4", "1-5", "1-6"]);
    assert!(text.contains("progress done: 5"), "{text}");

    let get = [
        "-H",
        "Accept: text/event-stream",
        "-H",
        &session_header,
        "-H",
        "Last-Event-ID: 1-2",
        url,
    ];
    let resumed = run(with(&get)).await;
    let after = text.find("event: message\nid: 1-3\n").expect("event 1-3");
    assert_eq!(
        String::from_utf8_lossy(&resumed.body),
        text[after..],
        "the resume replays the events after 1-2 byte for byte"
    );
    vec![init.status_line, called.status_line, resumed.status_line]
}

#[tokio::test]
async fn curl_with_h2c_prior_knowledge_gets_a_session_a_streamed_call_and_an_exact_resume() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let url = format!("http://{}/mcp", lab.addr);
        let statuses = session_call_and_resume(&url, &["--http2-prior-knowledge"]).await;
        assert_eq!(statuses, ["HTTP/2 200"; 3]);
        // The same port still answers HTTP/1.1.
        let old = curl(&["--http1.1", "-X", "DELETE", &url]).await;
        assert!(
            old.status_line.starts_with("HTTP/1.1 400"),
            "{}",
            old.status_line
        );
        lab.stop().await;
    })
    .await;
}

#[tokio::test]
async fn curl_over_tls_picks_h2_by_alpn_and_http1_still_works_on_the_same_port() {
    within(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop = CancellationToken::new();
        let s = stop.clone();
        let t = terminator(dir.path());
        let task = tokio::spawn(async move {
            serve_tls(listener, LabConfig::default(), Some(t), s)
                .await
                .expect("lab")
        });
        let url = format!("https://localhost:{}/mcp", addr.port());
        let resolve = format!("localhost:{}:127.0.0.1", addr.port());
        let statuses =
            session_call_and_resume(&url, &["--http2", "-k", "--resolve", &resolve]).await;
        assert_eq!(statuses, ["HTTP/2 200"; 3]);
        let old = curl(&[
            "--http1.1",
            "-k",
            "--resolve",
            &resolve,
            "-X",
            "DELETE",
            &url,
        ])
        .await;
        assert!(
            old.status_line.starts_with("HTTP/1.1 400"),
            "{}",
            old.status_line
        );
        stop.cancel();
        task.await.expect("lab stopped");
    })
    .await;
}

/// An h2c connection to `addr` by hyper's http2 client.
async fn h2c(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    send
}

fn post(addr: SocketAddr, sid: Option<&str>, body: Vec<u8>) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::post(format!("http://{addr}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(sid) = sid {
        b = b.header("mcp-session-id", sid);
    }
    b.body(Full::new(Bytes::from(body))).unwrap()
}

#[tokio::test]
async fn a_reset_h2_stream_is_a_disconnect_its_sibling_keeps_flowing_and_the_resume_repairs_it() {
    within(async {
        let lab = Lab::start(LabConfig::default()).await;
        let mut h2 = h2c(lab.addr).await;
        let init = h2
            .send_request(post(lab.addr, None, INIT.as_bytes().to_vec()))
            .await
            .expect("initialize");
        assert_eq!(init.version(), http::Version::HTTP_2);
        let sid = init.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        h2.ready().await.expect("connection ready");

        // Two calls multiplexed on one connection; the first is read for two events then its
        // stream is reset (the body dropped: hyper sends RST_STREAM CANCEL).
        let slow = r#"{"n":20,"interval":20}"#;
        let a = h2.send_request(post(lab.addr, Some(&sid), call(1, "progress", slow)));
        let b = h2.send_request(post(lab.addr, Some(&sid), call(2, "progress", slow)));
        let (a, b) = tokio::join!(a, b);
        let (mut a, b) = (
            a.expect("call 1").into_body(),
            b.expect("call 2").into_body(),
        );
        let mut seen = Vec::new();
        while !String::from_utf8_lossy(&seen).contains("id: 1-2\n") {
            let frame = a.frame().await.expect("call 1 streams").expect("DATA");
            seen.extend_from_slice(frame.data_ref().expect("data frame"));
        }
        drop(a);
        let whole = b
            .collect()
            .await
            .expect("call 2 ends by END_STREAM")
            .to_bytes();
        let whole = String::from_utf8_lossy(&whole);
        assert!(
            whole.contains("progress done: 20"),
            "the sibling ran to its result"
        );

        let get = http::Request::get(format!("http://{}/mcp", lab.addr))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid)
            .header("last-event-id", "1-2")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resumed = h2.send_request(get).await.expect("resume");
        assert_eq!(resumed.status(), 200);
        let rest = resumed
            .into_body()
            .collect()
            .await
            .expect("resume ends")
            .to_bytes();
        let rest = String::from_utf8_lossy(&rest);
        assert!(rest.starts_with("event: message\nid: 1-3\n"), "{rest}");
        assert!(
            rest.contains("progress done: 20"),
            "the resume reaches the result"
        );
        lab.stop().await;
    })
    .await;
}
