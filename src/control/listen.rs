//! Binding a proxy's listen address the way Toxiproxy (Go's `net.Listen("tcp", addr)`) does,
//! with Go's error texts, which Toxiproxy's clients and tests compare word for word.
//!
//! Invariants: an address resolves to exactly one socket address, as in Go: an IP literal is
//! itself; an empty host is every interface (`[::]`, dual-stack, as Go listens); a host name is
//! its first IPv4 address, else its first address. Every failure is a 500 whose text is Go's:
//! `listen tcp: address local373: missing port in address` for an address that does not parse,
//! `listen tcp 127.0.0.1:3310: bind: address already in use` — the *resolved* address — for
//! one that does not bind.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use http::StatusCode;
use tokio::net::TcpListener;

use super::errors::ApiError;

/// Why an address could not be resolved, in Go's words (`address X: missing port in address`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveError(pub String);

fn internal(message: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// Splits `host:port` as Go's `net.SplitHostPort` does, with its error texts.
fn split_host_port(addr: &str) -> Result<(&str, &str), ResolveError> {
    let fail = |why: &str| Err(ResolveError(format!("address {addr}: {why}")));
    let Some(colon) = addr.rfind(':') else {
        return fail("missing port in address");
    };
    let (host, port) = (&addr[..colon], &addr[colon + 1..]);
    if let Some(inner) = host.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return fail("missing ']' in address");
        };
        return Ok((inner, port));
    }
    if host.contains(':') {
        return fail("too many colons in address");
    }
    if host.contains('[') || host.contains(']') {
        return fail("unexpected '[' in address");
    }
    Ok((host, port))
}

/// A port as Go reads it: empty is 0, digits up to 65535, else an error naming the port.
fn parse_port(port: &str) -> Result<u16, ResolveError> {
    if port.is_empty() {
        return Ok(0);
    }
    if port.bytes().all(|b| b.is_ascii_digit()) {
        return port
            .parse::<u16>()
            .map_err(|_| ResolveError(format!("address {port}: invalid port")));
    }
    Err(ResolveError(format!("lookup tcp/{port}: unknown port")))
}

/// The first IPv4 address of `found`, else its first address (as Go picks a listen address).
pub fn prefer_ipv4(found: &[SocketAddr]) -> Option<SocketAddr> {
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .copied()
}

/// Resolves `addr` to the one socket address Go would listen on (see the module doc).
pub async fn resolve(addr: &str) -> Result<SocketAddr, ResolveError> {
    let (host, port) = split_host_port(addr)?;
    let port = parse_port(port)?;
    if host.is_empty() {
        return Ok(SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let no_host = || ResolveError(format!("lookup {host}: no such host"));
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| no_host())?
        .collect();
    prefer_ipv4(&found).ok_or_else(no_host)
}

/// `listen` resolved and printed as Toxiproxy prints a proxy's address (`localhost:7070` →
/// `127.0.0.1:7070`); the error is Go's `ResolveTCPAddr` text.
pub async fn resolved(listen: &str) -> Result<String, ApiError> {
    resolve(listen)
        .await
        .map(|a| a.to_string())
        .map_err(|e| internal(e.0))
}

/// Binds `listen` with the proxy's deep backlog; errors are Go's `net.Listen` texts (500).
pub async fn bind(listen: &str) -> Result<TcpListener, ApiError> {
    let addr = resolve(listen)
        .await
        .map_err(|e| internal(format!("listen tcp: {}", e.0)))?;
    crate::proxy::listen(addr)
        .map_err(|e| internal(format!("listen tcp {addr}: {}", go_net_error(&e))))
}

/// Go's wording of the common bind failures (what Toxiproxy clients see), else the OS text.
fn go_net_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => "bind: address already in use".to_owned(),
        std::io::ErrorKind::AddrNotAvailable => "bind: cannot assign requested address".to_owned(),
        std::io::ErrorKind::PermissionDenied => "bind: permission denied".to_owned(),
        _ => format!("bind: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(r: Result<SocketAddr, ResolveError>) -> String {
        r.err().map(|e| e.0).unwrap_or_default()
    }

    #[tokio::test]
    async fn addresses_resolve_as_go_resolves_them() {
        let ok = |s: &str| s.parse::<SocketAddr>().ok();
        assert_eq!(resolve("localhost:7070").await.ok(), ok("127.0.0.1:7070"));
        assert_eq!(resolve(":7070").await.ok(), ok("[::]:7070"));
        assert_eq!(resolve("[::1]:7").await.ok(), ok("[::1]:7"));
        assert_eq!(resolve("127.0.0.1:").await.ok(), ok("127.0.0.1:0"));
    }

    #[tokio::test]
    async fn bad_addresses_get_gos_error_texts() {
        assert_eq!(
            err(resolve("local373").await),
            "address local373: missing port in address"
        );
        assert_eq!(
            err(resolve("localhost:99999").await),
            "address 99999: invalid port"
        );
        assert_eq!(
            err(resolve("a:b:1").await),
            "address a:b:1: too many colons in address"
        );
        assert_eq!(
            err(resolve("[::1:80").await),
            "address [::1:80: missing ']' in address"
        );
        assert_eq!(
            err(resolve("localhost:http2x").await),
            "lookup tcp/http2x: unknown port"
        );
    }

    #[tokio::test]
    async fn a_port_in_use_names_the_resolved_address() {
        let Ok(held) = std::net::TcpListener::bind("127.0.0.1:0") else {
            return;
        };
        let port = held.local_addr().map(|a| a.port()).unwrap_or_default();
        let e = bind(&format!("localhost:{port}")).await.err();
        assert_eq!(
            e.map(|e| (e.status, e.message)),
            Some((
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("listen tcp 127.0.0.1:{port}: bind: address already in use")
            ))
        );
    }
}
