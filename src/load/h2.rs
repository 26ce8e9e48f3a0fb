//! The load client's HTTP/2 transport: a small pool of h2 connections (h2c by prior knowledge
//! on `http://`, ALPN `h2` on `https://`) that many sessions multiplex their requests over,
//! as real HTTP/2 clients do, on hyper's http2 client.
//!
//! Why: `tearline load --http2` must put the same MCP calls on HTTP/2 streams and tell, as the
//! HTTP/1.1 client does ([`super::http`]), a clean end of body from a broken one.
//!
//! Invariants:
//! - A body ends cleanly ([`H2Body::next`] yields `Next::End`) if and only if its stream ended
//!   with END_STREAM. A stream reset ends it with [`HttpError::Reset`] carrying the
//!   RST_STREAM code, a GOAWAY with [`HttpError::GoAway`] carrying its code, the loss of the
//!   connection with [`HttpError::Io`]; every wait is bounded by the caller's deadline.
//! - The pool holds at most `connections` connections; slot `k` is (re)dialled only when its
//!   connection is gone, under the slot's lock, so a dead connection is replaced once, not
//!   once per session. Requests are spread over the slots round-robin.
//! - A request that never reached the server (its connection already closed, or refused by
//!   REFUSED_STREAM / a GOAWAY that excludes it) is [`HttpError::ClosedBeforeHead`], which the
//!   callers re-send on a fresh checkout, exactly like a stale HTTP/1.1 keep-alive connection.
//! - Body bytes are handed on per DATA frame as hyper received them (no copy); hyper returns
//!   flow-control credit as they are read, so a slow reader slows its stream, not the others.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use super::config::Target;
use super::h2_goaway::{GoawaySeen, Watch};
use super::http::{HttpError, Next, Request};
use crate::wire::h2::frame::ErrorCode;

/// One h2 connection's request handle (cheap to clone; all clones share the connection), with
/// the `GOAWAY` the connection received, if any.
#[derive(Clone)]
pub struct Sender {
    send: SendRequest<Full<Bytes>>,
    goaway: GoawaySeen,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sender(goaway: {:?})", self.goaway.code())
    }
}

impl Sender {
    /// True once the connection can take no new stream (closed, or told to go away).
    pub fn is_closed(&self) -> bool {
        self.send.is_closed()
    }
}

/// The pool of h2 connections one target's sessions share.
#[derive(Clone)]
pub struct H2Pool {
    inner: Arc<Inner>,
}

struct Inner {
    slots: Vec<Mutex<Option<Sender>>>,
    next: AtomicUsize,
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for H2Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "H2Pool({} connections)", self.inner.slots.len())
    }
}

impl PartialEq for H2Pool {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for H2Pool {}

impl H2Pool {
    /// A pool of at most `connections` (at least 1) h2c connections.
    pub fn plain(connections: usize) -> H2Pool {
        Self::with_tls(connections, None)
    }

