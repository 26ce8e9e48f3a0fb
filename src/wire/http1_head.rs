//! HTTP/1.1 message heads: incremental accumulation and the facts the observers need.
//!
//! It exists so that a head split across any number of reads is parsed once, not re-parsed per
//! read (no quadratic work): the end of the head is found by looking only at new line feeds, and
//! `httparse` runs when the end is found (and, to reject non-HTTP traffic early, on every read
//! while the head is still shorter than [`EARLY_PARSE`] bytes).
//!
//! Invariants: a head longer than [`HEAD_LIMIT`] bytes, one `httparse` rejects, one with more
//! than [`MAX_HEADERS`] fields, or a version other than HTTP/1.x makes the direction opaque.
//! Empty lines before a head are skipped (RFC 9112 §2.2).

use memchr::memchr_iter;

/// Heads longer than this make the direction opaque.
pub const HEAD_LIMIT: usize = 64 * 1024;
/// Heads with more fields than this make the direction opaque.
pub const MAX_HEADERS: usize = 100;
/// While the head is shorter than this, every read is parsed to detect non-HTTP early.
const EARLY_PARSE: usize = 1024;

/// What feeding bytes to a [`HeadBuf`] gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeadStatus {
    /// More bytes are needed; all given bytes were taken.
    Partial,
    /// The head is complete after this many of the given bytes.
    Complete(usize),
    /// Not an HTTP/1.x head (or too large): opaque from here on.
    Invalid,
}

/// Which kind of head a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HeadKind {
    Request,
    Response,
}

/// Accumulates one head across reads.
#[derive(Debug)]
pub(super) struct HeadBuf {
    kind: HeadKind,
    buf: Vec<u8>,
}

impl HeadBuf {
    pub(super) fn new(kind: HeadKind) -> Self {
        HeadBuf {
            kind,
            buf: Vec::new(),
        }
    }

    /// The bytes of the completed head (valid after `Complete`, until the next `push`).
    /// Bytes held (capacity of the buffer).
    pub(super) fn held(&self) -> usize {
        self.buf.capacity()
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Prepares for the next head.
    pub(super) fn clear(&mut self) {
        self.buf.clear();
    }

    /// Takes bytes of the head.
    pub(super) fn push(&mut self, bytes: &[u8]) -> HeadStatus {
        let mut skipped = 0;
        if self.buf.is_empty() {
            skipped = bytes
                .iter()
                .position(|b| !matches!(b, b'\r' | b'\n'))
                .unwrap_or(bytes.len());
        }
        let bytes = &bytes[skipped..];
        let old = self.buf.len();
        // An end of head is an LF preceded by LF or by LF CR; look at new LFs only.
        let end = memchr_iter(b'\n', bytes).find_map(|j| {
            let at = old + j;
            let before = |k: usize| {
                if k <= j {
                    bytes.get(j - k).copied()
                } else {
                    self.buf.get(at.checked_sub(k)?).copied()
                }
            };
            let blank =
                before(1) == Some(b'\n') || (before(1) == Some(b'\r') && before(2) == Some(b'\n'));
            blank.then_some(j + 1)
        });
        let take = end.unwrap_or(bytes.len());
        if old + take > HEAD_LIMIT {
            return HeadStatus::Invalid;
        }
        self.buf.extend_from_slice(&bytes[..take]);
        match end {
            Some(n) => match self.parse_check() {
                Some(true) => HeadStatus::Complete(skipped + n),
                _ => HeadStatus::Invalid,
            },
            None if self.buf.len() < EARLY_PARSE && self.parse_check().is_none() => {
                HeadStatus::Invalid
            }
            None => HeadStatus::Partial,
        }
    }

    /// `Some(complete)` if the buffer is a valid (partial) head, `None` if it is not HTTP/1.x.
    fn parse_check(&self) -> Option<bool> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let status = match self.kind {
            HeadKind::Request => httparse::Request::new(&mut headers).parse(&self.buf),
            HeadKind::Response => httparse::Response::new(&mut headers).parse(&self.buf),
        };
        status.ok().map(|s| s.is_complete())
    }
}

/// The facts of a request head.
#[derive(Debug, Clone, Default)]
pub(super) struct RequestHead {
    pub method: String,
    pub path: String,
    pub session: Option<String>,
    pub last_event_id: Option<String>,
    pub protocol_version: Option<String>,
    pub has_authorization: bool,
    /// `Idempotency-Key` (IETF httpapi draft): the client's name for one logical call, repeated
    /// on every re-send of it (the audit's proof of a re-send).
    pub idempotency_key: Option<String>,
    /// No `Accept` header, or one naming `text/event-stream`.
    pub accepts_event_stream: bool,
    pub framing: Framing,
    /// `Upgrade` requested, or `CONNECT`: the connection may stop being HTTP.
    pub leaves_http: bool,
    /// `X-Stainless-Retry-Count`: the attempt number the OpenAI and Anthropic SDKs send (0 on
    /// the first attempt, n on the n-th re-send of the same request).
    pub retry_count: Option<u32>,
}

