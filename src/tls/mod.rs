//! TLS on either side of the relay, so the observer sees plaintext HTTP (HTTP/1.1 or h2) while
//! the wire on each side stays encrypted.
//!
//! - Origination ([`Upstream`]): tearline is a TLS client of the upstream. SNI is the upstream
//!   host name unless overridden; roots are the system's plus `--upstream-ca`, whose
//!   certificates are also trusted as the server's own when presented as is (a self-signed
//!   test certificate, as curl's `--cacert` does); certificate verification is skipped only
//!   with an explicit `insecure` (logged as a warning at start and on every connection's open).
//! - Termination ([`Terminator`]): tearline is a TLS server for the client, with a given
//!   certificate and key or one issued by a local CA ([`ca`]) created once in a user directory.
//!
//! Invariants:
//! - ALPN through the proxy ([`alpn`]): the client is offered what the upstream speaks and the
//!   upstream is spoken to in the same protocol. With TLS on both sides the client's ClientHello
//!   is read first, the upstream is offered the client's list (cut to `--upstream-alpn` when
//!   pinned), and the client's handshake selects exactly what the upstream picked (none if it
//!   picked none). A plain side has no ALPN: before a plain upstream the client may pick from
//!   the pin (default `http/1.1`; `h2` means h2c), a plain client's TLS upstream is offered the
//!   pin (default `http/1.1`). The negotiated protocol is each [`Stream`]'s
//!   [`alpn`](Stream::alpn); [`negotiated`] names it for a connection.
//! - Servers and clients outside the proxy (the lab, `load`) offer and accept `http/1.1` unless
//!   they ask for another list.
//! - The ring provider is used everywhere (no process-wide default is installed or required).
//! - A [`TlsEnd`] is recorded for every cut of a TLS-terminated client side: `close-notify` if
//!   and only if the alert was sent before the TCP close, else `truncated`.

pub mod alpn;
pub mod ca;
mod origin;
mod pem;
mod pin;
mod stream;
mod terminate;
mod validity;

use std::path::PathBuf;
use std::sync::Arc;

pub use alpn::AlpnProtocol;
pub use origin::{Upstream, UpstreamOptions};
pub use pem::{load_certs, load_key};
pub use stream::{Stream, negotiated};
pub use terminate::{Hello, Terminator};

/// The ALPN id of HTTP/1.1, what tearline offers and accepts unless told otherwise.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// How a TLS session to the client ended at a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlsEnd {
    /// A `close_notify` alert preceded the TCP close: a clean TLS end.
    CloseNotify,
    /// The TCP connection closed (FIN or RST) without `close_notify`: a truncation, which a
    /// careful client must not take as a normal end.
    Truncated,
}

impl TlsEnd {
    /// `close-notify` or `truncated`.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsEnd::CloseNotify => "close-notify",
            TlsEnd::Truncated => "truncated",
        }
    }
}

/// What a `fin` cut does on a TLS client side (`reset` is always a truncation, `clean-end`
/// always ends with `close_notify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FinEnd {
    /// TCP FIN without `close_notify` (a truncation attack, as a client sees it).
    #[default]
    Truncate,
    /// `close_notify`, then FIN: a clean TLS end in the middle of the HTTP message.
    CloseNotify,
}

/// TLS settings of one proxy: either side may be plain.
#[derive(Clone, Default)]
pub struct ProxyTls {
    /// Terminate TLS from clients.
    pub client: Option<Arc<Terminator>>,
    /// Originate TLS to the upstream.
    pub upstream: Option<Arc<Upstream>>,
    /// How a `fin` cut ends a TLS client session.
    pub fin: FinEnd,
    /// `--upstream-alpn`: the protocols the upstream speaks, in preference order (empty: not
    /// pinned; see [`alpn`]).
    pub upstream_alpn: Vec<AlpnProtocol>,
}

impl ProxyTls {
    /// True if neither side speaks TLS.
    pub fn is_plain(&self) -> bool {
        self.client.is_none() && self.upstream.is_none()
    }

