//! TLS flags shared by `tearline proxy` (both sides) and `tearline serve` (server side only).
//!
//! Invariant: flags are turned into ready configurations at start ([`ServerTlsArgs::build`],
//! [`ProxyTlsArgs::build`]), so a missing file or a key that does not match its certificate
//! stops the command before anything listens.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::tls::{AlpnProtocol, FinEnd, ProxyTls, Terminator, TlsError, Upstream, UpstreamOptions};

/// TLS for clients of a server tearline runs (termination).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServerTlsArgs {
    /// Serve TLS with this certificate chain (PEM, leaf first); needs --tls-key.
    #[arg(
        long,
        value_name = "FILE",
        requires = "tls_key",
        conflicts_with = "tls_self_signed"
    )]
    pub tls_cert: Option<PathBuf>,
    /// Private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve TLS with a certificate from a local CA created once in --tls-ca-dir; prints the
    /// one line clients need to trust it.
    #[arg(long)]
    pub tls_self_signed: bool,
    /// Directory of the local CA (default: $XDG_DATA_HOME/tearline/ca or
    /// ~/.local/share/tearline/ca).
    #[arg(long, value_name = "DIR", env = "TEARLINE_CA_DIR")]
    pub tls_ca_dir: Option<PathBuf>,
    /// Extra DNS name or IP for the self-signed certificate (repeatable; localhost, 127.0.0.1,
    /// ::1 and the listen address are always included).
    #[arg(long, value_name = "NAME")]
    pub tls_name: Vec<String>,
}

impl ServerTlsArgs {
    /// The terminator these flags ask for, if any; prints the trust line of a self-signed one.
    pub fn build(&self, listen: IpAddr) -> Result<Option<Arc<Terminator>>, TlsError> {
        let t = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Terminator::from_files(cert, key)?,
            _ if self.tls_self_signed => {
                let dir = crate::tls::ca::dir(self.tls_ca_dir.as_deref())?;
                Terminator::self_signed(
                    &dir,
                    &crate::tls::ca::listen_names(listen, &self.tls_name),
                )?
            }
            _ => return Ok(None),
        };
        if let Some(line) = t.trust_line() {
            println!("{line}");
        }
        Ok(Some(Arc::new(t)))
    }
}

/// TLS flags of `tearline proxy`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ProxyTlsArgs {
    /// Speak TLS to the upstream (SNI: the upstream's host, or --upstream-sni). ALPN offers
    /// what a TLS client offered (so h2 reaches the client only if the upstream picks it),
    /// else --upstream-alpn.
    #[arg(long)]
    pub upstream_tls: bool,
    /// Server name to send and verify instead of the upstream's host.
    #[arg(long, value_name = "NAME", requires = "upstream_tls")]
    pub upstream_sni: Option<String>,
    /// Trust this CA certificate (PEM) for the upstream, besides the system roots, and any
    /// certificate in it presented as is by the server (a self-signed one) (repeatable).
    #[arg(long, value_name = "FILE", requires = "upstream_tls")]
    pub upstream_ca: Vec<PathBuf>,
    /// Do NOT verify the upstream's certificate (logged loudly on every connection).
    #[arg(long, requires = "upstream_tls")]
    pub upstream_insecure: bool,
    /// Client certificate (PEM) to present to the upstream; needs --upstream-client-key.
    #[arg(
        long,
        value_name = "FILE",
        requires = "upstream_tls",
        requires = "upstream_client_key"
    )]
    pub upstream_client_cert: Option<PathBuf>,
    /// Private key of --upstream-client-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "upstream_client_cert")]
    pub upstream_client_key: Option<PathBuf>,
    /// Client-side TLS (termination).
    #[command(flatten)]
    pub server: ServerTlsArgs,
    /// The protocols the upstream speaks, in preference order (h2, http/1.1 or both, comma
    /// separated): a TLS client's ALPN offer is cut to these before it goes upstream; a plain
    /// upstream given h2 speaks h2c; a plain client's TLS upstream is offered these (default
    /// http/1.1). Needs TLS on a side.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "PROTOCOLS")]
    pub upstream_alpn: Vec<AlpnProtocol>,
    /// How a `fin` cut ends a TLS client session: without close_notify (truncate) or with it.
    #[arg(long, value_enum, value_name = "HOW", default_value_t = FinEnd::Truncate)]
    pub tls_fin: FinEnd,
}

impl ProxyTlsArgs {
    /// The TLS settings of a proxy listening on `listen`.
    pub fn build(&self, listen: IpAddr) -> Result<ProxyTls, TlsError> {
        let upstream = if self.upstream_tls {
            let opts = UpstreamOptions {
                sni: self.upstream_sni.clone(),
                ca: self.upstream_ca.clone(),
                no_system_roots: false,
                insecure: self.upstream_insecure,
                client_cert: self
                    .upstream_client_cert
                    .clone()
                    .zip(self.upstream_client_key.clone()),
            };
            if opts.insecure {
                tracing::warn!(
                    "--upstream-insecure: the upstream's certificate will NOT be verified"
                );
                eprintln!(
                    "tearline proxy: WARNING: --upstream-insecure: the upstream's certificate is not verified"
                );
            }
            Some(Arc::new(Upstream::new(&opts)?))
        } else {
            None
        };
        let client = self.server.build(listen)?;
        if !self.upstream_alpn.is_empty() && client.is_none() && upstream.is_none() {
            return Err(TlsError::AlpnWithoutTls);
        }
        Ok(ProxyTls {
            client,
            upstream,
            fin: self.tls_fin,
            upstream_alpn: self.upstream_alpn.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        tls: ProxyTlsArgs,
    }

    fn parse(argv: &[&str]) -> Result<ProxyTlsArgs, clap::Error> {
        let mut all = vec!["proxy"];
        all.extend_from_slice(argv);
        Cli::try_parse_from(all).map(|c| c.tls)
    }

    #[test]
    fn upstream_alpn_takes_h2_and_http1_comma_separated_in_order() {
        let args = parse(&["--upstream-alpn", "h2,http/1.1"]).unwrap();
        assert_eq!(
            args.upstream_alpn,
            vec![AlpnProtocol::H2, AlpnProtocol::Http1]
        );
        let args = parse(&["--upstream-alpn", "http/1.1"]).unwrap();
        assert_eq!(args.upstream_alpn, vec![AlpnProtocol::Http1]);
        assert!(parse(&[]).unwrap().upstream_alpn.is_empty());
    }

    #[test]
    fn an_unknown_alpn_protocol_is_refused_naming_the_allowed_ones() {
        let e = parse(&["--upstream-alpn", "h3"]).expect_err("h3 is refused");
        let text = e.to_string();
        assert!(text.contains("h3"), "{text}");
        assert!(text.contains("h2") && text.contains("http/1.1"), "{text}");
    }

    #[test]
    fn upstream_alpn_without_tls_on_a_side_is_refused_and_with_it_is_kept() {
        let plain = parse(&["--upstream-alpn", "h2"]).unwrap();
        let e = plain
            .build(std::net::Ipv4Addr::LOCALHOST.into())
            .unwrap_err();
        assert!(matches!(e, TlsError::AlpnWithoutTls), "{e}");
        assert!(e.to_string().contains("--upstream-tls"), "{e}");
        let tls = parse(&["--upstream-tls", "--upstream-alpn", "h2"]).unwrap();
        let built = tls.build(std::net::Ipv4Addr::LOCALHOST.into()).unwrap();
        assert_eq!(built.upstream_alpn, vec![AlpnProtocol::H2]);
    }
}
