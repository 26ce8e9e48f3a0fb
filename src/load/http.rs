//! A minimal HTTP/1.1 client on a raw tokio socket: one request, its response head, and the
//! body as the chunks that actually arrived, chunked encoding decoded. A target that speaks
//! HTTP/2 goes through [`super::h2`] behind the same [`Conn`], [`Response`] and [`Body`]
//! (END_STREAM is a clean end; RST_STREAM, GOAWAY or a lost connection a broken one).
//!
//! Why not a full client: the load client must see exactly which body bytes arrived before a
//! disconnect and must tell a clean end of body (last chunk, full length) from a broken one
//! (EOF or reset inside the body). [`Body::next`] returns [`Next::End`] if and only if the body
//! ended by its own framing; any other stop is an [`HttpError`]. Every wait is bounded by a
//! deadline, so a silent peer turns into [`HttpError::Timeout`], never a hang. Bytes are moved
//! per read, never per byte; the read buffer grows only to the largest head or chunk line.

use std::io;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::config::Target;
use super::h2::{H2Body, Sender};
use crate::wire::h2::frame::ErrorCode;
use crate::wire::http1_body::{BodyDecoder, Piece};

const READ_SIZE: usize = 64 * 1024;
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;
/// A JSON body larger than this is refused (the largest lab result is a few MiB).
pub const MAX_JSON_BODY: usize = 256 * 1024 * 1024;

