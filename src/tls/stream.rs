//! A connection's socket as the relay holds it: plain TCP, or TLS over TCP (either role).
//!
//! Invariants: the TCP socket underneath is always reachable ([`Stream::tcp`]) so the relay
//! can set options, check the send queue and reset it; [`Stream::end`] ends the write side
//! with or without `close_notify`, as asked, and never with a RST; [`Stream::alpn`] is what
//! the TLS handshake negotiated (never anything on plain TCP), so the relay and the observer
//! can pick HTTP/2 from it ([`negotiated`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::TlsEnd;
use crate::vocab::WireProtocol;

/// A relay socket.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP (tearline as server or as client).
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Stream {
    /// True if this socket speaks TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// The ALPN protocol the TLS handshake selected (`None` on plain TCP or if none was).
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(t) => t.get_ref().1.alpn_protocol(),
        }
    }

    /// The protocol this socket's ALPN names, if it names one the relay knows.
    pub fn protocol(&self) -> Option<WireProtocol> {
        self.alpn().and_then(super::alpn::protocol_of)
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => t.get_ref().0,
        }
    }

    /// The TCP socket underneath, dropping any TLS state (nothing more is sent on it).
    pub fn into_tcp(self) -> TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => match *t {
                tokio_rustls::TlsStream::Client(c) => c.into_inner().0,
                tokio_rustls::TlsStream::Server(s) => s.into_inner().0,
            },
        }
    }

    /// Ends the write side: for TLS, `close_notify` then FIN, or (truncation) every pending
    /// record then FIN without the alert; for plain TCP, FIN.
    pub async fn end(&mut self, end: TlsEnd) -> io::Result<()> {
        match (self, end) {
            (Stream::Plain(s), _) => s.shutdown().await,
            (Stream::Tls(t), TlsEnd::CloseNotify) => t.shutdown().await,
            (Stream::Tls(t), TlsEnd::Truncated) => {
                t.flush().await?;
                t.get_mut().0.shutdown().await
            }
        }
    }
}

/// The protocol of a proxied connection as TLS negotiated it: the client side's ALPN, else
/// the upstream side's (a plain client before a TLS upstream pinned to `h2`); `None` when no
/// side negotiated a protocol the relay knows (plain TCP, or no ALPN: the first bytes tell).
pub fn negotiated(client: &Stream, upstream: &Stream) -> Option<WireProtocol> {
    client.protocol().or_else(|| upstream.protocol())
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Self {
        Stream::Plain(s)
    }
}

impl From<tokio_rustls::server::TlsStream<TcpStream>> for Stream {
    fn from(s: tokio_rustls::server::TlsStream<TcpStream>) -> Self {
        Stream::Tls(Box::new(tokio_rustls::TlsStream::Server(s)))
    }
}

impl From<tokio_rustls::client::TlsStream<TcpStream>> for Stream {
    fn from(s: tokio_rustls::client::TlsStream<TcpStream>) -> Self {
        Stream::Tls(Box::new(tokio_rustls::TlsStream::Client(s)))
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}