    /// A pool of at most `connections` TLS connections offering ALPN `h2` only, trusting the
    /// system roots and every CA certificate in `cacert`.
    pub fn tls(connections: usize, cacert: &[PathBuf]) -> Result<H2Pool, crate::tls::TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        for file in cacert {
            for cert in crate::tls::load_certs(file)? {
                roots.add(cert)?;
            }
        }
        let mut config = rustls::ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Self::with_tls(
            connections,
            Some(TlsConnector::from(Arc::new(config))),
        ))
    }

    fn with_tls(connections: usize, tls: Option<TlsConnector>) -> H2Pool {
        H2Pool {
            inner: Arc::new(Inner {
                slots: (0..connections.max(1)).map(|_| Mutex::new(None)).collect(),
                next: AtomicUsize::new(0),
                tls,
            }),
        }
    }

    /// How many connections the pool may hold.
    pub fn connections(&self) -> usize {
        self.inner.slots.len()
    }

    /// A request handle on the next slot's connection, dialled within `timeout` if the slot
    /// has none or its connection is closed.
    pub async fn checkout(&self, target: &Target, timeout: Duration) -> Result<Sender, HttpError> {
        let i = self.inner.next.fetch_add(1, Ordering::Relaxed) % self.inner.slots.len();
        let mut slot = self.inner.slots[i].lock().await;
        if let Some(s) = slot.as_ref().filter(|s| !s.is_closed()) {
            return Ok(s.clone());
        }
        let sender = self.dial(target, timeout).await?;
        *slot = Some(sender.clone());
        Ok(sender)
    }

    async fn dial(&self, target: &Target, timeout: Duration) -> Result<Sender, HttpError> {
        let addr = format!("{}:{}", target.host, target.port);
        let deadline = Instant::now() + timeout;
        let tcp = match tokio::time::timeout_at(deadline, TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(HttpError::Connect { addr, source }),
            Err(_) => return Err(HttpError::Timeout),
        };
        tcp.set_nodelay(true).map_err(HttpError::Io)?;
        let stream: crate::tls::Stream = match &self.inner.tls {
            None => tcp.into(),
            Some(tls) => {
                let name =
                    rustls_pki_types::ServerName::try_from(target.host.clone()).map_err(|_| {
                        HttpError::Tls(crate::tls::TlsError::ServerName(target.host.clone()))
                    })?;
                let s = match tokio::time::timeout_at(deadline, tls.connect(name, tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        let mut reason = e.to_string();
                        if reason.contains("NoApplicationProtocol") {
                            reason.push_str(
                                ": the server accepts no ALPN h2, it does not speak HTTP/2 over TLS",
                            );
                        }
                        return Err(handshake_error(&addr, &target.host, reason));
                    }
                    Err(_) => return Err(HttpError::Timeout),
                };
                if s.get_ref().1.alpn_protocol() != Some(b"h2") {
                    return Err(handshake_error(
                        &addr,
                        &target.host,
                        "the server did not pick ALPN h2: it does not speak HTTP/2 over TLS".into(),
                    ));
                }
                s.into()
            }
        };
        let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
        builder.timer(TokioTimer::new());
        let goaway = GoawaySeen::default();
        let handshake = builder.handshake(TokioIo::new(Watch::new(stream, goaway.clone())));
        let (sender, conn) = match tokio::time::timeout_at(deadline, handshake).await {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => return Err(classify(&e, false)),
            Err(_) => return Err(HttpError::Timeout),
        };
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "load h2 connection ended with an error");
            }
        });
        Ok(Sender {
            send: sender,
            goaway,
        })
    }
}

fn handshake_error(addr: &str, host: &str, reason: String) -> HttpError {
    HttpError::Tls(crate::tls::TlsError::UpstreamHandshake {
        upstream: addr.to_owned(),
        sni: host.to_owned(),
        reason,
        hint: String::new(),
    })
}

/// A response head read from an h2 stream, and its body.
pub struct H2Response {
    /// The status code.
    pub status: u16,
    /// Header (name, value) pairs; names lower-case.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: H2Body,
}

/// Sends `req` on a new stream of `sender` and waits for its response head until `deadline`.
pub async fn send(
    mut sender: Sender,
    target: &Target,
    req: &Request<'_>,
    deadline: Instant,
) -> Result<H2Response, HttpError> {
    let scheme = if target.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let host = if target.host.contains(':') {
        format!("[{}]", target.host)
    } else {
        target.host.clone()
    };
    let mut builder = http::Request::builder()
        .method(req.method)
        .uri(format!("{scheme}://{host}:{}{}", target.port, target.path));
    for (name, value) in req.headers {
        builder = builder.header(*name, *value);
    }
    let request = builder
        .body(Full::new(Bytes::copy_from_slice(req.body)))
        .map_err(|e| HttpError::Io(std::io::Error::other(e)))?;
    let sent = async {
        sender.send.ready().await?;
        sender.send.send_request(request).await
    };
    let resp = match tokio::time::timeout_at(deadline, sent).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(classify(&e, false)),
        Err(_) => return Err(HttpError::Timeout),
    };
    let headers = resp
        .headers()
        .iter()
        .map(|(k, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).trim().to_owned();
            (k.as_str().to_owned(), value)
        })
        .collect();
    Ok(H2Response {
        status: resp.status().as_u16(),
        headers,
        body: H2Body {
            sender,
            incoming: resp.into_body(),
            chunk: Bytes::new(),
            done: false,
        },
    })
}

