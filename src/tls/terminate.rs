//! Termination: tearline as a TLS server for its clients.
//!
//! Invariants: the certificate is either the one given (`--tls-cert/--tls-key`, checked against
//! its key at start) or one the local CA issued for the listen names; [`Terminator::accept`]
//! (and [`Terminator::config`]) accept ALPN `http/1.1` only, as a server that speaks HTTP/1.1
//! must; the proxy instead reads the ClientHello first ([`Terminator::start`]) and finishes
//! the handshake selecting exactly the ALPN list it is given ([`Terminator::finish`], see
//! [`super::alpn`]); a failed handshake names the likely cause (the client does not trust the
//! CA, or does not speak TLS).

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::{LazyConfigAcceptor, StartHandshake, TlsAcceptor};

use super::alpn::ByAlpn;
use super::ca::LocalCa;
use super::{ALPN_HTTP1, TlsError, load_certs, load_key, provider};

/// A ready TLS server configuration.
pub struct Terminator {
    acceptor: TlsAcceptor,
    config: Arc<ServerConfig>,
    /// The same configuration selecting each ALPN list the proxy may need.
    by_alpn: ByAlpn<ServerConfig>,
    /// The CA file clients must trust, when the certificate was issued by the local CA.
    ca_file: Option<std::path::PathBuf>,
}

impl Terminator {
    /// Serves the certificate chain and key of two PEM files.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        Self::from_parts(load_certs(cert)?, load_key(key)?, None)
    }

    /// Serves a certificate for `names` issued by the local CA in `dir` (created if absent).
    pub fn self_signed(dir: &Path, names: &[String]) -> Result<Self, TlsError> {
        let ca = LocalCa::open_or_create(dir)?;
        let (certs, key) = ca.issue(names)?;
        Self::from_parts(certs, key, Some(ca.cert_path()))
    }

    /// Serves `certs` (leaf first) with `key`.
    pub fn from_parts(
        certs: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        ca_file: Option<std::path::PathBuf>,
    ) -> Result<Self, TlsError> {
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        let by_alpn = ByAlpn::new(config.clone(), |c, l| c.alpn_protocols = l);
        config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
        let config = Arc::new(config);
        Ok(Terminator {
            acceptor: TlsAcceptor::from(config.clone()),
            config,
            by_alpn,
            ca_file,
        })
    }

    /// The rustls configuration, ALPN `http/1.1` (for servers that run their own accept loop).
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.clone()
    }

    /// The same configuration selecting from `alpn` instead (e.g. `h2` and `http/1.1`, for a
    /// server that speaks both).
    pub fn config_selecting(&self, alpn: &[Vec<u8>]) -> Arc<ServerConfig> {
        self.by_alpn.get(alpn)
    }

    /// The CA file clients must trust, if the local CA issued the certificate.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// The one line a user needs to trust this server, if the local CA issued its certificate.
    pub fn trust_line(&self) -> Option<String> {
        self.ca_file.as_deref().map(super::ca::trust_line)
    }

    /// Runs the server handshake on an accepted socket.
    pub async fn accept(&self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, TlsError> {
        self.acceptor
            .accept(tcp)
            .await
            .map_err(TlsError::ClientHandshake)
    }

    /// Reads the client's ClientHello on an accepted socket, the first half of a handshake
    /// whose ALPN answer is not known yet.
    pub async fn start(&self, tcp: TcpStream) -> Result<Hello, TlsError> {
        LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp)
            .await
            .map(|start| Hello {
                start: Box::new(start),
            })
            .map_err(TlsError::ClientHandshake)
    }

    /// Finishes the handshake of `hello`, selecting from `alpn` (the first the client also
    /// offered; none if `alpn` is empty or the client offered none; a client whose list shares
    /// nothing with a non-empty `alpn` is refused with `no_application_protocol`).
    pub async fn finish(
        &self,
        hello: Hello,
        alpn: &[Vec<u8>],
    ) -> Result<TlsStream<TcpStream>, TlsError> {
        hello
            .start
            .into_stream(self.by_alpn.get(alpn))
            .await
            .map_err(TlsError::ClientHandshake)
    }
}

/// A client's ClientHello, read; the handshake waits for [`Terminator::finish`]. (Boxed:
/// rustls' state is over a kilobyte, moved through the proxy's handshake steps.)
pub struct Hello {
    start: Box<StartHandshake<TcpStream>>,
}

impl Hello {
    /// The ALPN protocols the client offered, in its order (empty if it sent none).
    pub fn alpn(&self) -> Vec<Vec<u8>> {
        self.start
            .client_hello()
            .alpn()
            .map(|it| it.map(<[u8]>::to_vec).collect())
            .unwrap_or_default()
    }

    /// The TCP socket, giving up the handshake.
    pub fn into_tcp(self) -> TcpStream {
        self.start.io
    }
}

impl std::fmt::Debug for Hello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hello")
            .field("alpn", &super::alpn::names(&self.alpn()))
            .finish()
    }
}