/// Why a request or its response failed at the HTTP level.
#[derive(Debug, Error)]
pub enum HttpError {
    /// The TLS handshake with an https:// target failed (the message names the reason).
    #[error("{0}")]
    Tls(#[source] crate::tls::TlsError),
    /// TCP connect failed (refused, unreachable, bad name).
    #[error("cannot connect to {addr}")]
    Connect {
        /// `host:port` that was dialled.
        addr: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// A socket read or write failed (reset, broken pipe).
    #[error("socket error")]
    Io(#[source] io::Error),
    /// Nothing (or not enough) arrived before the deadline.
    #[error("timed out waiting for the server")]
    Timeout,
    /// The peer closed before a complete response head.
    #[error("connection closed before a response head")]
    ClosedBeforeHead,
    /// The bytes are not an HTTP/1.x response.
    #[error("not an HTTP/1.x response")]
    NotHttp(#[source] Option<httparse::Error>),
    /// The body stopped before its framing said it ends (EOF mid-chunk or short length).
    #[error("body truncated before its end")]
    Truncated,
    /// A chunk size line or chunk terminator is malformed.
    #[error("malformed chunked framing")]
    BadChunk,
    /// A JSON body exceeded [`MAX_JSON_BODY`].
    #[error("body too large")]
    TooLarge,
    /// HTTP/2: the server (or a proxy) reset the stream with RST_STREAM `code`.
    #[error("HTTP/2 stream reset ({})", code.name())]
    Reset {
        /// The RST_STREAM error code.
        code: ErrorCode,
    },
    /// HTTP/2: the connection ended by GOAWAY `code` with this stream unfinished.
    #[error("HTTP/2 connection ended by GOAWAY ({})", code.name())]
    GoAway {
        /// The GOAWAY error code.
        code: ErrorCode,
    },
}

/// `h2-reset-<code>` for each named code, in [`ErrorCode::NAMED`] order.
const RESET_KINDS: [&str; 14] = [
    "h2-reset-no_error",
    "h2-reset-protocol_error",
    "h2-reset-internal_error",
    "h2-reset-flow_control_error",
    "h2-reset-settings_timeout",
    "h2-reset-stream_closed",
    "h2-reset-frame_size_error",
    "h2-reset-refused_stream",
    "h2-reset-cancel",
    "h2-reset-compression_error",
    "h2-reset-connect_error",
    "h2-reset-enhance_your_calm",
    "h2-reset-inadequate_security",
    "h2-reset-http_1_1_required",
];

/// `h2-goaway-<code>` for each named code, in [`ErrorCode::NAMED`] order.
const GOAWAY_KINDS: [&str; 14] = [
    "h2-goaway-no_error",
    "h2-goaway-protocol_error",
    "h2-goaway-internal_error",
    "h2-goaway-flow_control_error",
    "h2-goaway-settings_timeout",
    "h2-goaway-stream_closed",
    "h2-goaway-frame_size_error",
    "h2-goaway-refused_stream",
    "h2-goaway-cancel",
    "h2-goaway-compression_error",
    "h2-goaway-connect_error",
    "h2-goaway-enhance_your_calm",
    "h2-goaway-inadequate_security",
    "h2-goaway-http_1_1_required",
];

/// The label of `code` among `kinds` (`other` for a code outside the named ones).
fn code_kind(kinds: &[&'static str; 14], code: ErrorCode, other: &'static str) -> &'static str {
    usize::try_from(code.0)
        .ok()
        .and_then(|i| kinds.get(i))
        .copied()
        .unwrap_or(other)
}

impl HttpError {
    /// A stable label for counting errors by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            HttpError::Connect { .. } => "connect",
            HttpError::Tls(_) => "tls",
            HttpError::Io(_) => "io",
            HttpError::Timeout => "timeout",
            HttpError::ClosedBeforeHead => "closed-before-head",
            HttpError::NotHttp(_) => "not-http",
            HttpError::Truncated => "truncated",
            HttpError::BadChunk => "bad-chunk",
            HttpError::TooLarge => "too-large",
            HttpError::Reset { code } => code_kind(&RESET_KINDS, *code, "h2-reset-other"),
            HttpError::GoAway { code } => code_kind(&GOAWAY_KINDS, *code, "h2-goaway-other"),
        }
    }
}

/// One open connection to the target: an HTTP/1.1 socket of its own, or a handle on one of
/// the target's pooled h2 connections (when the target speaks HTTP/2, see [`super::h2`]).
#[derive(Debug)]
pub enum Conn {
    /// HTTP/1.1: one request at a time on this socket.
    H1(H1Conn),
    /// HTTP/2: each request on a new stream of a shared connection.
    H2(Sender),
}

/// An HTTP/1.1 connection: the socket and what was read from it but not yet consumed.
#[derive(Debug)]
pub struct H1Conn {
    stream: crate::tls::Stream,
    buf: BytesMut,
}

/// A request to send: method, extra headers and body (the target supplies Host and path).
#[derive(Debug)]
pub struct Request<'a> {
    /// `GET`, `POST`, `DELETE`.
    pub method: &'a str,
    /// Header lines beyond Host and Content-Length.
    pub headers: &'a [(&'a str, &'a str)],
    /// Body bytes (empty for GET).
    pub body: &'a [u8],
}

impl Conn {
    /// Connects with TCP_NODELAY, failing after `timeout`; for an HTTP/2 target, takes a
    /// connection of its pool (dialling it if needed).
    pub async fn connect(target: &Target, timeout: Duration) -> Result<Conn, HttpError> {
        match &target.h2 {
            Some(pool) => pool.checkout(target, timeout).await.map(Conn::H2),
            None => H1Conn::connect(target, timeout).await.map(Conn::H1),
        }
    }

    /// Sends `req` to `target.path` and reads the response head before `deadline`.
    pub async fn send(
        self,
        target: &Target,
        req: &Request<'_>,
        deadline: Instant,
    ) -> Result<Response, HttpError> {
        match self {
            Conn::H1(c) => c.send(target, req, deadline).await,
            Conn::H2(s) => {
                let r = super::h2::send(s, target, req, deadline).await?;
                Ok(Response {
                    status: r.status,
                    headers: r.headers,
                    body: Body(BodyKind::H2(r.body)),
                })
            }
        }
    }
}

impl H1Conn {
    async fn connect(target: &Target, timeout: Duration) -> Result<H1Conn, HttpError> {
        let addr = format!("{}:{}", target.host, target.port);
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(HttpError::Connect { addr, source }),
            Err(_) => return Err(HttpError::Timeout),
        };
        stream.set_nodelay(true).map_err(HttpError::Io)?;
        let stream = match &target.tls {
            None => crate::tls::Stream::Plain(stream),
            Some(tls) => {
                let handshake = tls.0.connect(stream, &addr);
                match tokio::time::timeout(timeout, handshake).await {
                    Ok(Ok(s)) => s.into(),
                    Ok(Err(e)) => return Err(HttpError::Tls(e)),
                    Err(_) => return Err(HttpError::Timeout),
                }
            }
        };
        Ok(H1Conn {
            stream,
            buf: BytesMut::with_capacity(READ_SIZE),
        })
    }

