//! A CA and a server certificate for `127.0.0.1` and `localhost`, made at test time in a
//! temporary directory, as PEM files the peers load: `ca.pem` (what clients trust),
//! `cert.pem` and `key.pem` (what servers serve).

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

pub struct Certs {
    _dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Certs {
    pub fn new() -> Certs {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "tearline h2 test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let mut leaf =
            CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf.is_ca = IsCa::ExplicitNoCa;
        let leaf_key = KeyPair::generate().unwrap();
        let issuer = Issuer::new(ca_params, &ca_key);
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();
        let ca = dir.path().join("ca.pem");
        let cert = dir.path().join("cert.pem");
        let key = dir.path().join("key.pem");
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        std::fs::write(&cert, leaf_cert.pem()).unwrap();
        std::fs::write(&key, leaf_key.serialize_pem()).unwrap();
        Certs {
            _dir: dir,
            ca,
            cert,
            key,
        }
    }
}
