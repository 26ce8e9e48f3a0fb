//! ALPN through the proxy: which application protocols tearline offers the upstream and
//! accepts from the client, so that both TLS sides agree on one protocol (h2 or HTTP/1.1) and
//! the relay knows which one it carries.
//!
//! The rule is "offer the client what the upstream speaks, speak the same upstream":
//! - TLS on both sides: the client's ClientHello is read first; the upstream is offered the
//!   client's ALPN list as sent (filtered by `--upstream-alpn` when given, which pins it); the
//!   client's handshake then selects exactly what the upstream picked, or no ALPN when the
//!   upstream picked none (so a client that offered none gets none).
//! - TLS client, plain upstream: the client may pick from `--upstream-alpn` (default
//!   `http/1.1`; `h2` says the plain upstream speaks h2c with prior knowledge).
//! - Plain client, TLS upstream: the upstream is offered `--upstream-alpn` (default `http/1.1`:
//!   a plain client's protocol is known only from its first bytes, after the handshake).
//!
//! Invariants: the functions here do no I/O; a pinned list never widens what the client
//! offered; when the client's list and the pin share no protocol the caller is told before
//! any upstream handshake ([`NoCommonProtocol`]), so the client gets TLS's
//! `no_application_protocol` alert instead of a connection that cannot work.

use std::sync::Arc;

use crate::vocab::WireProtocol;

/// The ALPN id of HTTP/2 over TLS.
pub const ALPN_H2: &[u8] = b"h2";

/// An application protocol `--upstream-alpn` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum AlpnProtocol {
    /// HTTP/2 (`h2`; over a plain upstream: h2c with prior knowledge).
    #[value(name = "h2")]
    H2,
    /// HTTP/1.1 (`http/1.1`).
    #[value(name = "http/1.1")]
    Http1,
}

impl AlpnProtocol {
    /// The protocol's ALPN id on the wire.
    pub fn id(self) -> &'static [u8] {
        match self {
            AlpnProtocol::H2 => ALPN_H2,
            AlpnProtocol::Http1 => super::ALPN_HTTP1,
        }
    }
}

/// The protocol an ALPN id names, if tearline's relay knows it (`h2` is HTTP/2 over TLS).
pub fn protocol_of(alpn: &[u8]) -> Option<WireProtocol> {
    match alpn {
        ALPN_H2 => Some(WireProtocol::H2),
        super::ALPN_HTTP1 => Some(WireProtocol::Http1),
        _ => None,
    }
}

/// ALPN ids as a reader writes them: `h2,http/1.1`, or `none`.
pub fn names(list: &[Vec<u8>]) -> String {
    if list.is_empty() {
        return "none".to_owned();
    }
    list.iter()
        .map(|p| String::from_utf8_lossy(p))
        .collect::<Vec<_>>()
        .join(",")
}

/// The ALPN ids of a pin, in its order, each once; `default` when nothing is pinned.
fn pinned_or(pin: &[AlpnProtocol], default: AlpnProtocol) -> Vec<Vec<u8>> {
    if pin.is_empty() {
        return vec![default.id().to_vec()];
    }
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(pin.len());
    for p in pin {
        if !out.iter().any(|o| o == p.id()) {
            out.push(p.id().to_vec());
        }
    }
    out
}

/// The client offered ALPN protocols and `--upstream-alpn` allows none of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the client offers ALPN {offered} and --upstream-alpn allows {allowed}: no protocol in \
     common (the client is refused with no_application_protocol)"
)]
pub struct NoCommonProtocol {
    /// What the client offered (`h2,http/1.1`).
    pub offered: String,
    /// What the pin allows.
    pub allowed: String,
}

