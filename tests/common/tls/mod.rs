//! Loopback TLS peers for the TLS tests: servers that report what they saw (SNI, ALPN, Host),
//! clients that trust a given CA file, and a proxy with TLS settings. Certificates are made at
//! test time in temporary directories.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::RootCertStore;
use rustls_pki_types::ServerName;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::tls::{Terminator, load_certs};
use tearline::wire::{Observation, ObservationSink};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Names every test certificate carries.
pub fn names() -> Vec<String> {
    vec!["localhost".into(), "127.0.0.1".into()]
}

/// A terminator with a certificate for [`names`] from a fresh CA in `dir`.
pub fn terminator(dir: &Path) -> Arc<Terminator> {
    Arc::new(Terminator::self_signed(dir, &names()).expect("issue a test certificate"))
}

/// Reads a request head; returns its Host header.
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await.ok()? == 0 || head.len() > 16 * 1024 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("host").then(|| v.trim().to_owned())
        })
        .or(Some(String::new()))
}

async fn answer<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, sni: &str, alpn: &str) {
    let Some(host) = read_head(s).await else {
        return;
    };
    let body = format!("sni={sni};host={host};alpn={alpn}");
    let resp = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes()).await;
    let _ = s.shutdown().await;
}

/// An HTTPS server answering every request with `sni=…;host=…;alpn=…` (what it saw).
pub async fn tls_server(t: Arc<Terminator>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(t.config());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(tcp).await else {
                    return;
                };
                let conn = s.get_ref().1;
                let sni = conn.server_name().unwrap_or("none").to_owned();
                let alpn = conn.alpn_protocol().map_or("none".to_owned(), |a| {
                    String::from_utf8_lossy(a).into_owned()
                });
                answer(&mut s, &sni, &alpn).await;
            });
        }
    });
    addr
}

/// A plain HTTP server answering like [`tls_server`] (`sni=none;alpn=none`).
pub async fn plain_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move { answer(&mut s, "none", "none").await });
        }
    });
    addr
}

/// A TLS client configuration trusting only the CA in `ca_file`, offering ALPN http/1.1.
pub fn client_config(ca_file: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca_file).unwrap() {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Connects to `addr` over TLS as `name`, trusting `ca_file`.
pub async fn tls_connect(
    addr: SocketAddr,
    name: &str,
    ca_file: &Path,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(name.to_owned()).unwrap();
    TlsConnector::from(client_config(ca_file))
        .connect(name, tcp)
        .await
}

/// Sends `GET /` with `Host: host` and returns the whole response (until the end).
pub async fn get<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, host: &str) -> String {
    let req = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Records every observation.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        if let Ok(mut v) = self.0.lock() {
            v.push(obs);
        }
    }
}

/// A running proxy.
pub struct Running {
    pub addr: SocketAddr,
    pub proxy: Arc<Proxy>,
    pub shutdown: CancellationToken,
    pub rec: Arc<Recorder>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Starts a proxy to `upstream` (observing HTTP/SSE, recording observations) with `cfg`
/// edited by `edit` and the fault factories `faults`.
pub async fn start_proxy(
    upstream: &str,
    edit: impl FnOnce(&mut ProxyConfig),
    faults: tearline::proxy::FaultList,
) -> Running {
    let mut cfg = ProxyConfig::new("tls", upstream);
    cfg.drain_timeout = Duration::from_secs(1);
    edit(&mut cfg);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::with_faults(cfg, faults);
    let rec = Arc::new(Recorder::default());
    let sink: Arc<dyn ObservationSink> = rec.clone();
    let s2 = sink.clone();
    proxy.set_observer_factory(Arc::new(move |conn| {
        tearline::wire::http1::observer_pair(conn, s2.clone())
    }));
    proxy.set_sink(Some(sink));
    let shutdown = CancellationToken::new();
    tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    Running {
        addr,
        proxy,
        shutdown,
        rec,
    }
}
