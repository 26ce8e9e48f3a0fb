//! A raw-socket HTTP/1.1 client for the lab tests: it writes requests byte for byte and reads
//! responses (Content-Length or chunked) without any HTTP library, so the tests see exactly
//! what the lab server put on the wire, chunk boundaries included.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tearline::lab::{LabConfig, serve};
use tearline::wire::sse::{SseEvent, SseScanner};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const ACCEPT_BOTH: (&str, &str) = ("Accept", "application/json, text/event-stream");
pub const ACCEPT_SSE: (&str, &str) = ("Accept", "text/event-stream");
pub const JSON: (&str, &str) = ("Content-Type", "application/json");

/// A running lab server on 127.0.0.1:0.
pub struct Lab {
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Lab {
    pub async fn start(cfg: LabConfig) -> Lab {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let task = tokio::spawn(async move {
            serve(listener, cfg, stop).await.expect("lab serve");
        });
        Lab {
            addr,
            shutdown,
            task,
        }
    }

    pub async fn connect(&self) -> Conn {
        Self::connect_to(self.addr).await
    }

    /// A connection to a lab at `addr` started some other way.
    pub async fn connect_to(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Stops the server and waits for it (fails the test if it does not stop in 5 s).
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("lab stops")
            .expect("lab task did not panic");
    }

    /// Opens a session: initialize + notifications/initialized. Returns the session id.
    pub async fn session(&self, headers: &[(&str, &str)]) -> String {
        let mut c = self.connect().await;
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let mut h = vec![ACCEPT_BOTH, JSON];
        h.extend_from_slice(headers);
        let resp = c.request("POST", "/mcp", &h, init.as_bytes()).await;
        assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
        let sid = resp
            .header("mcp-session-id")
            .expect("session id")
            .to_owned();
        let mut h = vec![ACCEPT_BOTH, JSON, ("Mcp-Session-Id", sid.as_str())];
        h.extend_from_slice(headers);
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let resp = c.request("POST", "/mcp", &h, note.as_bytes()).await;
        assert_eq!(resp.status, 202);
        sid
    }
}

/// The head of a response.
#[derive(Debug, Clone)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Full {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The HTTP chunks of a chunked body, in order (empty for Content-Length bodies).
    pub chunks: Vec<Vec<u8>>,
}

impl Full {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write");
    }

    pub async fn send(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.send_raw(&bytes).await;
    }

    /// Sends a request and reads the whole response.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Full {
        self.send(method, path, headers, body).await;
        let head = self.head().await;
        self.rest(head).await
    }

    async fn fill(&mut self) -> bool {
        let mut tmp = [0u8; 16384];
        let n = self.stream.read(&mut tmp).await.unwrap_or(0);
        self.buf.extend_from_slice(&tmp[..n]);
        n > 0
    }

    async fn line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return Some(line);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    async fn exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await {
                return None;
            }
        }
        Some(self.buf.drain(..n).collect())
    }

    /// Reads a response head.
    pub async fn head(&mut self) -> Head {
        let status_line = self.line().await.expect("status line");
        let status_line = String::from_utf8(status_line).expect("ascii status line");
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status code");
        let mut headers = Vec::new();
        loop {
            let line = self.line().await.expect("header line");
            if line.is_empty() {
                break;
            }
            let line = String::from_utf8(line).expect("ascii header");
            let (n, v) = line.split_once(':').expect("header colon");
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
        Head { status, headers }
    }

    /// Reads the next HTTP chunk of a chunked body: `None` at the last chunk (or EOF).
    pub async fn chunk(&mut self) -> Option<Vec<u8>> {
        let size_line = self.line().await?;
        let size = usize::from_str_radix(std::str::from_utf8(&size_line).ok()?.trim(), 16).ok()?;
        if size == 0 {
            self.line().await?;
            return None;
        }
        let data = self.exact(size).await?;
        let crlf = self.exact(2).await?;
        assert_eq!(crlf, b"\r\n", "chunk must end with CRLF");
        Some(data)
    }

    /// Reads the body after `head` to its end.
    pub async fn rest(&mut self, head: Head) -> Full {
        let mut chunks = Vec::new();
        let body = if head.chunked() {
            while let Some(c) = self.chunk().await {
                chunks.push(c);
            }
            chunks.concat()
        } else {
            let len = head
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            self.exact(len).await.expect("full body")
        };
        Full {
            status: head.status,
            headers: head.headers,
            body,
            chunks,
        }
    }

    /// Reads decoded chunked-body bytes until `buf` satisfies `done` (bytes read so far are
    /// returned; the rest of the body stays unread).
    pub async fn body_until(&mut self, done: impl Fn(&[u8]) -> bool) -> Vec<u8> {
        let mut body = Vec::new();
        while !done(&body) {
            let size_line = self.line().await.expect("chunk size");
            let size =
                usize::from_str_radix(std::str::from_utf8(&size_line).expect("hex").trim(), 16)
                    .expect("chunk size");
            assert!(size > 0, "body ended before the condition held");
            let mut left = size;
            while left > 0 && !done(&body) {
                if self.buf.is_empty() {
                    assert!(self.fill().await, "EOF inside chunk");
                }
                let n = left.min(self.buf.len()).min(1);
                body.extend(self.buf.drain(..n));
                left -= n;
            }
            if left > 0 {
                return body;
            }
            assert_eq!(self.exact(2).await.expect("crlf"), b"\r\n");
        }
        body
    }
}

/// One event as the project's WHATWG scanner dispatched it (owned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ev {
    pub event_type: String,
    pub data: Vec<u8>,
    pub id: Option<String>,
    pub last_event_id: String,
}

/// Feeds `chunks` (in order) to one [`SseScanner`] and returns the events it dispatched,
/// then the end of stream.
pub fn scan(chunks: &[Vec<u8>]) -> Vec<Ev> {
    let mut scanner = SseScanner::new();
    let mut out = Vec::new();
    let mut push = |e: &SseEvent<'_>| {
        out.push(Ev {
            event_type: e.event_type.to_owned(),
            data: e.data.to_vec(),
            id: e.id.map(str::to_owned),
            last_event_id: e.last_event_id.to_owned(),
        })
    };
    for c in chunks {
        scanner.feed(c, &mut push);
    }
    scanner.finish(&mut push);
    out
}

/// The id of the single event encoded in `chunk` (per the scanner).
pub fn event_id(chunk: &[u8]) -> Option<String> {
    scan(&[chunk.to_vec()])
        .into_iter()
        .next()
        .and_then(|e| e.id)
}

/// A `tools/call` request body.
pub fn call(id: u64, tool: &str, args: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args},"_meta":{{"progressToken":"p{id}"}}}}}}"#
    )
    .into_bytes()
}

/// Runs `f` with a 30 s limit so a bug fails the test instead of hanging it.
pub async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("test timed out")
}
