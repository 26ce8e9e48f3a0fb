//! Trust in the upstream's certificate as curl gives it with `--cacert`: a certificate in an
//! `--upstream-ca` file is trusted as a CA *and*, when the server presents exactly it, as the
//! server's own certificate. The second case is the usual test certificate, `openssl req
//! -x509`, which is self-signed with `CA:TRUE`; webpki refuses a CA certificate as an end
//! entity (`CaUsedAsEndEntity`) even when it is the trust anchor.
//!
//! Invariants:
//! - Every certificate webpki accepts is accepted: a CA-signed chain verifies exactly as with
//!   the plain webpki verifier (same roots, same checks), pinning is only tried after it
//!   refused.
//! - A presented end-entity certificate is pinned if and only if its DER bytes equal one of the
//!   certificates in the `--upstream-ca` files; then its validity period must contain the
//!   current time and it must be issued for the server name (SNI), as curl checks both. Its
//!   issuer, basic constraints and key usages are not checked: the file itself is the trust.
//! - Handshake signatures are always verified (the server proves it holds the key).

use std::sync::Arc;
use std::time::Duration;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore};
use rustls::{SignatureScheme, client::verify_server_name};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::TlsError;
use super::validity::validity;

/// Webpki's verifier, plus the certificates of the `--upstream-ca` files as pins.
#[derive(Debug)]
pub(super) struct Pinning {
    chain: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl Pinning {
    /// A verifier trusting `roots` as CAs and each of `pinned` as a server certificate.
    pub(super) fn new(
        roots: RootCertStore,
        pinned: Vec<CertificateDer<'static>>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, TlsError> {
        let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| TlsError::Config(rustls::Error::General(e.to_string())))?;
        Ok(Pinning { chain, pinned })
    }

    fn verify_pinned(
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let (not_before, not_after) =
            validity(end_entity.as_ref()).ok_or(CertificateError::BadEncoding)?;
        let at = |secs| UnixTime::since_unix_epoch(Duration::from_secs(secs));
        if now.as_secs() < not_before {
            return Err(CertificateError::NotValidYetContext {
                time: now,
                not_before: at(not_before),
            }
            .into());
        }
        if now.as_secs() > not_after {
            return Err(CertificateError::ExpiredContext {
                time: now,
                not_after: at(not_after),
            }
            .into());
        }
        verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
        Ok(ServerCertVerified::assertion())
    }
}

impl ServerCertVerifier for Pinning {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let chained = self.chain.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        let pinned = self
            .pinned
            .iter()
            .any(|p| p.as_ref() == end_entity.as_ref());
        match chained {
            Err(_) if pinned => Self::verify_pinned(end_entity, server_name, now),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.chain.root_hint_subjects()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed CA certificate for `localhost`, valid in `[not_before, not_after]` (years).
    fn ca_cert(not_before: i32, not_after: i32) -> CertificateDer<'static> {
        let mut p = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        p.not_before = rcgen::date_time_ymd(not_before, 1, 1);
        p.not_after = rcgen::date_time_ymd(not_after, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        p.self_signed(&key).unwrap().der().clone()
    }

    fn pinning(cert: &CertificateDer<'static>) -> Pinning {
        let mut roots = RootCertStore::empty();
        roots.add(cert.clone()).unwrap();
        Pinning::new(roots, vec![cert.clone()], super::super::provider()).unwrap()
    }

    fn verify(v: &Pinning, cert: &CertificateDer<'_>, name: &str) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).unwrap();
        v.verify_server_cert(cert, &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn a_self_signed_ca_certificate_in_the_file_is_accepted_as_the_server_certificate() {
        let cert = ca_cert(2020, 2090);
        verify(&pinning(&cert), &cert, "localhost").unwrap();
    }

    #[test]
    fn the_same_certificate_not_in_the_file_is_refused() {
        let cert = ca_cert(2020, 2090);
        let other = ca_cert(2020, 2090);
        assert!(verify(&pinning(&other), &cert, "localhost").is_err());
    }

    #[test]
    fn a_pinned_certificate_is_refused_for_another_name() {
        let cert = ca_cert(2020, 2090);
        let err = verify(&pinning(&cert), &cert, "other.test").unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_pinned_certificate_is_refused_outside_its_validity_period() {
        let expired = ca_cert(2000, 2001);
        let err = verify(&pinning(&expired), &expired, "localhost").unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(CertificateError::ExpiredContext { .. })
            ),
            "{err:?}"
        );
        let future = ca_cert(2080, 2090);
        let err = verify(&pinning(&future), &future, "localhost").unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(CertificateError::NotValidYetContext { .. })
            ),
            "{err:?}"
        );
    }
}
