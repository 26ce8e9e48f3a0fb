//! The facts of an HTTP/2 header list, in the shapes the HTTP/1.1 observer reads
//! ([`RequestHead`], [`ResponseHead`]), so that an h2 exchange reports exactly the facts an
//! HTTP/1.1 one does.
//!
//! Why a collector: fields arrive one at a time from the HPACK decoder (borrowed from its
//! buffers); only the few the observer reports are copied, never the whole list.
//!
//! Invariants: names are matched case-insensitively (h2 requires lower case; a peer that breaks
//! that still reports its facts); values are trimmed and decoded lossily, as HTTP/1.1 heads are;
//! the first `:method`, `:path`, `:status` wins. An h2 body is delimited by frames
//! (`END_STREAM`), so every head's framing is [`Framing::Unspecified`].

use crate::wire::http1_head::{Framing, RequestHead, ResponseHead};

/// The fields of one header block the observer reads.
#[derive(Debug, Default)]
pub(super) struct Fields {
    method: Option<String>,
    path: Option<String>,
    status: Option<u16>,
    session: Option<String>,
    last_event_id: Option<String>,
    protocol_version: Option<String>,
    has_authorization: bool,
    idempotency_key: Option<String>,
    accept: Option<String>,
    retry_count: Option<u32>,
    content_type: Option<String>,
    content_encoding: Option<String>,
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).trim().to_string()
}

impl Fields {
    /// Takes one field of the block.
    pub(super) fn field(&mut self, name: &[u8], value: &[u8]) {
        let set = |slot: &mut Option<String>| {
            if slot.is_none() {
                *slot = Some(text(value));
            }
        };
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        if is(":method") {
            set(&mut self.method);
        } else if is(":path") {
            set(&mut self.path);
        } else if is(":status") {
            if self.status.is_none() {
                self.status = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
            }
        } else if is("mcp-session-id") {
            set(&mut self.session);
        } else if is("last-event-id") {
            set(&mut self.last_event_id);
        } else if is("mcp-protocol-version") {
            set(&mut self.protocol_version);
        } else if is("authorization") {
            self.has_authorization = true;
        } else if is("idempotency-key") {
            set(&mut self.idempotency_key);
        } else if is("accept") {
            set(&mut self.accept);
        } else if is("x-stainless-retry-count") {
            self.retry_count = std::str::from_utf8(value)
                .ok()
                .and_then(|s| s.trim().parse().ok());
        } else if is("content-type") {
            set(&mut self.content_type);
        } else if is("content-encoding") {
            set(&mut self.content_encoding);
        }
    }

    /// The block's `:status` (a response head, not trailers).
    #[cfg(test)]
    pub(super) fn status(&self) -> Option<u16> {
        self.status
    }

    /// True if the block carried `:method` (a request head, not trailers).
    pub(super) fn is_request(&self) -> bool {
        self.method.is_some()
    }

    /// The request head these fields make (`:path` `*`-less CONNECT has none: empty).
    pub(super) fn request(self) -> RequestHead {
        let method = self.method.unwrap_or_default();
        RequestHead {
            leaves_http: method == "CONNECT",
            path: self.path.unwrap_or_default(),
            session: self.session,
            last_event_id: self.last_event_id,
            protocol_version: self.protocol_version,
            has_authorization: self.has_authorization,
            idempotency_key: self.idempotency_key.filter(|k| !k.is_empty()),
            accepts_event_stream: self
                .accept
                .is_none_or(|a| a.to_ascii_lowercase().contains("text/event-stream")),
            framing: Framing::Unspecified,
            method,
            retry_count: self.retry_count,
        }
    }

    /// The response head these fields make (`None` without a valid `:status`).
    pub(super) fn response(self) -> Option<ResponseHead> {
        Some(ResponseHead {
            status: self.status?,
            content_type: self.content_type,
            content_encoding: self
                .content_encoding
                .filter(|e| !e.eq_ignore_ascii_case("identity")),
            session: self.session,
            framing: Framing::Unspecified,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_list_gives_the_facts_an_http1_head_gives() {
        let mut f = Fields::default();
        for (n, v) in [
            (":method", "POST"),
            (":path", "/mcp"),
            (":authority", "x"),
            ("Mcp-Session-Id", " s1 "),
            ("authorization", "Bearer secret"),
            ("accept", "application/json, text/event-stream"),
            ("idempotency-key", ""),
            ("x-stainless-retry-count", "2"),
        ] {
            f.field(n.as_bytes(), v.as_bytes());
        }
        assert!(f.is_request() && f.status().is_none());
        let r = f.request();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/mcp"));
        assert_eq!(r.session.as_deref(), Some("s1"));
        assert!(r.has_authorization && r.accepts_event_stream && !r.leaves_http);
        assert_eq!((r.idempotency_key, r.retry_count), (None, Some(2)));
    }

    #[test]
    fn a_response_list_needs_a_status_and_identity_is_no_encoding() {
        let mut f = Fields::default();
        f.field(b"content-type", b"text/event-stream");
        f.field(b"content-encoding", b"identity");
        assert!(Fields::default().response().is_none());
        f.field(b":status", b"200");
        let r = f.response().unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type.as_deref(), Some("text/event-stream"));
        assert_eq!(r.content_encoding, None);
    }
}
