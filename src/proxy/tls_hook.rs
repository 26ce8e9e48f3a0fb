//! Where TLS enters a connection: the handshakes with the client and the upstream, run so that
//! both sides agree on one ALPN protocol (see `crate::tls::alpn` for the rule and
//! `crate::tls` for the configurations).
//!
//! Order: the client's ClientHello is read first (its ALPN list), then the upstream handshake
//! runs offering what that list allows, then the client's handshake finishes selecting what
//! the upstream picked. A plain side skips its steps.
//!
//! Invariants: each step (ClientHello, upstream handshake, client handshake) is bounded by the
//! proxy's `connect_timeout`; a failure is logged once (a bad upstream certificate at `warn`,
//! naming the upstream, the SNI and the reason; a client and a pin with no protocol in common
//! naming both lists) and yields `None` after the other socket is reset. A proxy with no TLS
//! configured passes both TCP sockets through unchanged. The returned streams carry the
//! negotiated protocol ([`Stream::alpn`], `crate::tls::negotiated`).

use tokio::net::TcpStream;
use tokio::time::timeout;

use super::conn::reset;
use super::state::Proxy;
use crate::tls::{Hello, Stream, Terminator, alpn};

/// The client and upstream sockets after their TLS handshakes (where the proxy speaks TLS).
pub(crate) async fn handshakes(
    proxy: &Proxy,
    client: TcpStream,
    upstream: TcpStream,
    addr: &str,
) -> Option<(Stream, Stream)> {
    let tls = &proxy.config().tls;
    if tls.is_plain() {
        return Some((Stream::Plain(client), Stream::Plain(upstream)));
    }
    let pin = tls.upstream_alpn.as_slice();
    // 1. The client's ClientHello, and what the upstream is offered.
    let (client, offer) = match tls.client.clone() {
        None => (Client::Plain(client), alpn::upstream_offer(None, pin)),
        Some(t) => {
            let Some(hello) = hello(proxy, &t, client).await else {
                reset(upstream);
                return None;
            };
            let offered = hello.alpn();
            let offer = alpn::upstream_offer(Some(&offered), pin);
            (Client::Tls(t, hello), offer)
        }
    };
    let offer = match offer {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(upstream = %addr, "{e}");
            if let Client::Tls(t, hello) = client {
                // rustls answers a list sharing nothing with the client's with the
                // `no_application_protocol` alert: the client learns why.
                let refusal = alpn::refusal(pin);
                let refused = timeout(proxy.config().connect_timeout, t.finish(hello, &refusal));
                let _ = refused.await;
            }
            reset(upstream);
            return None;
        }
    };
    // 2. The upstream, and what it picked.
    let Some(upstream) = upstream_side(proxy, upstream, addr, &offer).await else {
        reset(client.into_tcp());
        return None;
    };
    // 3. The client's handshake, selecting what the upstream speaks.
    let client = match client {
        Client::Plain(c) => Stream::Plain(c),
        Client::Tls(t, hello) => {
            let answer = upstream.is_tls().then(|| upstream.alpn());
            let select = alpn::client_selects(answer, pin);
            let Some(c) = client_finish(proxy, &t, hello, &select).await else {
                reset(upstream.into_tcp());
                return None;
            };
            c
        }
    };
    if client.is_tls() || upstream.is_tls() {
        tracing::debug!(
            client_alpn = %String::from_utf8_lossy(client.alpn().unwrap_or(b"none")),
            upstream_alpn = %String::from_utf8_lossy(upstream.alpn().unwrap_or(b"none")),
            offered_upstream = %alpn::names(&offer),
            "TLS handshakes done"
        );
    }
    Some((client, upstream))
}

/// The client side before its handshake finishes.
enum Client {
    Plain(TcpStream),
    Tls(std::sync::Arc<Terminator>, Hello),
}

impl Client {
    fn into_tcp(self) -> TcpStream {
        match self {
            Client::Plain(c) => c,
            Client::Tls(_, h) => h.into_tcp(),
        }
    }
}

/// The hint of a failed client handshake: the client may not trust the certificate, or may
/// not speak TLS at all.
fn client_hint(t: &Terminator) -> String {
    match t.ca_file() {
        Some(ca) => format!(
            " (does the client trust {}? does it speak TLS?)",
            ca.display()
        ),
        None => " (does the client trust the certificate? does it speak TLS?)".into(),
    }
}

/// Reads the client's ClientHello.
async fn hello(proxy: &Proxy, t: &Terminator, tcp: TcpStream) -> Option<Hello> {
    let limit = proxy.config().connect_timeout;
    match timeout(limit, t.start(tcp)).await {
        Ok(Ok(h)) => Some(h),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "{e}{}", client_hint(t));
            None
        }
        Err(_) => {
            tracing::warn!(timeout = ?limit, "TLS handshake with the client timed out (no ClientHello)");
            None
        }
    }
}

/// Finishes the client's handshake selecting from `select`.
async fn client_finish(
    proxy: &Proxy,
    t: &Terminator,
    hello: Hello,
    select: &[Vec<u8>],
) -> Option<Stream> {
    let limit = proxy.config().connect_timeout;
    match timeout(limit, t.finish(hello, select)).await {
        Ok(Ok(s)) => Some(s.into()),
        Ok(Err(e)) => {
            let alpn = alpn::names(select);
            tracing::warn!(error = %e, %alpn, "{e}{}", client_hint(t));
            None
        }
        Err(_) => {
            tracing::warn!(timeout = ?limit, "TLS handshake with the client timed out");
            None
        }
    }
}

/// The upstream socket, after the TLS handshake offering `offer` if the proxy originates TLS.
async fn upstream_side(
    proxy: &Proxy,
    tcp: TcpStream,
    addr: &str,
    offer: &[Vec<u8>],
) -> Option<Stream> {
    let Some(u) = proxy.config().tls.upstream.clone() else {
        return Some(Stream::Plain(tcp));
    };
    let limit = proxy.config().connect_timeout;
    match timeout(limit, u.connect_offering(tcp, addr, offer)).await {
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
