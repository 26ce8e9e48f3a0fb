//! The validated profile: what a runtime needs to start proxies with faults.
//!
//! Invariant: values of these types only come out of [`super::parse`] (or are built by code that
//! keeps the same rules): fault names are unique per proxy and every `proxy` reference names a
//! defined proxy.

use std::sync::Arc;

use crate::fault::FaultFactory;
use crate::fault::keys::FaultDef;
use crate::fault::outage::OutageSchedule;
use crate::fault::registry::Built;

/// A profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Where it came from (path or label).
    pub origin: String,
    /// One line for `tearline profiles list`.
    pub description: Option<String>,
    /// The run's seed, if the profile fixes one.
    pub seed: Option<u64>,
    /// Named proxies; empty = the faults apply to the proxy given on the command line.
    pub proxies: Vec<ProxyDef>,
    /// Faults in declaration order (the order of each direction's chain).
    pub faults: Vec<FaultSpec>,
}

/// A `[[proxy]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyDef {
    /// Unique name.
    pub name: String,
    /// Address to listen on, `host:port`.
    pub listen: String,
    /// Address to relay to, `host:port`.
    pub upstream: String,
    /// `false` = the proxy starts down (listener closed) until enabled.
    pub enabled: bool,
}

/// A `[[fault]]`.
#[derive(Debug, Clone)]
pub struct FaultSpec {
    /// Unique per proxy (defaults to the kind).
    pub name: String,
    /// The kind.
    pub kind: String,
    /// The proxy it applies to; `None` = every proxy.
    pub proxy: Option<String>,
    /// The factory or schedule.
    pub built: Built,
    /// The definition as written.
    pub def: FaultDef,
    /// 1-based line of its `[[fault]]` header.
    pub line: usize,
}

impl FaultSpec {
    /// Whether it applies to proxy `proxy` (`None` = the command line's unnamed proxy).
    pub fn applies_to(&self, proxy: Option<&str>) -> bool {
        match (&self.proxy, proxy) {
            (None, _) => true,
            (Some(p), Some(q)) => p == q,
            (Some(_), None) => false,
        }
    }
}

impl Profile {
    /// The faults that apply to `proxy`, in declaration order.
    pub fn faults_for<'a>(&'a self, proxy: Option<&'a str>) -> impl Iterator<Item = &'a FaultSpec> {
        self.faults.iter().filter(move |f| f.applies_to(proxy))
    }

    /// The per-connection factories of `proxy`, in chain order.
    pub fn factories_for(&self, proxy: Option<&str>) -> Vec<Arc<dyn FaultFactory>> {
        self.faults_for(proxy)
            .filter_map(|f| match &f.built {
                Built::Conn(c) => Some(Arc::clone(c)),
                Built::Outage(_) => None,
            })
            .collect()
    }

    /// The outage schedules of `proxy`.
    pub fn outages_for(&self, proxy: Option<&str>) -> Vec<OutageSchedule> {
        self.faults_for(proxy)
            .filter_map(|f| match &f.built {
                Built::Outage(o) => Some(*o),
                Built::Conn(_) => None,
            })
            .collect()
    }

    /// The proxy named `name`.
    pub fn proxy(&self, name: &str) -> Option<&ProxyDef> {
        self.proxies.iter().find(|p| p.name == name)
    }
}
