//! The usual test certificate, made by plain `openssl req -x509` (self-signed, `CA:TRUE`), is
//! trusted as the upstream's certificate when an `--upstream-ca` file holds it, as curl's
//! `--cacert` does; without it, or with a file holding another certificate, it is refused, and
//! the hint asks for `--upstream-ca` only when none was given.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::common::tls::*;
use tearline::tls::{Terminator, Upstream, UpstreamOptions};
use tokio::net::TcpStream;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(30);

/// Runs exactly the command line of the issue in `dir`; returns `(c.pem, k.pem)`.
fn openssl_req_x509(dir: &Path) -> (PathBuf, PathBuf) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "k.pem",
            "-out",
            "c.pem",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ])
        .output()
        .expect("openssl must be installed to run this test");
    assert!(
        out.status.success(),
        "openssl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir.join("c.pem"), dir.join("k.pem"))
}

/// An HTTPS server serving the openssl certificate made in `dir`.
async fn openssl_server(dir: &Path) -> (std::net::SocketAddr, PathBuf) {
    let (cert, key) = openssl_req_x509(dir);
    let t = Terminator::from_files(&cert, &key).unwrap();
    (tls_server(Arc::new(t)).await, cert)
}

/// The handshake result of an upstream client with `opts` to `server`, known as `upstream`.
async fn handshake(
    opts: &UpstreamOptions,
    server: std::net::SocketAddr,
    upstream: &str,
) -> Result<(), String> {
    let u = Upstream::new(opts).unwrap();
    let tcp = TcpStream::connect(server).await.unwrap();
    u.connect(tcp, upstream)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn openssl_self_signed_certificate_in_upstream_ca_is_trusted_by_name_and_by_ip() {
    timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let (server, cert) = openssl_server(dir.path()).await;
        for host in ["localhost", "127.0.0.1"] {
            let opts = UpstreamOptions {
                ca: vec![cert.clone()],
                ..UpstreamOptions::default()
            };
            let upstream = format!("{host}:{}", server.port());
            let p = start_proxy(
                &upstream,
                |c| c.tls.upstream = Some(Arc::new(Upstream::new(&opts).unwrap())),
                Vec::new(),
            )
            .await;
            let mut c = TcpStream::connect(p.addr).await.unwrap();
            let resp = get(&mut c, "api.test").await;
            assert!(resp.starts_with("HTTP/1.1 200 OK"), "{host}: {resp}");
            let sni = if host == "localhost" {
                "localhost"
            } else {
                "none"
            };
            assert!(
                resp.ends_with(&format!("sni={sni};host=api.test;alpn=http/1.1")),
                "{host}: {resp}"
            );
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn openssl_self_signed_certificate_without_upstream_ca_is_refused_asking_for_it() {
    timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let (server, _) = openssl_server(dir.path()).await;
        let upstream = format!("localhost:{}", server.port());
        let err = handshake(&UpstreamOptions::default(), server, &upstream)
            .await
            .unwrap_err();
        assert!(err.contains("certificate was refused"), "{err}");
        assert!(err.contains("with --upstream-ca FILE"), "{err}");
        assert!(err.contains("--upstream-insecure"), "{err}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn another_certificate_in_upstream_ca_refuses_it_without_asking_for_upstream_ca_again() {
    timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let (server, _) = openssl_server(dir.path()).await;
        let (other_cert, _) = openssl_req_x509(other.path());
        let opts = UpstreamOptions {
            ca: vec![other_cert],
            no_system_roots: true,
            ..UpstreamOptions::default()
        };
        let upstream = format!("localhost:{}", server.port());
        let err = handshake(&opts, server, &upstream).await.unwrap_err();
        assert!(err.contains("certificate was refused"), "{err}");
        assert!(
            !err.contains("with --upstream-ca FILE"),
            "--upstream-ca is given already: {err}"
        );
        assert!(
            err.contains("--upstream-ca files hold neither it nor a CA that signed it"),
            "{err}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn pinned_openssl_certificate_is_still_refused_for_a_name_it_does_not_carry() {
    timeout(LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let (server, cert) = openssl_server(dir.path()).await;
        let opts = UpstreamOptions {
            ca: vec![cert],
            sni: Some("other.test".into()),
            ..UpstreamOptions::default()
        };
        let upstream = format!("localhost:{}", server.port());
        let err = handshake(&opts, server, &upstream).await.unwrap_err();
        assert!(err.contains("not valid for the name 'other.test'"), "{err}");
        assert!(
            !err.contains("with --upstream-sni NAME"),
            "--upstream-sni is given already: {err}"
        );
    })
    .await
    .unwrap();
}
