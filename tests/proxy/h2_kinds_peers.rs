//! The peers of the HTTP/2 fault-kind tests: hyper's HTTP/2 server (the real peer), a proxy
//! with an h2 kind and an HTTP observer (so h2 connections go to the stream relay), and a
//! frame-level endpoint that writes exact frames and reads every frame the proxy delivers, so a
//! test can assert what crossed the wire (a `GOAWAY`'s last stream id, an `RST_STREAM`'s code,
//! the order of frames).
//!
//! Header blocks written here use only HPACK's static table and literals without indexing: they
//! change no dynamic table, so a test can write them without an encoder.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use http_body_util::combinators::BoxBody;
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tearline::fault::keys::FaultDef;
use tearline::fault::registry::{Built, build};
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::h2::frame::{HEADER_LEN, flags};
use tearline::wire::h2::{FrameHeader, FrameType, PREFACE};
use tearline::wire::http1::observer_pair;
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Observations the proxy recorded.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

/// A running proxy with one fault.
pub struct H2Proxy {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
    pub seen: Arc<Recorder>,
}

impl Drop for H2Proxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A proxy to `upstream` with the fault defined by `toml` (one `[[fault]]` table's keys),
/// observing HTTP so that h2 connections are carried by the stream relay.
pub async fn h2_proxy(upstream: SocketAddr, toml: &str) -> H2Proxy {
    let table: toml::Table = toml::from_str(toml).expect("fault TOML");
    let def = FaultDef::from_pairs(table);
    let Ok(Built::Conn(factory)) = build(&def) else {
        panic!("not a connection fault: {toml}");
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut cfg = ProxyConfig::new("h2", upstream.to_string());
    cfg.drain_timeout = Duration::from_secs(2);
    let proxy = Proxy::with_faults(cfg, vec![factory]);
    let seen = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = seen.clone();
    let s2 = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| observer_pair(conn, s2.clone())));
    proxy.set_sink(Some(sink));
    let shutdown = CancellationToken::new();
    tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    H2Proxy {
        addr,
        shutdown,
        seen,
    }
}

/// Bodies of hyper's responses.
pub type Body = BoxBody<Bytes, Infallible>;

fn full(b: &'static [u8]) -> Body {
    http_body_util::Full::new(Bytes::from_static(b)).boxed()
}

/// The routes of the hyper server: `/json` (a small body), `/big` (256 KiB in 16 KiB
/// frames), `/open` (an SSE stream: one event, then open until the connection ends).
fn respond(path: &str) -> http::Response<Body> {
    let builder = http::Response::builder().status(200);
    let body = match path {
        "/big" => {
            let chunks = futures_util::stream::iter(
                (0..16u8).map(|i| Ok::<_, Infallible>(Frame::data(Bytes::from(vec![i; 16_384])))),
            );
            http_body_util::StreamBody::new(chunks).boxed()
        }
        "/open" => {
            let first = futures_util::stream::iter([Ok::<_, Infallible>(Frame::data(
                Bytes::from_static(b"data: first\n\n"),
            ))]);
            let rest = futures_util::stream::pending();
            let body = http_body_util::StreamBody::new(futures_util::StreamExt::chain(first, rest));
            return builder
                .header("content-type", "text/event-stream")
                .body(body.boxed())
                .expect("response");
        }
        _ => full(b"{\"ok\":true}"),
    };
    builder.body(body).expect("response")
}

/// hyper's HTTP/2 server (prior knowledge) on 127.0.0.1:0.
pub async fn hyper_h2_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc =
                    hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| {
                        let resp = respond(req.uri().path());
                        async move { Ok::<_, Infallible>(resp) }
                    });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// hyper's HTTP/2 client (prior knowledge) connected to `addr`, with a 64 KiB stream window.
pub async fn hyper_h2_client(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<Body> {
    let s = TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(65_535)
        .initial_connection_window_size(4 << 20)
        .handshake(TokioIo::new(s))
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    send
}

/// A GET of `path` for hyper's client.
pub fn get(path: &str) -> http::Request<Body> {
    http::Request::get(format!("http://127.0.0.1{path}"))
        .body(full(b""))
        .expect("request")
}

/// One frame as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub header: FrameHeader,
    pub payload: Vec<u8>,
}

