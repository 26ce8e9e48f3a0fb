//! ALPN through the proxy with real peers: curl (`--http2`, `--http2-prior-knowledge`) as the
//! client and hyper's HTTP/1.1 and HTTP/2 servers behind rustls as origins. The proxy must
//! offer the client what the upstream speaks and speak the same upstream: h2 on both sides
//! when both can, HTTP/1.1 on both when the origin or `--upstream-alpn` says so, nothing
//! offered when the client offered nothing, and a client sharing no protocol with the pin
//! refused with TLS's `no_application_protocol` alert.
//!
//! Each origin answers `origin=<the HTTP version it saw>;alpn=<what its TLS selected>`, so a
//! test reads both sides of the proxy from one response: curl's `%{http_version}` is the
//! client side, the body is the upstream side.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, body::Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tearline::tls::{AlpnProtocol, ProxyTls, Stream, Terminator, Upstream, UpstreamOptions};
use tearline::vocab::WireProtocol;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::common::tls::*;

const LIMIT: Duration = Duration::from_secs(60);
const H2: &[u8] = b"h2";
const H1: &[u8] = b"http/1.1";

/// Answers with the HTTP version the request came in and the ALPN of its connection.
async fn answer(
    req: Request<Incoming>,
    alpn: Arc<str>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = format!("origin={:?};alpn={alpn}", req.version());
    Ok(Response::new(Full::new(Bytes::from(body))))
}

/// Serves one connection with hyper: HTTP/2 if `h2`, else HTTP/1.1.
async fn serve<S>(io: S, h2: bool, alpn: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let alpn: Arc<str> = alpn.into();
    let svc = service_fn(move |req| answer(req, alpn.clone()));
    let io = TokioIo::new(io);
    let _ = if h2 {
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, svc)
            .await
    } else {
        hyper::server::conn::http1::Builder::new()
            .serve_connection(io, svc)
            .await
    };
}

/// An HTTPS origin whose TLS selects from `alpn` and that speaks what it selected (HTTP/1.1
/// when it selected nothing).
async fn tls_origin(t: Arc<Terminator>, alpn: &[&[u8]]) -> SocketAddr {
    let list: Vec<Vec<u8>> = alpn.iter().map(|p| p.to_vec()).collect();
    let acceptor = TlsAcceptor::from(t.config_selecting(&list));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(s) = acceptor.accept(tcp).await else {
                    return;
                };
                let picked = s.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                let name = picked.as_deref().map_or("none".to_owned(), |p| {
                    String::from_utf8_lossy(p).into_owned()
                });
                serve(s, picked.as_deref() == Some(H2), &name).await;
            });
        }
    });
    addr
}

/// A cleartext HTTP/2 origin (h2c, prior knowledge).
async fn h2c_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(serve(tcp, true, "none"));
        }
    });
    addr
}

fn trusting(ca_dir: &Path) -> Option<Arc<Upstream>> {
    let opts = UpstreamOptions {
        ca: vec![ca_dir.join("ca.pem")],
        no_system_roots: true,
        ..UpstreamOptions::default()
    };
    Some(Arc::new(Upstream::new(&opts).unwrap()))
}

/// A proxy terminating TLS (its CA file returned) in front of `upstream`, which it reaches
/// over TLS trusting `upstream_ca` if given, else in clear; pinned to `pin`.
async fn proxy(
    upstream: SocketAddr,
    upstream_ca: Option<&Path>,
    pin: Vec<AlpnProtocol>,
    dir: &Path,
) -> (Running, PathBuf) {
    let t = terminator(dir);
    let ca = t.ca_file().unwrap().to_owned();
    let p = start_proxy(
        &format!("localhost:{}", upstream.port()),
        |c| {
            c.tls = ProxyTls {
                client: Some(t),
                upstream: upstream_ca.and_then(trusting),
                upstream_alpn: pin,
                ..ProxyTls::default()
            }
        },
        Vec::new(),
    )
    .await;
    (p, ca)
}

