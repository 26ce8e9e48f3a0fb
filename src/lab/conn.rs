//! The lab's protocol layer: one accepted socket served as HTTP/1.1, h2c or h2, below every
//! MCP and LLM behaviour.
//!
//! Why a layer of its own: the lab's handlers speak `http::Request`/`Response` and an SSE body
//! that yields frames; which wire protocol carries them is decided here and nowhere else, so
//! the MCP behaviour (sessions, `Last-Event-ID` resumption, rings, bugs, LLM mocks) is the
//! same over HTTP/1.1 and HTTP/2 by construction. This module imports nothing of the lab
//! above it: it is handed a hyper service.
//!
//! Invariants:
//! - On a plain socket the first bytes decide: the HTTP/2 connection preface means h2c (prior
//!   knowledge), anything else HTTP/1.1 (hyper-util's auto builder sniffs it).
//! - Over TLS the lab offers ALPN `h2` then `http/1.1`; a client that picks `h2` gets HTTP/2,
//!   one that picks `http/1.1` or offers no ALPN gets HTTP/1.1 (the preface still decides).
//! - An SSE body is a streaming body on either protocol: each frame the lab hands its body
//!   goes out as it is produced (an HTTP/1.1 chunk, or an h2 `DATA` frame), never buffered
//!   to the end. A reader that goes away (socket closed, or its h2 stream reset) drops the body,
//!   which is how the producers see a disconnect on both protocols.
//! - The header read timeout applies to HTTP/1.1 requests; HTTP/2 connections are kept alive
//!   by hyper's own timers and end when the client or the shutdown ends them.

use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// The ALPN protocols the lab offers over TLS, in preference order.
pub const LAB_ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The lab's TLS acceptor: the terminator's certificate, offering [`LAB_ALPN`].
pub fn acceptor(tls: &crate::tls::Terminator) -> TlsAcceptor {
    let mut config = (*tls.config()).clone();
    config.alpn_protocols = LAB_ALPN.iter().map(|p| p.to_vec()).collect();
    TlsAcceptor::from(Arc::new(config))
}

/// Runs the TLS handshake (when `tls` is given) on an accepted socket.
pub async fn handshake(
    tcp: TcpStream,
    tls: Option<&TlsAcceptor>,
) -> std::io::Result<crate::tls::Stream> {
    match tls {
        None => Ok(tcp.into()),
        Some(acceptor) => acceptor.accept(tcp).await.map(Into::into),
    }
}

/// Serves `stream` with `svc` as HTTP/1.1 or HTTP/2 (see the module invariants) until the
/// connection ends; the error, if any, is the connection's.
pub async fn serve<S, B>(
    stream: crate::tls::Stream,
    svc: S,
    read_timeout: Duration,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: Service<http::Request<Incoming>, Response = http::Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout);
    builder.http2().timer(TokioTimer::new());
    builder.serve_connection(TokioIo::new(stream), svc).await
}