/// The facts of a response head.
#[derive(Debug, Clone, Default)]
pub(super) struct ResponseHead {
    pub status: u16,
    pub content_type: Option<String>,
    /// `Content-Encoding`, when present and not `identity`.
    pub content_encoding: Option<String>,
    pub session: Option<String>,
    pub framing: Framing,
}

/// How a message body is delimited, from its headers alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum Framing {
    /// No length information.
    #[default]
    Unspecified,
    /// `Content-Length`.
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`.
    Chunked,
    /// `Transfer-Encoding` not ending in `chunked` (close-delimited for responses).
    OtherEncoding,
    /// Conflicting or invalid length fields.
    Invalid,
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).trim().to_string()
}

fn framing(headers: &[httparse::Header<'_>]) -> Framing {
    let mut len: Option<u64> = None;
    let mut te: Option<bool> = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let last = String::from_utf8_lossy(h.value);
            let chunked = last
                .rsplit(',')
                .next()
                .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"));
            te = Some(chunked);
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let Some(n) = std::str::from_utf8(h.value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
            else {
                return Framing::Invalid;
            };
            if len.is_some_and(|l| l != n) {
                return Framing::Invalid;
            }
            len = Some(n);
        }
    }
    match (te, len) {
        (Some(true), _) => Framing::Chunked,
        (Some(false), _) => Framing::OtherEncoding,
        (None, Some(n)) => Framing::Length(n),
        (None, None) => Framing::Unspecified,
    }
}

fn header(headers: &[httparse::Header<'_>], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .map(|h| text(h.value))
}

/// Parses a complete request head; `None` if it is not valid HTTP/1.x.
pub(super) fn parse_request(buf: &[u8]) -> Option<RequestHead> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if !req.parse(buf).ok()?.is_complete() {
        return None;
    }
    let method = req.method?.to_string();
    let upgrade = header(req.headers, "upgrade").is_some()
        && header(req.headers, "connection").is_some_and(|c| {
            c.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        });
    Some(RequestHead {
        leaves_http: upgrade || method == "CONNECT",
        path: req.path?.to_string(),
        session: header(req.headers, "mcp-session-id"),
        last_event_id: header(req.headers, "last-event-id"),
        protocol_version: header(req.headers, "mcp-protocol-version"),
        has_authorization: header(req.headers, "authorization").is_some(),
        idempotency_key: header(req.headers, "idempotency-key").filter(|k| !k.trim().is_empty()),
        accepts_event_stream: header(req.headers, "accept")
            .is_none_or(|a| a.to_ascii_lowercase().contains("text/event-stream")),
        framing: framing(req.headers),
        method,
        retry_count: header(req.headers, "x-stainless-retry-count").and_then(|v| v.parse().ok()),
    })
}

/// Parses a complete response head; `None` if it is not valid HTTP/1.x.
pub(super) fn parse_response(buf: &[u8]) -> Option<ResponseHead> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    if !resp.parse(buf).ok()?.is_complete() {
        return None;
    }
    Some(ResponseHead {
        status: resp.code?,
        content_type: header(resp.headers, "content-type"),
        content_encoding: header(resp.headers, "content-encoding")
            .filter(|e| !e.trim().eq_ignore_ascii_case("identity")),
        session: header(resp.headers, "mcp-session-id"),
        framing: framing(resp.headers),
    })
}

/// True if and only if `content_type` is `text/event-stream` (parameters ignored).
pub(super) fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|c| {
        c.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
    })
}

#[cfg(test)]
mod tests {
    use super::parse_request;

    fn accepts(accept: Option<&str>) -> Option<bool> {
        let line = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
        let req = format!("GET /favicon.ico HTTP/1.1\r\nHost: x\r\n{line}\r\n");
        parse_request(req.as_bytes()).map(|r| r.accepts_event_stream)
    }

    #[test]
    fn only_an_accept_naming_no_event_stream_is_not_an_event_source() {
        assert_eq!(accepts(None), Some(true));
        assert_eq!(accepts(Some("text/event-stream")), Some(true));
        assert_eq!(accepts(Some("Text/Event-Stream, */*")), Some(true));
        let favicon = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";
        assert_eq!(accepts(Some(favicon)), Some(false));
    }
}