    /// The TLS end a cut with `action` produces on the client side, if it speaks TLS.
    pub fn end_of(&self, action: crate::vocab::CutAction) -> Option<TlsEnd> {
        use crate::vocab::CutAction;
        self.client.as_ref()?;
        Some(match (action, self.fin) {
            (CutAction::CleanEnd, _) | (CutAction::Fin, FinEnd::CloseNotify) => TlsEnd::CloseNotify,
            (CutAction::Reset, _) | (CutAction::Fin, FinEnd::Truncate) => TlsEnd::Truncated,
        })
    }
}

impl std::fmt::Debug for ProxyTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyTls")
            .field("client", &self.client.is_some())
            .field("upstream", &self.upstream.as_ref().map(|u| u.sni()))
            .field("fin", &self.fin)
            .field("upstream_alpn", &self.upstream_alpn)
            .finish()
    }
}

impl PartialEq for ProxyTls {
    fn eq(&self, other: &Self) -> bool {
        fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
            match (a, b) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            }
        }
        same(&self.client, &other.client)
            && same(&self.upstream, &other.upstream)
            && self.fin == other.fin
            && self.upstream_alpn == other.upstream_alpn
    }
}

impl Eq for ProxyTls {}

/// Errors of TLS set-up and handshakes.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read.
    #[error("cannot read {what} from {path}: {reason}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// A PEM file held no item of the expected kind.
    #[error("{path} holds no {what} (expected a PEM file with '-----BEGIN {marker}')")]
    Empty {
        what: &'static str,
        marker: &'static str,
        path: PathBuf,
    },
    /// rustls refused the configuration (e.g. a key that does not match its certificate).
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// The SNI name is not a valid DNS name or IP address.
    #[error("'{0}' is not a valid TLS server name (a DNS name or an IP address)")]
    ServerName(String),
    /// The local CA directory could not be used.
    #[error("local CA in {dir}: {reason}")]
    Ca { dir: PathBuf, reason: String },
    /// Certificate generation failed.
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// The handshake with the upstream failed.
    #[error("TLS to upstream {upstream} (SNI '{sni}') failed: {reason}{hint}")]
    UpstreamHandshake {
        upstream: String,
        sni: String,
        reason: String,
        hint: String,
    },
    /// `--upstream-alpn` was given to a proxy with no TLS side, where no ALPN is exchanged.
    #[error(
        "--upstream-alpn needs TLS on a side: --upstream-tls, or --tls-cert/--tls-self-signed \
         for the clients (a plain proxy relays h2c and HTTP/1.1 as they come)"
    )]
    AlpnWithoutTls,
    /// The handshake with a client failed.
    #[error("TLS handshake with the client failed: {0}")]
    ClientHandshake(#[source] std::io::Error),
}

/// The ring crypto provider, shared.
pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::CutAction;

    #[test]
    fn only_a_tls_client_side_has_a_tls_end() {
        let plain = ProxyTls::default();
        assert_eq!(plain.end_of(CutAction::Fin), None);
        assert!(plain.is_plain());
    }

    #[test]
    fn reset_truncates_clean_end_notifies_and_fin_follows_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let t = Terminator::self_signed(dir.path(), &["localhost".into()]).unwrap();
        let mut tls = ProxyTls {
            client: Some(Arc::new(t)),
            ..ProxyTls::default()
        };
        assert_eq!(tls.end_of(CutAction::Reset), Some(TlsEnd::Truncated));
        assert_eq!(tls.end_of(CutAction::CleanEnd), Some(TlsEnd::CloseNotify));
        assert_eq!(tls.end_of(CutAction::Fin), Some(TlsEnd::Truncated));
        tls.fin = FinEnd::CloseNotify;
        assert_eq!(tls.end_of(CutAction::Fin), Some(TlsEnd::CloseNotify));
        assert_eq!(tls.end_of(CutAction::Reset), Some(TlsEnd::Truncated));
    }
}