    async fn send(
        mut self,
        target: &Target,
        req: &Request<'_>,
        deadline: Instant,
    ) -> Result<Response, HttpError> {
        let mut head = format!(
            "{} {} HTTP/1.1\r\nHost: {}:{}\r\n",
            req.method, target.path, target.host, target.port
        );
        if !req.body.is_empty() || req.method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", req.body.len()));
        }
        for (name, value) in req.headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let write = async {
            self.stream.write_all(head.as_bytes()).await?;
            self.stream.write_all(req.body).await?;
            self.stream.flush().await
        };
        match tokio::time::timeout_at(deadline, write).await {
            Ok(r) => r.map_err(HttpError::Io)?,
            Err(_) => return Err(HttpError::Timeout),
        }
        self.read_head(deadline).await
    }

    async fn fill(&mut self, deadline: Instant) -> Result<usize, HttpError> {
        if self.buf.capacity() - self.buf.len() < READ_SIZE / 4 {
            self.buf.reserve(READ_SIZE);
        }
        match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
            Ok(r) => r.map_err(HttpError::Io),
            Err(_) => Err(HttpError::Timeout),
        }
    }

    async fn read_head(mut self, deadline: Instant) -> Result<Response, HttpError> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&self.buf) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = parsed.code.unwrap_or(0);
                    let headers: Vec<(String, String)> = parsed
                        .headers
                        .iter()
                        .map(|h| {
                            let value = String::from_utf8_lossy(h.value).trim().to_string();
                            (h.name.to_ascii_lowercase(), value)
                        })
                        .collect();
                    self.buf.advance(len);
                    if (100..200).contains(&status) {
                        continue;
                    }
                    return Ok(Response::new(status, headers, self));
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                    return Err(HttpError::NotHttp(None));
                }
                Ok(httparse::Status::Partial) => {}
                Err(e) => return Err(HttpError::NotHttp(Some(e))),
            }
            if self.fill(deadline).await? == 0 {
                return Err(if self.buf.is_empty() {
                    HttpError::ClosedBeforeHead
                } else {
                    HttpError::NotHttp(None)
                });
            }
        }
    }
}

/// A response: status, headers (names lower-cased) and the body still on the socket.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header (name, value) pairs; names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body reader (owns the connection).
    pub body: Body,
}

impl Response {
    fn new(status: u16, headers: Vec<(String, String)>, conn: H1Conn) -> Response {
        let find = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        let chunked =
            find("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let close = find("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let decoder = if status == 204 || status == 304 {
            BodyDecoder::length(0)
        } else if chunked {
            BodyDecoder::chunked()
        } else if let Some(len) = find("content-length").and_then(|v| v.parse::<u64>().ok()) {
            BodyDecoder::length(len)
        } else {
            BodyDecoder::Close
        };
        let reusable = !close && decoder != BodyDecoder::Close;
        Response {
            status,
            headers,
            body: Body(BodyKind::H1(H1Body {
                conn,
                decoder,
                done: false,
                consume: 0,
                reusable,
            })),
        }
    }

    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// True if the Content-Type is `text/event-stream`.
    pub fn is_event_stream(&self) -> bool {
        self.header("content-type")
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"))
    }
}

/// What [`Body::next`] yields.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// Body bytes as they arrived (decoded from chunked framing).
    Data(&'a [u8]),
    /// The body ended by its own framing.
    End,
}

/// The body of a response, read chunk by chunk.
#[derive(Debug)]
pub struct Body(BodyKind);

#[derive(Debug)]
enum BodyKind {
    H1(H1Body),
    H2(H2Body),
}

impl Body {
    /// The next piece of body, or its end. Errors mean the body broke before its end.
    pub async fn next(&mut self, deadline: Instant) -> Result<Next<'_>, HttpError> {
        match &mut self.0 {
            BodyKind::H1(b) => b.next(deadline).await,
            BodyKind::H2(b) => b.next(deadline).await,
        }
    }

