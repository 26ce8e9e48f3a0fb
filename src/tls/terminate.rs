//! Termination: tearline as a TLS server for its clients.
//!
//! Invariants: the certificate is either the one given (`--tls-cert/--tls-key`, checked against
//! its key at start) or one the local CA issued for the listen names; ALPN accepts `http/1.1`
//! only; a failed handshake names the likely cause (the client does not trust the CA, or does
//! not speak TLS).

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::ca::LocalCa;
use super::{ALPN_HTTP1, TlsError, load_certs, load_key, provider};

/// A ready TLS server configuration.
pub struct Terminator {
    acceptor: TlsAcceptor,
    config: Arc<ServerConfig>,
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
        config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
        let config = Arc::new(config);
        Ok(Terminator {
            acceptor: TlsAcceptor::from(config.clone()),
            config,
            ca_file,
        })
    }

    /// The rustls configuration (for servers that run their own accept loop).
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.clone()
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
}
