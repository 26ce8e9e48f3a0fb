//! Who may talk to the control API, and how much they may send.
//!
//! The API reconfigures a developer's proxy, so a web page must never reach it: a request that
//! carries an `Origin` header, a `Sec-Fetch-Site` other than `none`, or a browser user agent
//! (`Mozilla/…`, refused by Toxiproxy too) is answered 403 before anything else. With a token
//! configured, a request without `Authorization: Bearer <token>` is answered 401 (compared in
//! constant time). Bodies are limited: past the limit the answer is 413; the excess is read and
//! discarded up to [`DRAIN_LIMIT`] so the client receives the answer instead of a reset.
//!
//! DNS rebinding (a page whose host name resolves to 127.0.0.1 once loaded) is refused by the
//! `Host` allowlist, whatever the user agent: [`check_host`] accepts only the loopback names,
//! the address the client connected to, and names the user allowed; anything else is 403.

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode, header};
use http_body_util::BodyExt;

use super::errors::ApiError;

/// Default request body limit.
pub const DEFAULT_MAX_BODY: usize = 64 * 1024;

/// Bytes of an oversized body read and discarded before answering 413.
pub const DRAIN_LIMIT: usize = 8 * 1024 * 1024;

/// Refuses browser-originated requests (403) and requests without the token (401).
pub fn check_headers(headers: &HeaderMap, token: Option<&str>) -> Result<(), ApiError> {
    if headers.contains_key(header::ORIGIN) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "requests with an Origin header are refused: a web page may not reconfigure the proxy",
        ));
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && site.as_bytes() != b"none"
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "requests from browsers (Sec-Fetch-Site) are refused: a web page may not reconfigure the proxy",
        ));
    }
    if headers
        .get(header::USER_AGENT)
        .is_some_and(|ua| ua.as_bytes().starts_with(b"Mozilla/"))
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "User agent not allowed",
        ));
    }
    if let Some(expected) = token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        if !given.is_some_and(|g| constant_time_eq(g, expected.as_bytes())) {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token (Authorization: Bearer <token>)",
            ));
        }
    }
    Ok(())
}

/// Refuses (403) a `Host` that is not `localhost`, a loopback address, the address the client
/// connected to (`local`), or one of `allowed` (names, any port). A request without `Host`
/// (HTTP/1.0 tools) passes: a browser always sends one.
pub fn check_host(
    headers: &HeaderMap,
    local: std::net::SocketAddr,
    allowed: &[String],
) -> Result<(), ApiError> {
    let Some(value) = headers.get(header::HOST) else {
        return Ok(());
    };
    let host = value.to_str().unwrap_or_default().trim();
    let name = host_name(host);
    let ok = name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip == local.ip())
        || allowed
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(name));
    if ok {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "Host '{host}' is not allowed: the control API answers only localhost, loopback \
             addresses and {} (a DNS-rebinding defence); to reach it by this name, start the \
             proxy with --api-allow-host {name}",
            local.ip()
        ),
    ))
}

/// The name part of a `Host` value (`[::1]:8474` → `::1`, `localhost:8474` → `localhost`).
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Equality whose time does not depend on where the inputs differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, y) in b.iter().enumerate() {
        let x = a.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// Reads a whole body of at most `max` bytes.
pub async fn read_body<B>(headers: &HeaderMap, body: B, max: usize) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body larger than {max} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = body;
    let mut buf = BytesMut::new();
    let mut seen: usize = 0;
    let mut over = declared.is_some_and(|d| d > max as u64);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ApiError::bad_body)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > max {
            over = true;
        }
        if over {
            buf.clear();
            if seen > DRAIN_LIMIT {
                break;
            }
            continue;
        }
        buf.extend_from_slice(&data);
    }
    if over {
        return Err(too_large());
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn origin_and_browser_fetch_are_forbidden_but_direct_navigation_is_not() {
        let s = |h: &HeaderMap| check_headers(h, None).err().map(|e| e.status);
        assert_eq!(
            s(&headers(&[("origin", "http://evil")])),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            s(&headers(&[("sec-fetch-site", "cross-site")])),
            Some(StatusCode::FORBIDDEN)
        );
        assert_eq!(s(&headers(&[("sec-fetch-site", "none")])), None);
        assert_eq!(s(&headers(&[("user-agent", "curl/8")])), None);
    }

    #[test]
    fn token_must_match_exactly() {
        let ok = headers(&[("authorization", "Bearer s3cret")]);
        let bad = headers(&[("authorization", "Bearer s3cre")]);
        assert!(check_headers(&ok, Some("s3cret")).is_ok());
        assert_eq!(
            check_headers(&bad, Some("s3cret")).err().map(|e| e.status),
            Some(StatusCode::UNAUTHORIZED)
        );
        assert!(check_headers(&HeaderMap::new(), Some("s3cret")).is_err());
    }

    #[test]
    fn constant_time_eq_handles_prefixes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert!(!constant_time_eq(b"abcd", b"abc"));
        assert!(!constant_time_eq(b"", b"a"));
    }
}

#[cfg(test)]
mod host_tests {
    use super::*;

    fn check(host: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, host.parse().expect("header value"));
        let local = "10.1.2.3:8474".parse().expect("addr");
        check_host(&h, local, &["proxy.lan".to_owned()]).is_ok()
    }

    #[test]
    fn loopback_names_the_bound_address_and_allowed_names_pass_others_are_refused() {
        for ok in [
            "localhost",
            "LOCALHOST:8474",
            "127.0.0.1:8474",
            "127.9.9.9",
            "[::1]:8474",
            "10.1.2.3:8474",
            "proxy.lan:1",
        ] {
            assert!(check(ok), "{ok} passes");
        }
        for bad in [
            "evil.example:8474",
            "10.1.2.4:8474",
            "localhost.evil",
            "[::2]:1",
        ] {
            assert!(!check(bad), "{bad} is refused");
        }
        assert!(check_host(&HeaderMap::new(), "10.1.2.3:1".parse().expect("addr"), &[]).is_ok());
    }
}
