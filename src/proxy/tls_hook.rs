//! Where TLS enters a connection: the handshake with the client after accept, and with the
//! upstream after connect (see `crate::tls` for the configurations).
//!
//! Invariants: each handshake is bounded by the proxy's `connect_timeout`; a failure is logged
//! once (a bad upstream certificate at `warn`, naming the upstream, the SNI and the reason) and
//! yields `None`, after which the connection task resets what is left. A proxy with no TLS
//! configured passes the TCP socket through unchanged.

use tokio::net::TcpStream;
use tokio::time::timeout;

use super::state::Proxy;
use crate::tls::Stream;

/// The client socket, after the TLS handshake if the proxy terminates TLS.
pub(crate) async fn client_side(proxy: &Proxy, tcp: TcpStream) -> Option<Stream> {
    let Some(t) = proxy.config().tls.client.clone() else {
        return Some(Stream::Plain(tcp));
    };
    let limit = proxy.config().connect_timeout;
    match timeout(limit, t.accept(tcp)).await {
        Ok(Ok(s)) => Some(s.into()),
        Ok(Err(e)) => {
            let hint = match t.ca_file() {
                Some(ca) => format!(
                    " (does the client trust {}? does it speak TLS?)",
                    ca.display()
                ),
                None => " (does the client trust the certificate? does it speak TLS?)".into(),
            };
            tracing::warn!(error = %e, "{e}{hint}");
            None
        }
        Err(_) => {
            tracing::warn!(timeout = ?limit, "TLS handshake with the client timed out");
            None
        }
    }
}

/// The upstream socket, after the TLS handshake if the proxy originates TLS.
pub(crate) async fn upstream_side(proxy: &Proxy, tcp: TcpStream, addr: &str) -> Option<Stream> {
    let Some(u) = proxy.config().tls.upstream.clone() else {
        return Some(Stream::Plain(tcp));
    };
    let limit = proxy.config().connect_timeout;
    match timeout(limit, u.connect(tcp, addr)).await {
        Ok(Ok(s)) => Some(s.into()),
        Ok(Err(e)) => {
            tracing::warn!(upstream = %addr, "{e}; client reset");
            None
        }
        Err(_) => {
            tracing::warn!(upstream = %addr, timeout = ?limit, "TLS handshake with the upstream timed out; client reset");
            None
        }
    }
}