/// Runs curl with `args` against `url`; returns its output and `version=<http_version>` last.
async fn curl(args: &[&str], ca: Option<&Path>, url: &str) -> String {
    let mut cmd = tokio::process::Command::new("curl");
    cmd.kill_on_drop(true)
        .args(["-sS", "--max-time", "30"])
        .args(args);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    cmd.args(["-w", "\nversion=%{http_version}", url]);
    let out: Output = tokio::time::timeout(LIMIT, cmd.output())
        .await
        .expect("curl finishes")
        .expect("curl starts");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "curl failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[tokio::test]
async fn curl_gets_h2_on_both_sides_from_an_h2_origin_through_tls_termination() {
    let (origin_ca, proxy_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = tls_origin(terminator(origin_ca.path()), &[H2, H1]).await;
    let (p, ca) = proxy(origin, Some(origin_ca.path()), Vec::new(), proxy_ca.path()).await;
    let url = format!("https://localhost:{}/", p.addr.port());
    let out = curl(&["--http2"], Some(&ca), &url).await;
    assert_eq!(
        out, "origin=HTTP/2.0;alpn=h2\nversion=2",
        "client and origin"
    );
}

#[tokio::test]
async fn upstream_alpn_http1_gives_http1_on_both_sides_even_before_an_h2_origin() {
    let (origin_ca, proxy_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = tls_origin(terminator(origin_ca.path()), &[H2, H1]).await;
    let pin = vec![AlpnProtocol::Http1];
    let (p, ca) = proxy(origin, Some(origin_ca.path()), pin, proxy_ca.path()).await;
    let url = format!("https://localhost:{}/", p.addr.port());
    let out = curl(&["--http2"], Some(&ca), &url).await;
    assert_eq!(out, "origin=HTTP/1.1;alpn=http/1.1\nversion=1.1");
}

#[tokio::test]
async fn an_http1_only_origin_gives_http1_to_an_h2_capable_client() {
    let (origin_ca, proxy_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = tls_origin(terminator(origin_ca.path()), &[H1]).await;
    let (p, ca) = proxy(origin, Some(origin_ca.path()), Vec::new(), proxy_ca.path()).await;
    let url = format!("https://localhost:{}/", p.addr.port());
    let out = curl(&["--http2"], Some(&ca), &url).await;
    assert_eq!(out, "origin=HTTP/1.1;alpn=http/1.1\nversion=1.1");
}

#[tokio::test]
async fn an_origin_that_selects_no_alpn_gives_the_client_none_and_http1() {
    let (origin_ca, proxy_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = tls_origin(terminator(origin_ca.path()), &[]).await;
    let (p, ca) = proxy(origin, Some(origin_ca.path()), Vec::new(), proxy_ca.path()).await;
    let mut s = tls_connect_offering(p.addr, &ca, &[H2, H1]).await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), None, "nothing was selected");
    let resp = get(&mut s, "localhost").await;
    assert!(resp.ends_with("origin=HTTP/1.1;alpn=none"), "{resp}");
}

#[tokio::test]
async fn a_client_offering_no_alpn_has_none_offered_upstream() {
    let (origin_ca, proxy_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // This origin would pick h2 if offered it, and refuses a client offering only other ones.
    let origin = tls_origin(terminator(origin_ca.path()), &[H2, H1]).await;
    let (p, ca) = proxy(origin, Some(origin_ca.path()), Vec::new(), proxy_ca.path()).await;
    let mut s = tls_connect_offering(p.addr, &ca, &[]).await.unwrap();
    assert_eq!(s.get_ref().1.alpn_protocol(), None);
    let resp = get(&mut s, "localhost").await;
    assert!(resp.ends_with("origin=HTTP/1.1;alpn=none"), "{resp}");
}

#[tokio::test]
async fn a_client_sharing_no_protocol_with_the_pin_is_refused_with_no_application_protocol() {
    let (origin_ca, proxy_ca) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = tls_origin(terminator(origin_ca.path()), &[H2, H1]).await;
    let pin = vec![AlpnProtocol::Http1];
    let (p, ca) = proxy(origin, Some(origin_ca.path()), pin, proxy_ca.path()).await;
    let e = tls_connect_offering(p.addr, &ca, &[H2])
        .await
        .expect_err("no protocol in common");
    let inner = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<rustls::Error>())
        .unwrap_or_else(|| panic!("a TLS alert, not {e}"));
    assert_eq!(
        *inner,
        rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)
    );
}

#[tokio::test]
async fn a_tls_client_picks_h2_before_a_cleartext_h2c_upstream_pinned_to_h2() {
    let proxy_ca = tempfile::tempdir().unwrap();
    let origin = h2c_origin().await;
    let pin = vec![AlpnProtocol::H2];
    let (p, ca) = proxy(origin, None, pin, proxy_ca.path()).await;
    let url = format!("https://localhost:{}/", p.addr.port());
    let out = curl(&["--http2"], Some(&ca), &url).await;
    assert_eq!(out, "origin=HTTP/2.0;alpn=none\nversion=2");
}

#[tokio::test]
async fn a_plain_client_speaks_h2c_to_a_tls_upstream_pinned_to_h2() {
    let origin_ca = tempfile::tempdir().unwrap();
    let origin = tls_origin(terminator(origin_ca.path()), &[H2, H1]).await;
    let p = start_proxy(
        &format!("localhost:{}", origin.port()),
        |c| {
            c.tls = ProxyTls {
                upstream: trusting(origin_ca.path()),
                upstream_alpn: vec![AlpnProtocol::H2],
                ..ProxyTls::default()
            }
        },
        Vec::new(),
    )
    .await;
    let url = format!("http://127.0.0.1:{}/", p.addr.port());
    let out = curl(&["--http2-prior-knowledge"], None, &url).await;
    assert_eq!(out, "origin=HTTP/2.0;alpn=h2\nversion=2");
    // Unpinned, a plain client's TLS upstream is offered HTTP/1.1 only.
    let p = start_proxy(
        &format!("localhost:{}", origin.port()),
        |c| c.tls.upstream = trusting(origin_ca.path()),
        Vec::new(),
    )
    .await;
    let mut c = TcpStream::connect(p.addr).await.unwrap();
    let resp = get(&mut c, "localhost").await;
    assert!(resp.ends_with("origin=HTTP/1.1;alpn=http/1.1"), "{resp}");
}

#[tokio::test]
async fn an_upstream_refusing_the_offered_alpn_is_named_with_the_offer_and_the_flag() {
    let origin_ca = tempfile::tempdir().unwrap();
    let origin = tls_origin(terminator(origin_ca.path()), &[H1]).await;
    let upstream = trusting(origin_ca.path()).unwrap();
    let tcp = TcpStream::connect(origin).await.unwrap();
    let addr = format!("localhost:{}", origin.port());
    let e = upstream
        .connect_offering(tcp, &addr, &[H2.to_vec()])
        .await
        .expect_err("the origin speaks no h2");
    let text = e.to_string();
    assert!(
        text.contains("none of the ALPN protocols offered (h2)"),
        "{text}"
    );
    assert!(text.contains("--upstream-alpn"), "{text}");
}

#[tokio::test]
async fn a_connection_names_the_protocol_its_alpn_negotiated_on_either_side() {
    let origin_ca = tempfile::tempdir().unwrap();
    let origin = tls_origin(terminator(origin_ca.path()), &[H2, H1]).await;
    let ca = origin_ca.path().join("ca.pem");
    let h2 = Stream::from(tls_connect_offering(origin, &ca, &[H2, H1]).await.unwrap());
    assert_eq!(h2.alpn(), Some(H2));
    assert_eq!(h2.protocol(), Some(WireProtocol::H2));
    let h1 = Stream::from(tls_connect_offering(origin, &ca, &[H1]).await.unwrap());
    assert_eq!(h1.protocol(), Some(WireProtocol::Http1));
    let none = Stream::from(tls_connect_offering(origin, &ca, &[]).await.unwrap());
    assert_eq!(none.alpn(), None);
    let plain = Stream::from(TcpStream::connect(origin).await.unwrap());
    assert_eq!(plain.protocol(), None);
    assert_eq!(
        tearline::tls::negotiated(&plain, &h2),
        Some(WireProtocol::H2),
        "a plain client before an h2 upstream"
    );
    assert_eq!(
        tearline::tls::negotiated(&h1, &h2),
        Some(WireProtocol::Http1),
        "the client side first"
    );
    assert_eq!(tearline::tls::negotiated(&plain, &none), None);
}

/// Connects to the proxy over TLS trusting `ca`, offering `alpn`.
async fn tls_connect_offering(
    addr: SocketAddr,
    ca: &Path,
    alpn: &[&[u8]],
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut cfg = (*client_config(ca)).clone();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
}
