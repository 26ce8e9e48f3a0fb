//! Reading certificates and private keys from PEM files, with errors that name the file.
//!
//! Invariant: a successful load returns at least one certificate (or exactly one key).

use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::TlsError;

/// Every certificate in the PEM file `path` (leaf first, as written).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |reason: String| TlsError::Pem {
        what: "certificates",
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            what: "certificate",
            marker: "CERTIFICATE-----",
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM file `path`.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::Empty {
            what: "private key",
            marker: "PRIVATE KEY-----",
            path: path.to_owned(),
        },
        e => TlsError::Pem {
            what: "a private key",
            path: path.to_owned(),
            reason: e.to_string(),
        },
    })
}
