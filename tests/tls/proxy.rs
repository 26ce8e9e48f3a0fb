//! TLS through the proxy over loopback, with certificates made at test time: plain client →
//! TLS server (origination), TLS client → plain and TLS servers (termination), SNI and Host
//! carried, ALPN http/1.1, and a bad upstream certificate refused with an error naming the
//! host and the reason unless verification is turned off.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::tls::*;
use tearline::tls::{ProxyTls, Upstream, UpstreamOptions};
use tokio::net::TcpStream;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

fn upstream_tls(opts: UpstreamOptions) -> Option<Arc<Upstream>> {
    Some(Arc::new(Upstream::new(&opts).unwrap()))
}

fn trusting(ca: &std::path::Path) -> UpstreamOptions {
    UpstreamOptions {
        ca: vec![ca.join("ca.pem")],
        no_system_roots: true,
        ..UpstreamOptions::default()
    }
}

#[tokio::test]
async fn plain_client_reaches_a_tls_server_with_sni_from_the_upstream_host_and_host_unchanged() {
    timeout(LIMIT, async {
        let server_ca = tempfile::tempdir().unwrap();
        let server = tls_server(terminator(server_ca.path())).await;
        let upstream = format!("localhost:{}", server.port());
        let p = start_proxy(
            &upstream,
            |c| c.tls.upstream = upstream_tls(trusting(server_ca.path())),
            Vec::new(),
        )
        .await;
        let mut c = TcpStream::connect(p.addr).await.unwrap();
        let resp = get(&mut c, "api.test").await;
        assert!(resp.starts_with("HTTP/1.1 200 OK"), "{resp}");
        assert!(
            resp.ends_with("sni=localhost;host=api.test;alpn=http/1.1"),
            "{resp}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn upstream_sni_overrides_the_name_sent_and_verified() {
    timeout(LIMIT, async {
        let server_ca = tempfile::tempdir().unwrap();
        let server = tls_server(terminator(server_ca.path())).await;
        let opts = UpstreamOptions {
            sni: Some("localhost".into()),
            ..trusting(server_ca.path())
        };
        let p = start_proxy(
            &server.to_string(),
            |c| c.tls.upstream = upstream_tls(opts),
            Vec::new(),
        )
        .await;
        let mut c = TcpStream::connect(p.addr).await.unwrap();
        let resp = get(&mut c, "svc.internal").await;
        assert!(
            resp.ends_with("sni=localhost;host=svc.internal;alpn=http/1.1"),
            "{resp}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn tls_client_trusting_the_printed_ca_reaches_a_plain_server() {
    timeout(LIMIT, async {
        let proxy_ca = tempfile::tempdir().unwrap();
        let server = plain_server().await;
        let t = terminator(proxy_ca.path());
        let ca_file = t.ca_file().unwrap().to_owned();
        assert!(
            t.trust_line()
                .unwrap()
                .contains(&*ca_file.to_string_lossy())
        );
        let p = start_proxy(&server.to_string(), |c| c.tls.client = Some(t), Vec::new()).await;
        let mut s = tls_connect(p.addr, "localhost", &ca_file).await.unwrap();
        assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        let resp = get(&mut s, "localhost").await;
        assert!(
            resp.ends_with("sni=none;host=localhost;alpn=none"),
            "{resp}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn tls_client_reaches_a_tls_server_through_tls_on_both_sides() {
    timeout(LIMIT, async {
        let proxy_ca = tempfile::tempdir().unwrap();
        let server_ca = tempfile::tempdir().unwrap();
        let server = tls_server(terminator(server_ca.path())).await;
        let t = terminator(proxy_ca.path());
        let ca_file = t.ca_file().unwrap().to_owned();
        let p = start_proxy(
            &format!("localhost:{}", server.port()),
            |c| {
                c.tls = ProxyTls {
                    client: Some(t),
                    upstream: upstream_tls(trusting(server_ca.path())),
                    ..ProxyTls::default()
                }
            },
            Vec::new(),
        )
        .await;
        let mut s = tls_connect(p.addr, "127.0.0.1", &ca_file).await.unwrap();
        let resp = get(&mut s, "example.test").await;
        assert!(
            resp.ends_with("sni=localhost;host=example.test;alpn=http/1.1"),
            "{resp}"
        );
    })
    .await
    .unwrap();
}

/// A `MakeWriter` collecting the proxy's log lines.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What a client gets through a proxy to an upstream whose certificate comes from a CA made
/// for the test, with the upstream options `opts` (given another CA's directory), and the
/// proxy's log.
async fn through_bad_upstream(
    opts: impl FnOnce(&std::path::Path) -> UpstreamOptions,
) -> (String, String) {
    let logs = Logs::default();
    let sub = tracing_subscriber::fmt()
        .with_writer({
            let l = logs.clone();
            move || l.clone()
        })
        .with_ansi(false)
        .finish();
    // Current-thread runtime: every proxy task logs through this subscriber.
    let _guard = tracing::subscriber::set_default(sub);
    let server_ca = tempfile::tempdir().unwrap();
    let other_ca = tempfile::tempdir().unwrap();
    terminator(other_ca.path());
    let server = tls_server(terminator(server_ca.path())).await;
    let upstream = format!("localhost:{}", server.port());
    let o = opts(other_ca.path());
    let p = start_proxy(&upstream, |c| c.tls.upstream = upstream_tls(o), Vec::new()).await;
    let mut c = TcpStream::connect(p.addr).await.unwrap();
    let resp = get(&mut c, "x").await;
    let text = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    (resp, text)
}

#[tokio::test]
async fn bad_upstream_certificate_is_refused_with_an_error_naming_host_and_reason() {
    timeout(LIMIT, async {
        // The system roots only: the test CA is unknown to them.
        let (resp, log) = through_bad_upstream(|_| UpstreamOptions::default()).await;
        assert!(resp.is_empty(), "nothing must be relayed: {resp}");
        assert!(log.contains("TLS to upstream localhost:"), "{log}");
        assert!(log.contains("SNI 'localhost'"), "{log}");
        assert!(log.contains("unknown issuer"), "{log}");
        assert!(log.contains("--upstream-insecure"), "{log}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn upstream_certificate_for_another_name_is_refused_naming_the_name() {
    timeout(LIMIT, async {
        // Trust the right CA this time, but ask for a name the certificate does not carry.
        let logs_and_resp = async {
            let server_ca = tempfile::tempdir().unwrap();
            let server = tls_server(terminator(server_ca.path())).await;
            let opts = UpstreamOptions {
                sni: Some("other.test".into()),
                ..trusting(server_ca.path())
            };
            let u = Upstream::new(&opts).unwrap();
            let tcp = TcpStream::connect(server).await.unwrap();
            let upstream = format!("localhost:{}", server.port());
            u.connect(tcp, &upstream)
                .await
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let err = logs_and_resp.await;
        assert!(err.contains("localhost:"), "{err}");
        assert!(err.contains("not valid for the name 'other.test'"), "{err}");
        assert!(err.contains("--upstream-sni"), "{err}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn upstream_insecure_accepts_an_untrusted_certificate() {
    timeout(LIMIT, async {
        let (resp, log) = through_bad_upstream(|_| UpstreamOptions {
            insecure: true,
            no_system_roots: true,
            ..UpstreamOptions::default()
        })
        .await;
        assert!(
            resp.ends_with("sni=localhost;host=x;alpn=http/1.1"),
            "{resp}"
        );
        assert!(
            log.contains("NOT verified"),
            "the insecure mode must be logged: {log}"
        );
    })
    .await
    .unwrap();
}