    /// Reads the whole body (bounded by [`MAX_JSON_BODY`]).
    pub async fn read_all(&mut self, deadline: Instant) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        while let Next::Data(d) = self.next(deadline).await? {
            if out.len() + d.len() > MAX_JSON_BODY {
                return Err(HttpError::TooLarge);
            }
            out.extend_from_slice(d);
        }
        Ok(out)
    }

    /// The connection for another request, if and only if this body ended cleanly and the
    /// server keeps the connection open.
    pub fn into_conn(self) -> Option<Conn> {
        match self.0 {
            BodyKind::H1(b) => b.into_conn().map(Conn::H1),
            BodyKind::H2(b) => b.into_sender().map(Conn::H2),
        }
    }
}

/// An HTTP/1.1 body, decoded by its framing.
#[derive(Debug)]
struct H1Body {
    conn: H1Conn,
    /// The wire's decoder: the client and the proxy's observer frame bodies alike.
    decoder: BodyDecoder,
    /// The body ended by its own framing.
    done: bool,
    consume: usize,
    reusable: bool,
}

impl H1Body {
    async fn next(&mut self, deadline: Instant) -> Result<Next<'_>, HttpError> {
        let n = std::mem::take(&mut self.consume);
        self.conn.buf.advance(n);
        loop {
            if self.done {
                return Ok(Next::End);
            }
            let finished = self.decoder == BodyDecoder::length(0);
            if !self.conn.buf.is_empty() || finished {
                match self.decoder.step(&self.conn.buf) {
                    Piece::Data(take) => {
                        self.consume = take;
                        return Ok(Next::Data(&self.conn.buf[..take]));
                    }
                    Piece::Framing(skip) => {
                        self.conn.buf.advance(skip);
                        continue;
                    }
                    Piece::End(skip) => {
                        self.conn.buf.advance(skip);
                        self.done = true;
                        return Ok(Next::End);
                    }
                    Piece::Invalid => return Err(HttpError::BadChunk),
                }
            }
            if self.conn.fill(deadline).await? == 0 {
                if self.decoder == BodyDecoder::Close {
                    self.done = true;
                    self.reusable = false;
                    return Ok(Next::End);
                }
                return Err(HttpError::Truncated);
            }
        }
    }

    fn into_conn(mut self) -> Option<H1Conn> {
        let n = std::mem::take(&mut self.consume);
        self.conn.buf.advance(n);
        (self.done && self.reusable && self.conn.buf.is_empty()).then_some(self.conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_h2_code_has_its_own_reset_and_goaway_kind() {
        for (i, (name, code)) in ErrorCode::NAMED.iter().enumerate() {
            assert_eq!(code.0 as usize, i, "NAMED is in code order");
            let reset = HttpError::Reset { code: *code }.kind();
            let goaway = HttpError::GoAway { code: *code }.kind();
            assert_eq!(reset, format!("h2-reset-{name}"));
            assert_eq!(goaway, format!("h2-goaway-{name}"));
        }
        let unknown = ErrorCode(0xff);
        assert_eq!(HttpError::Reset { code: unknown }.kind(), "h2-reset-other");
        assert_eq!(
            HttpError::GoAway { code: unknown }.kind(),
            "h2-goaway-other"
        );
    }
}