/// What a TLS upstream is offered, given the client's ALPN list (`None` for a plain client;
/// an empty list for a TLS client that sent no ALPN) and the pin (empty: not pinned).
pub fn upstream_offer(
    client: Option<&[Vec<u8>]>,
    pin: &[AlpnProtocol],
) -> Result<Vec<Vec<u8>>, NoCommonProtocol> {
    let Some(offered) = client else {
        return Ok(pinned_or(pin, AlpnProtocol::Http1));
    };
    if pin.is_empty() {
        return Ok(offered.to_vec());
    }
    let kept: Vec<Vec<u8>> = offered
        .iter()
        .filter(|o| pin.iter().any(|p| p.id() == o.as_slice()))
        .cloned()
        .collect();
    if kept.is_empty() && !offered.is_empty() {
        return Err(NoCommonProtocol {
            offered: names(offered),
            allowed: names(&pinned_or(pin, AlpnProtocol::Http1)),
        });
    }
    Ok(kept)
}

/// What the client's TLS handshake may select, given the upstream's side: `None` for a plain
/// upstream, else what the TLS upstream picked (`Some(None)`: it picked no ALPN).
///
/// With a TLS upstream the list holds at most the one protocol the upstream picked, so the
/// client speaks what the upstream speaks; with a plain upstream it is the pin (server's
/// preference order) or `http/1.1`.
pub fn client_selects(upstream: Option<Option<&[u8]>>, pin: &[AlpnProtocol]) -> Vec<Vec<u8>> {
    match upstream {
        None => pinned_or(pin, AlpnProtocol::Http1),
        Some(Some(picked)) => vec![picked.to_vec()],
        Some(None) => Vec::new(),
    }
}

/// What the client is refused with when it shares no protocol with the pin: the pin itself,
/// which rustls answers with `no_application_protocol`.
pub fn refusal(pin: &[AlpnProtocol]) -> Vec<Vec<u8>> {
    pinned_or(pin, AlpnProtocol::Http1)
}

/// One TLS configuration per ALPN list: the lists tearline uses every day are built once at
/// start; any other list (a client offering an unusual protocol) is a clone of the base.
pub(crate) struct ByAlpn<C> {
    base: Arc<C>,
    built: Vec<(Vec<Vec<u8>>, Arc<C>)>,
    set: fn(&mut C, Vec<Vec<u8>>),
}

impl<C: Clone> ByAlpn<C> {
    /// The lists built ahead: none, `h2`, `http/1.1`, and both in either order.
    fn common() -> [Vec<Vec<u8>>; 5] {
        let (h2, h1) = (ALPN_H2.to_vec(), super::ALPN_HTTP1.to_vec());
        [
            Vec::new(),
            vec![h2.clone()],
            vec![h1.clone()],
            vec![h2.clone(), h1.clone()],
            vec![h1, h2],
        ]
    }

    /// Builds the common variants of `base` with `set` (which stores a list in a config).
    pub(crate) fn new(base: C, set: fn(&mut C, Vec<Vec<u8>>)) -> Self {
        let built = Self::common()
            .into_iter()
            .map(|list| {
                let mut c = base.clone();
                set(&mut c, list.clone());
                (list, Arc::new(c))
            })
            .collect();
        ByAlpn {
            base: Arc::new(base),
            built,
            set,
        }
    }

    /// The configuration offering (client) or accepting (server) exactly `list`.
    pub(crate) fn get(&self, list: &[Vec<u8>]) -> Arc<C> {
        if let Some((_, c)) = self.built.iter().find(|(l, _)| l.as_slice() == list) {
            return c.clone();
        }
        let mut c = (*self.base).clone();
        (self.set)(&mut c, list.to_vec());
        Arc::new(c)
    }
}

#[cfg(test)]
mod tests {
    use super::AlpnProtocol::{H2, Http1};
    use super::*;

    fn ids(list: &[&[u8]]) -> Vec<Vec<u8>> {
        list.iter().map(|p| p.to_vec()).collect()
    }

    #[test]
    fn a_tls_client_list_goes_upstream_as_sent_when_nothing_is_pinned() {
        let curl = ids(&[b"h2", b"http/1.1"]);
        assert_eq!(upstream_offer(Some(&curl), &[]).unwrap(), curl);
        let odd = ids(&[b"spdy/3.1", b"http/1.1"]);
        assert_eq!(upstream_offer(Some(&odd), &[]).unwrap(), odd);
    }