/// The body of one h2 stream, read DATA frame by DATA frame.
pub struct H2Body {
    sender: Sender,
    incoming: Incoming,
    chunk: Bytes,
    done: bool,
}

impl std::fmt::Debug for H2Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "H2Body(done: {})", self.done)
    }
}

impl H2Body {
    /// The next piece of body, or its end (END_STREAM). Errors mean the stream broke.
    pub async fn next(&mut self, deadline: Instant) -> Result<Next<'_>, HttpError> {
        loop {
            if self.done {
                return Ok(Next::End);
            }
            let frame = match tokio::time::timeout_at(deadline, self.incoming.frame()).await {
                Ok(f) => f,
                Err(_) => return Err(HttpError::Timeout),
            };
            match frame {
                None => {
                    self.done = true;
                    return Ok(Next::End);
                }
                Some(Err(e)) => return Err(self.after_goaway(classify(&e, true))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => {
                        self.chunk = data;
                        return Ok(Next::Data(&self.chunk));
                    }
                    // Empty DATA or trailers: nothing to hand on.
                    _ => continue,
                },
            }
        }
    }

    /// A stream broken by the close of its connection after the server's `GOAWAY` was ended
    /// by that `GOAWAY` (hyper reports only the close): the error says so, with its code.
    fn after_goaway(&self, e: HttpError) -> HttpError {
        match (e, self.sender.goaway.code()) {
            (HttpError::Io(_) | HttpError::Truncated, Some(code)) => HttpError::GoAway { code },
            (e, _) => e,
        }
    }

    /// The connection for another request, if and only if this stream ended cleanly.
    pub fn into_sender(self) -> Option<Sender> {
        (self.done && !self.sender.is_closed()).then_some(self.sender)
    }
}

/// What a hyper error on an h2 connection means to the load client; `in_body`: the response
/// head had arrived (so nothing is "before the head" any more).
pub fn classify(e: &hyper::Error, in_body: bool) -> HttpError {
    if e.is_timeout() {
        return HttpError::Timeout;
    }
    let h2 = std::error::Error::source(e).and_then(|s| s.downcast_ref::<h2::Error>());
    if let Some(h2) = h2 {
        let code = h2.reason().map(|r| ErrorCode(u32::from(r)));
        if h2.is_go_away() {
            let code = code.unwrap_or(ErrorCode::NO_ERROR);
            // A GOAWAY that excludes a stream the server never saw: safe to send again.
            if !in_body && h2.is_remote() && code == ErrorCode::NO_ERROR && e.is_canceled() {
                return HttpError::ClosedBeforeHead;
            }
            return HttpError::GoAway { code };
        }
        if let Some(code) = code {
            if !in_body && code == ErrorCode::REFUSED_STREAM {
                return HttpError::ClosedBeforeHead;
            }
            return HttpError::Reset { code };
        }
        if h2.is_io() {
            let kind = h2
                .get_io()
                .map_or(std::io::ErrorKind::Other, |io| io.kind());
            return HttpError::Io(std::io::Error::new(kind, h2.to_string()));
        }
    }
    if e.is_canceled() || e.is_closed() || e.is_incomplete_message() {
        return if in_body {
            HttpError::Truncated
        } else {
            HttpError::ClosedBeforeHead
        };
    }
    HttpError::Io(std::io::Error::other(e.to_string()))
}
