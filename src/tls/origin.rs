//! Origination: tearline as a TLS client of the upstream.
//!
//! Invariants: the server name sent (SNI) and verified is `--upstream-sni` if given, else the
//! host part of the current upstream address; verification uses the system roots plus every
//! `--upstream-ca` file, whose certificates are also pinned as server certificates (see
//! [`super::pin`]), and is skipped if and only if `insecure` was asked for (then every
//! connection logs a warning). A failed handshake is one [`TlsError::UpstreamHandshake`]
//! naming the upstream, the SNI and rustls' reason, with the flags that could fix it: never a
//! flag already given as the remedy. [`Upstream::connect`] offers ALPN `http/1.1`, as an
//! HTTP/1.1 client must; the proxy offers the list [`super::alpn`] decides
//! ([`Upstream::connect_offering`]).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::alpn::ByAlpn;
use super::pin::Pinning;
use super::{ALPN_HTTP1, TlsError, load_certs, load_key, provider};

/// How to reach the upstream over TLS.
#[derive(Debug, Clone, Default)]
pub struct UpstreamOptions {
    /// Server name to send and verify instead of the upstream's host.
    pub sni: Option<String>,
    /// Extra trusted CA certificates (PEM files).
    pub ca: Vec<PathBuf>,
    /// Skip the system roots (trust only `ca`).
    pub no_system_roots: bool,
    /// Accept any certificate (no verification at all).
    pub insecure: bool,
    /// Client certificate chain and key (PEM files), for servers that ask for one.
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// A ready TLS client configuration for one proxy's upstream.
pub struct Upstream {
    connector: TlsConnector,
    /// The same configuration offering each ALPN list the proxy may need.
    by_alpn: ByAlpn<ClientConfig>,
    sni: Option<String>,
    insecure: bool,
    /// `--upstream-ca` was given: a refused certificate is then not fixed by "pass one".
    has_ca: bool,
}

impl Upstream {
    /// Builds the client configuration (reads every file now, so a bad flag fails at start).
    pub fn new(opts: &UpstreamOptions) -> Result<Self, TlsError> {
        if let Some(sni) = &opts.sni {
            ServerName::try_from(sni.clone()).map_err(|_| TlsError::ServerName(sni.clone()))?;
        }
        let provider = provider();
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = if opts.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
        } else if opts.ca.is_empty() {
            builder.with_root_certificates(roots(opts)?)
        } else {
            let (roots, pinned) = roots_and_pins(opts)?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Pinning::new(roots, pinned, provider)?))
        };
        let mut config = match &opts.client_cert {
            Some((cert, key)) => {
                builder.with_client_auth_cert(load_certs(cert)?, load_key(key)?)?
            }
            None => builder.with_no_client_auth(),
        };
        let by_alpn = ByAlpn::new(config.clone(), |c, l| c.alpn_protocols = l);
        config.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
        Ok(Upstream {
            connector: TlsConnector::from(Arc::new(config)),
            by_alpn,
            sni: opts.sni.clone(),
            insecure: opts.insecure,
            has_ca: !opts.ca.is_empty(),
        })
    }

    /// The SNI override, if any.
    pub fn sni(&self) -> Option<&str> {
        self.sni.as_deref()
    }

    /// True if certificates are not verified.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// The server name used for `upstream` (`host:port`).
    pub fn server_name(&self, upstream: &str) -> String {
        match &self.sni {
            Some(s) => s.clone(),
            None => host_of(upstream).to_owned(),
        }
    }

    /// Runs the handshake on a connected socket, offering ALPN `http/1.1`.
    pub async fn connect(
        &self,
        tcp: TcpStream,
        upstream: &str,
    ) -> Result<TlsStream<TcpStream>, TlsError> {
        self.handshake(&self.connector, tcp, upstream, &[ALPN_HTTP1.to_vec()])
            .await
    }

    /// Runs the handshake on a connected socket offering ALPN `alpn` (none if empty); what the
    /// server picked is the stream's `alpn_protocol()`.
    pub async fn connect_offering(
        &self,
        tcp: TcpStream,
        upstream: &str,
        alpn: &[Vec<u8>],
    ) -> Result<TlsStream<TcpStream>, TlsError> {
        let connector = TlsConnector::from(self.by_alpn.get(alpn));
        self.handshake(&connector, tcp, upstream, alpn).await
    }

    async fn handshake(
        &self,
        connector: &TlsConnector,
        tcp: TcpStream,
        upstream: &str,
        alpn: &[Vec<u8>],
    ) -> Result<TlsStream<TcpStream>, TlsError> {
        let sni = self.server_name(upstream);
        let name =
            ServerName::try_from(sni.clone()).map_err(|_| TlsError::ServerName(sni.clone()))?;
        if self.insecure {
            tracing::warn!(%upstream, %sni, "upstream certificate NOT verified (--upstream-insecure)");
        }
        connector
            .connect(name, tcp)
            .await
            .map_err(|e| self.handshake_error(upstream, &sni, alpn, &e))
    }
}

fn roots(opts: &UpstreamOptions) -> Result<RootCertStore, TlsError> {
    roots_and_pins(opts).map(|(roots, _)| roots)
}

