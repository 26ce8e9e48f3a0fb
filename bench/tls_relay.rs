//! TLS relay benchmark: one stream through tearline with TLS on neither side, the client side
//! only (termination), the upstream side only (origination), and both, in one run; printed as
//! MB/s and as ratios against the plain relay of the same run (the machine is shared and
//! noisy: only same-run ratios mean anything).
//!
//! Each mode runs `ROUNDS` times, interleaved (plain, client, upstream, both, plain, …), and the
//! best round of each mode is reported. Load and proxy run in separate tokio runtimes (two
//! worker threads each), as separate processes would. Certificates come from a local CA made
//! in a temporary directory.
//!
//! Run: `cargo bench --bench tls_relay` (`-- --mib N` per stream, default 256; `-- --rounds N`,
//! default 3).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls_pki_types::ServerName;
use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::tls::{ProxyTls, Stream, Terminator, Upstream, UpstreamOptions, load_certs};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;
use tokio::time::Instant;
use tokio_rustls::{TlsAcceptor, TlsConnector};

const MIB: u64 = 1024 * 1024;
const IO_BUF: usize = 256 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Plain,
    ClientTls,
    UpstreamTls,
    BothTls,
}

impl Mode {
    const ALL: [Mode; 4] = [
        Mode::Plain,
        Mode::ClientTls,
        Mode::UpstreamTls,
        Mode::BothTls,
    ];

    fn label(self) -> &'static str {
        match self {
            Mode::Plain => "plain relay",
            Mode::ClientTls => "TLS client side (termination)",
            Mode::UpstreamTls => "TLS upstream side (origination)",
            Mode::BothTls => "TLS both sides",
        }
    }

    fn client_tls(self) -> bool {
        matches!(self, Mode::ClientTls | Mode::BothTls)
    }

    fn upstream_tls(self) -> bool {
        matches!(self, Mode::UpstreamTls | Mode::BothTls)
    }
}

fn runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Reads every connection to EOF, then closes it (over TLS when `tls` is given).
async fn sink_server(tls: Option<Arc<Terminator>>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind sink");
    let addr = l.local_addr().expect("sink addr");
    let acceptor = tls.map(|t| TlsAcceptor::from(t.config()));
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = s.set_nodelay(true);
                match acceptor {
                    None => drain(s).await,
                    Some(a) => {
                        if let Ok(t) = a.accept(s).await {
                            drain(t).await;
                        }
                    }
                }
            });
        }
    });
    addr
}

async fn drain<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    let mut buf = vec![0u8; IO_BUF];
    while let Ok(n) = s.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
    let _ = s.shutdown().await;
}

fn client_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(ca).expect("CA file") {
        roots.add(c).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// Sends `bytes` on one connection and waits until the server closed after reading them all.
async fn one_stream(addr: SocketAddr, bytes: u64, tls: Option<Arc<rustls::ClientConfig>>) {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let _ = tcp.set_nodelay(true);
    let mut s: Stream = match tls {
        None => tcp.into(),
        Some(cfg) => {
            let name = ServerName::try_from("localhost").expect("name");
            TlsConnector::from(cfg)
                .connect(name, tcp)
                .await
                .expect("TLS to the proxy")
                .into()
        }
    };
    let buf = vec![0xa5u8; IO_BUF];
    let mut left = bytes;
    while left > 0 {
        let n = (left as usize).min(buf.len());
        s.write_all(&buf[..n]).await.expect("write");
        left -= n as u64;
    }
    s.shutdown().await.expect("shutdown");
    let mut b = [0u8; 16];
    while s.read(&mut b).await.map(|n| n > 0).unwrap_or(false) {}
}

fn main() {
    let mut mib = 256u64;
    let mut rounds = 3usize;
    let args: Vec<String> = std::env::args().collect();
    for w in args.windows(2) {
        match w[0].as_str() {
            "--mib" => mib = w[1].parse().expect("--mib N"),
            "--rounds" => rounds = w[1].parse().expect("--rounds N"),
            _ => {}
        }
    }
    let dir = std::env::temp_dir().join(format!("tearline-bench-ca-{}", std::process::id()));
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let server_cert = Arc::new(Terminator::self_signed(&dir, &names).expect("server certificate"));
    let proxy_cert = Arc::new(Terminator::self_signed(&dir, &names).expect("proxy certificate"));
    let ca = dir.join("ca.pem");
    let upstream = Arc::new(
        Upstream::new(&UpstreamOptions {
            ca: vec![ca.clone()],
            no_system_roots: true,
            ..UpstreamOptions::default()
        })
        .expect("upstream TLS"),
    );
    let client_cfg = client_config(&ca);

    let load = runtime("load");
    let proxy_rt = runtime("proxy");
    let shutdown = CancellationToken::new();
    let plain_sink = load.block_on(sink_server(None));
    let tls_sink = load.block_on(sink_server(Some(server_cert)));
    let mut proxies = Vec::new();
    for mode in Mode::ALL {
        let sink = if mode.upstream_tls() {
            tls_sink
        } else {
            plain_sink
        };
        let mut cfg = ProxyConfig::new("bench", format!("localhost:{}", sink.port()));
        cfg.tls = ProxyTls {
            client: mode.client_tls().then(|| proxy_cert.clone()),
            upstream: mode.upstream_tls().then(|| upstream.clone()),
            ..ProxyTls::default()
        };
        let listener = proxy_rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let p = Proxy::new(cfg);
        proxy_rt.spawn(proxy::run(listener, p, shutdown.clone()));
        proxies.push((mode, addr));
    }

    let bytes = mib * MIB;
    println!("tls_relay: one stream of {mib} MiB per round, {rounds} rounds, best round per mode");
    let mut best = [0f64; 4];
    for _ in 0..rounds {
        for (i, (mode, addr)) in proxies.iter().enumerate() {
            let tls = mode.client_tls().then(|| client_cfg.clone());
            let start = Instant::now();
            load.block_on(one_stream(*addr, bytes, tls));
            let mbs = bytes as f64 / MIB as f64 / start.elapsed().as_secs_f64();
            best[i] = best[i].max(mbs);
        }
    }
    for (i, (mode, _)) in proxies.iter().enumerate() {
        println!(
            "  {:<34} {:>8.0} MiB/s   ratio vs plain relay {:.2}",
            mode.label(),
            best[i],
            best[i] / best[0]
        );
    }
    shutdown.cancel();
    let _ = std::fs::remove_dir_all(&dir);
}