/// A frame-level HTTP/2 endpoint on one TCP connection.
pub struct Raw {
    s: TcpStream,
    buf: Vec<u8>,
    /// Frames read and not yet taken.
    pub log: Vec<Read>,
}

impl Raw {
    /// A client: connects, writes the preface and an empty SETTINGS.
    pub async fn client(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).await.expect("connect");
        let mut raw = Raw::over(s);
        raw.write(PREFACE).await;
        raw.frame(FrameType::Settings, 0, 0, &[]).await;
        raw
    }

    /// A server: reads the client's preface, writes an empty SETTINGS.
    pub async fn server(mut s: TcpStream) -> Raw {
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.expect("preface");
        assert_eq!(&preface, PREFACE);
        let mut raw = Raw::over(s);
        raw.frame(FrameType::Settings, 0, 0, &[]).await;
        raw
    }

    fn over(s: TcpStream) -> Raw {
        s.set_nodelay(true).expect("nodelay");
        Raw {
            s,
            buf: Vec::new(),
            log: Vec::new(),
        }
    }

    async fn write(&mut self, b: &[u8]) {
        self.s.write_all(b).await.expect("write");
    }

    /// Writes one frame.
    pub async fn frame(&mut self, kind: FrameType, flags: u8, stream: u32, payload: &[u8]) {
        let len = u32::try_from(payload.len()).expect("small frame");
        let h = FrameHeader {
            len,
            kind,
            flags,
            stream,
        };
        let mut b = h.encode().to_vec();
        b.extend_from_slice(payload);
        self.write(&b).await;
    }

    /// Writes a request `HEADERS` (GET `path`, one frame, END_STREAM).
    pub async fn get(&mut self, stream: u32, path: &str) {
        let mut block = vec![0x82, 0x86];
        literal(&mut block, 0x04, path);
        literal(&mut block, 0x01, "127.0.0.1");
        let f = flags::END_HEADERS | flags::END_STREAM;
        self.frame(FrameType::Headers, f, stream, &block).await;
    }

    /// Reads the next frame; `None` at EOF or on a reset. SETTINGS (not ACKs) are
    /// acknowledged, PINGs (not ACKs) answered, as an endpoint does; every frame is returned.
    pub async fn next(&mut self) -> Option<Read> {
        loop {
            if let Some(h) = FrameHeader::parse(&self.buf)
                && self.buf.len() >= h.frame_len()
            {
                let payload = self.buf[HEADER_LEN..h.frame_len()].to_vec();
                self.buf.drain(..h.frame_len());
                if h.kind == FrameType::Settings && !h.has(flags::ACK) {
                    self.frame(FrameType::Settings, flags::ACK, 0, &[]).await;
                }
                if h.kind == FrameType::Ping && !h.has(flags::ACK) {
                    self.frame(FrameType::Ping, flags::ACK, 0, &payload).await;
                }
                return Some(Read { header: h, payload });
            }
            let mut chunk = [0u8; 16_384];
            match self.s.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads frames until one satisfies `want` (returned); `None` if the connection ends first.
    /// Every frame read before it is kept in `log`.
    pub async fn until(&mut self, want: impl Fn(&Read) -> bool) -> Option<Read> {
        while let Some(f) = self.next().await {
            if want(&f) {
                return Some(f);
            }
            self.log.push(f);
        }
        None
    }
}

/// An HPACK literal header field without indexing, name from static index `name` (a 4-bit
/// prefix, so `name` < 15), value `v` (< 128 bytes, no Huffman).
pub fn literal(block: &mut Vec<u8>, name: u8, v: &str) {
    block.push(name);
    block.push(u8::try_from(v.len()).expect("short value"));
    block.extend_from_slice(v.as_bytes());
}

/// The response `HEADERS` block `:status: 200`, `content-type: text/event-stream`.
pub fn sse_response_block() -> Vec<u8> {
    // content-type is static index 31: 4-bit prefix 15, then 16.
    let mut block = vec![0x88, 0x0f, 0x10];
    block.push(17);
    block.extend_from_slice(b"text/event-stream");
    block
}

/// A server that accepts one connection and hands it over.
pub async fn one_connection() -> (SocketAddr, tokio::sync::oneshot::Receiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Ok((s, _)) = listener.accept().await {
            let _ = tx.send(s);
        }
    });
    (addr, rx)
}

/// A signal between a test and its scripted peer.
pub fn signal() -> Arc<Notify> {
    Arc::new(Notify::new())
}