/// The trusted roots (system's unless refused, plus every `--upstream-ca` certificate) and the
/// `--upstream-ca` certificates alone, to pin.
fn roots_and_pins(
    opts: &UpstreamOptions,
) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), TlsError> {
    let mut roots = RootCertStore::empty();
    let mut pinned = Vec::new();
    if !opts.no_system_roots {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::debug!(error = %e, "a system certificate store could not be read");
        }
        let (added, ignored) = roots.add_parsable_certificates(found.certs);
        tracing::debug!(added, ignored, "system roots loaded");
    }
    for path in &opts.ca {
        for cert in load_certs(path)? {
            roots.add(cert.clone()).map_err(|e| TlsError::Pem {
                what: "a CA certificate",
                path: path.clone(),
                reason: e.to_string(),
            })?;
            pinned.push(cert);
        }
    }
    Ok((roots, pinned))
}

/// The host part of `host:port` (IPv6 brackets removed).
fn host_of(upstream: &str) -> &str {
    let host = upstream.rsplit_once(':').map_or(upstream, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

impl Upstream {
    fn handshake_error(
        &self,
        upstream: &str,
        sni: &str,
        alpn: &[Vec<u8>],
        e: &std::io::Error,
    ) -> TlsError {
        const NOT_TLS: &str =
            "; is the upstream speaking TLS? (drop --upstream-tls for a plain upstream)";
        let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
        let (reason, hint) = match inner {
            Some(rustls::Error::InvalidCertificate(c)) => (
                format!(
                    "the server's certificate was refused: {}",
                    certificate_reason(c, sni)
                ),
                certificate_hint(c, self.has_ca, self.sni.is_some()),
            ),
            Some(rustls::Error::AlertReceived(rustls::AlertDescription::NoApplicationProtocol)) => {
                (
                    format!(
                        "it speaks none of the ALPN protocols offered ({})",
                        super::alpn::names(alpn)
                    ),
                    "; pin one it speaks with --upstream-alpn (h2 or http/1.1)".to_owned(),
                )
            }
            Some(rustls::Error::InvalidMessage(_))
            | Some(rustls::Error::InappropriateMessage { .. }) => (
                inner.map(ToString::to_string).unwrap_or_default(),
                NOT_TLS.to_owned(),
            ),
            Some(other) => (other.to_string(), String::new()),
            None if e.kind() == std::io::ErrorKind::UnexpectedEof => (
                "the connection closed during the handshake".to_owned(),
                NOT_TLS.to_owned(),
            ),
            None => (e.to_string(), String::new()),
        };
        TlsError::UpstreamHandshake {
            upstream: upstream.to_owned(),
            sni: sni.to_owned(),
            reason,
            hint,
        }
    }
}

/// What could fix a refused certificate, naming a flag as the remedy only if it is not given
/// yet (`has_ca`: `--upstream-ca`, `has_sni`: `--upstream-sni`).
fn certificate_hint(c: &rustls::CertificateError, has_ca: bool, has_sni: bool) -> String {
    use rustls::CertificateError as E;
    const INSECURE: &str = "skip verification with --upstream-insecure";
    let fix = match c {
        E::NotValidForName | E::NotValidForNameContext { .. } if has_sni => {
            "it is not issued for the --upstream-sni name: give a name it was issued for"
        }
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            "name the host it was issued for with --upstream-sni NAME"
        }
        E::Expired | E::ExpiredContext { .. } | E::NotValidYet | E::NotValidYetContext { .. } => {
            "give the upstream a certificate valid now"
        }
        _ if has_ca => {
            "the --upstream-ca files hold neither it nor a CA that signed it: add its CA, or \
             the certificate itself, to one"
        }
        _ => {
            "trust its CA, or the certificate itself if it is self-signed, with --upstream-ca \
             FILE"
        }
    };
    format!("; {fix}, or {INSECURE}")
}

fn certificate_reason(c: &rustls::CertificateError, sni: &str) -> String {
    use rustls::CertificateError as E;
    match c {
        E::UnknownIssuer => "it is signed by an unknown issuer (not a trusted CA)".to_owned(),
        E::NotValidForName | E::NotValidForNameContext { .. } => {
            format!("it is not valid for the name '{sni}'")
        }
        E::Expired | E::ExpiredContext { .. } => "it has expired".to_owned(),
        E::NotValidYet | E::NotValidYetContext { .. } => "it is not valid yet".to_owned(),
        E::Revoked => "it has been revoked".to_owned(),
        E::BadSignature => {
            "its signature does not verify (signed by another CA of the same name?)".to_owned()
        }
        // webpki's reasons without a rustls variant arrive as text: its variant's name.
        E::Other(o) if o.to_string() == "CaUsedAsEndEntity" => {
            "it is a CA certificate presented as the server's own (CaUsedAsEndEntity), as a \
             self-signed `openssl req -x509` certificate is"
                .to_owned()
        }
        other => format!("{other:?}"),
    }
}

/// Accepts every certificate; handshake signatures are still checked (`--upstream-insecure`).
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn host_is_taken_from_host_port() {
        assert_eq!(host_of("example.com:443"), "example.com");
        assert_eq!(host_of("127.0.0.1:8443"), "127.0.0.1");
        assert_eq!(host_of("[::1]:8443"), "::1");
    }
}
