//! The local certificate authority behind `--tls-self-signed`: created once in a user directory
//! (never in the repository), then used to issue a certificate for each server's listen names.
//!
//! Invariants:
//! - The directory is `--tls-ca-dir`, else `$TEARLINE_CA_DIR`, else
//!   `$XDG_DATA_HOME/tearline/ca`, else `$HOME/.local/share/tearline/ca`.
//! - `ca-key.pem` is written with mode 0600 before `ca.pem`; each file is written to a temporary
//!   name and renamed, so a reader sees a whole file or none. An existing CA is reused as is.
//! - The CA's subject is fixed, so a CA read back from disk issues certificates that chain to
//!   the `ca.pem` clients trust.

use std::io::Write;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::TlsError;

/// Environment variable naming the CA directory.
pub const DIR_ENV: &str = "TEARLINE_CA_DIR";

/// Names every self-signed server certificate carries besides its listen address.
pub const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

const CA_CERT: &str = "ca.pem";
const CA_KEY: &str = "ca-key.pem";

/// The CA directory to use: `flag`, else the environment, else the user's data directory.
pub fn dir(flag: Option<&Path>) -> Result<PathBuf, TlsError> {
    if let Some(d) = flag {
        return Ok(d.to_owned());
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = env(DIR_ENV) {
        return Ok(d);
    }
    if let Some(d) = env("XDG_DATA_HOME") {
        return Ok(d.join("tearline").join("ca"));
    }
    match env("HOME") {
        Some(h) => Ok(h.join(".local/share/tearline/ca")),
        None => Err(TlsError::Ca {
            dir: PathBuf::new(),
            reason: format!("no home directory; set {DIR_ENV} or pass --tls-ca-dir DIR"),
        }),
    }
}

/// The names a certificate for a server listening on `listen` carries.
pub fn listen_names(listen: std::net::IpAddr, extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = LOCAL_NAMES.iter().map(|s| (*s).to_owned()).collect();
    if !listen.is_unspecified() {
        names.push(listen.to_string());
    }
    names.extend(extra.iter().cloned());
    names.dedup();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// The one line telling a user how to trust certificates of the CA in `ca_file`.
pub fn trust_line(ca_file: &Path) -> String {
    let p = ca_file.display();
    format!(
        "TLS: trust the tearline local CA {p} (curl --cacert {p}; NODE_EXTRA_CA_CERTS={p}; \
         SSL_CERT_FILE={p}; tearline load --cacert {p})"
    )
}

/// A CA read from (or just created in) its directory.
pub struct LocalCa {
    dir: PathBuf,
    key: KeyPair,
}

impl LocalCa {
    /// Opens the CA in `dir`, creating it (and the directory) if it does not exist.
    pub fn open_or_create(dir: &Path) -> Result<LocalCa, TlsError> {
        let bad = |reason: String| TlsError::Ca {
            dir: dir.to_owned(),
            reason,
        };
        let key_path = dir.join(CA_KEY);
        let cert_path = dir.join(CA_CERT);
        if cert_path.exists() {
            let pem = std::fs::read_to_string(&key_path)
                .map_err(|e| bad(format!("{CA_CERT} exists but {CA_KEY} cannot be read: {e}")))?;
            let key = KeyPair::from_pem(&pem)
                .map_err(|e| bad(format!("{CA_KEY} is not a private key: {e}")))?;
            return Ok(LocalCa {
                dir: dir.to_owned(),
                key,
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| bad(format!("cannot create it: {e}")))?;
        let key = KeyPair::generate()?;
        let cert = ca_params().self_signed(&key)?;
        write_new(&key_path, key.serialize_pem().as_bytes(), true)
            .map_err(|e| bad(format!("cannot write {CA_KEY}: {e}")))?;
        write_new(&cert_path, cert.pem().as_bytes(), false)
            .map_err(|e| bad(format!("cannot write {CA_CERT}: {e}")))?;
        tracing::info!(dir = %dir.display(), "created the tearline local CA");
        Ok(LocalCa {
            dir: dir.to_owned(),
            key,
        })
    }

    /// The CA certificate file clients trust.
    pub fn cert_path(&self) -> PathBuf {
        self.dir.join(CA_CERT)
    }

    /// Issues a server certificate for `names` (DNS names or IP addresses); returns the chain
    /// (leaf only) and its fresh key.
    pub fn issue(
        &self,
        names: &[String],
    ) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        let mut params = CertificateParams::new(names.to_vec())?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().map_or("localhost", String::as_str),
        );
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let issuer = Issuer::new(ca_params(), &self.key);
        let cert = params.signed_by(&key, &issuer)?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        Ok((vec![cert.der().clone()], key_der))
    }
}

/// The CA's fixed parameters (subject, usages).
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "tearline");
    dn.push(DnType::CommonName, "tearline local CA");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Writes `bytes` to `path` through a temporary file and a rename (0600 if `private`).
fn write_new(path: &Path, bytes: &[u8], private: bool) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut f = opts.open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ca_is_created_once_and_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let a = LocalCa::open_or_create(tmp.path()).unwrap();
        let pem1 = std::fs::read(a.cert_path()).unwrap();
        let b = LocalCa::open_or_create(tmp.path()).unwrap();
        assert_eq!(std::fs::read(b.cert_path()).unwrap(), pem1);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(tmp.path().join(CA_KEY))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the CA key must be private");
        }
    }

    #[test]
    fn listen_names_cover_loopback_and_the_listen_address() {
        let n = listen_names("10.1.2.3".parse().unwrap(), &["api.test".into()]);
        assert_eq!(n, ["localhost", "127.0.0.1", "::1", "10.1.2.3", "api.test"]);
        let n = listen_names("0.0.0.0".parse().unwrap(), &[]);
        assert_eq!(n, ["localhost", "127.0.0.1", "::1"]);
    }
}