    #[test]
    fn a_client_that_offers_no_alpn_has_none_offered_upstream_pinned_or_not() {
        assert!(upstream_offer(Some(&[]), &[]).unwrap().is_empty());
        assert!(upstream_offer(Some(&[]), &[H2]).unwrap().is_empty());
    }

    #[test]
    fn a_pin_keeps_only_what_the_client_offered_in_the_clients_order() {
        let curl = ids(&[b"h2", b"http/1.1"]);
        assert_eq!(
            upstream_offer(Some(&curl), &[Http1]).unwrap(),
            ids(&[b"http/1.1"])
        );
        assert_eq!(
            upstream_offer(Some(&curl), &[Http1, H2]).unwrap(),
            ids(&[b"h2", b"http/1.1"])
        );
        let h1_only = ids(&[b"http/1.1"]);
        assert_eq!(
            upstream_offer(Some(&h1_only), &[H2, Http1]).unwrap(),
            h1_only,
            "a pin never widens what the client offered"
        );
    }

    #[test]
    fn a_client_sharing_no_protocol_with_the_pin_is_named_with_both_lists() {
        let grpc = ids(&[b"h2"]);
        let e = upstream_offer(Some(&grpc), &[Http1]).unwrap_err();
        assert_eq!(e.offered, "h2");
        assert_eq!(e.allowed, "http/1.1");
        assert!(e.to_string().contains("no protocol in common"), "{e}");
    }

    #[test]
    fn a_plain_client_has_the_pin_offered_upstream_or_http1() {
        assert_eq!(upstream_offer(None, &[]).unwrap(), ids(&[b"http/1.1"]));
        assert_eq!(upstream_offer(None, &[H2]).unwrap(), ids(&[b"h2"]));
        assert_eq!(
            upstream_offer(None, &[H2, Http1, H2]).unwrap(),
            ids(&[b"h2", b"http/1.1"]),
            "each protocol once, in the pin's order"
        );
    }

    #[test]
    fn the_client_selects_what_a_tls_upstream_picked_or_nothing() {
        assert_eq!(client_selects(Some(Some(b"h2")), &[]), ids(&[b"h2"]));
        assert_eq!(
            client_selects(Some(Some(b"http/1.1")), &[H2, Http1]),
            ids(&[b"http/1.1"])
        );
        assert!(client_selects(Some(None), &[H2]).is_empty());
    }

    #[test]
    fn before_a_plain_upstream_the_client_selects_from_the_pin_or_http1() {
        assert_eq!(client_selects(None, &[]), ids(&[b"http/1.1"]));
        assert_eq!(client_selects(None, &[H2]), ids(&[b"h2"]));
        assert_eq!(refusal(&[Http1]), ids(&[b"http/1.1"]));
    }

    #[test]
    fn h2_and_http1_name_their_protocols_and_others_none() {
        assert_eq!(protocol_of(b"h2"), Some(WireProtocol::H2));
        assert_eq!(protocol_of(b"http/1.1"), Some(WireProtocol::Http1));
        assert_eq!(protocol_of(b"h3"), None);
        assert_eq!(names(&[]), "none");
        assert_eq!(names(&ids(&[b"h2", b"http/1.1"])), "h2,http/1.1");
    }

    #[test]
    fn every_list_gets_a_config_storing_exactly_that_list() {
        let by = ByAlpn::new(Vec::<Vec<u8>>::new(), |c, l| *c = l);
        for list in [
            ids(&[]),
            ids(&[b"h2"]),
            ids(&[b"http/1.1", b"h2"]),
            ids(&[b"acme-tls/1"]),
        ] {
            assert_eq!(*by.get(&list), list);
        }
        let a = by.get(&ids(&[b"h2"]));
        let b = by.get(&ids(&[b"h2"]));
        assert!(Arc::ptr_eq(&a, &b), "a common list is built once");
    }
}
