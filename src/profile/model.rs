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
    /// Timed phases; empty = every per-connection fault is always in force.
    pub phases: Vec<PhaseSpec>,
    /// `[[llm_route]]`s: request paths (a prefix when ending in `*`) that speak an LLM API
    /// tearline does not recognise by itself.
    pub llm_routes: Vec<(String, crate::vocab::LlmApi)>,
}

/// A `[[phase]]`: for `duration` from its start, only the per-connection faults it names are in
/// force (outages keep their own schedule). The last phase lasts until the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseSpec {
    /// Unique name (logs).
    pub name: String,
    /// How long it lasts; `None` only on the last phase.
    pub duration: Option<std::time::Duration>,
    /// Names of the `[[fault]]`s in force.
    pub faults: Vec<String>,
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

    /// The per-connection factories of `proxy` at the start, in chain order: every one, or
    /// with phases those of the first phase.
    pub fn factories_for(&self, proxy: Option<&str>) -> Vec<Arc<dyn FaultFactory>> {
        match self.phases.first() {
            Some(first) => self.factories_in(proxy, first),
            None => self.all_factories_for(proxy),
        }
    }

    /// The per-connection factories of `proxy` that `phase` names, in chain order.
    pub fn factories_in(
        &self,
        proxy: Option<&str>,
        phase: &PhaseSpec,
    ) -> Vec<Arc<dyn FaultFactory>> {
        self.faults_for(proxy)
            .filter(|f| phase.faults.contains(&f.name))
            .filter_map(|f| match &f.built {
                // Named: a reload or phase step keeps the state of faults it does not change.
                Built::Conn(c) => Some(crate::fault::named(f.name.clone(), Arc::clone(c))),
                Built::Outage(_) => None,
            })
            .collect()
    }

    /// The timeline of `proxy`'s fault chain: (offset from the start, phase name, factories),
    /// one entry per phase; empty without phases.
    pub fn phase_plan(&self, proxy: Option<&str>) -> Vec<PhaseStep> {
        let mut at = std::time::Duration::ZERO;
        let mut steps = Vec::with_capacity(self.phases.len());
        for phase in &self.phases {
            steps.push(PhaseStep {
                at,
                name: phase.name.clone(),
                faults: self.factories_in(proxy, phase),
            });
            at += phase.duration.unwrap_or_default();
        }
        steps
    }

    /// Every per-connection factory of `proxy`, phases ignored.
    fn all_factories_for(&self, proxy: Option<&str>) -> Vec<Arc<dyn FaultFactory>> {
        self.faults_for(proxy)
            .filter_map(|f| match &f.built {
                // Named: a reload or phase step keeps the state of faults it does not change.
                Built::Conn(c) => Some(crate::fault::named(f.name.clone(), Arc::clone(c))),
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

/// One step of a phase timeline.
#[derive(Clone)]
pub struct PhaseStep {
    /// When it begins, from the proxy's start.
    pub at: std::time::Duration,
    /// The phase's name.
    pub name: String,
    /// The fault chain in force during it.
    pub faults: Vec<Arc<dyn FaultFactory>>,
}

impl std::fmt::Debug for PhaseStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PhaseStep")
            .field("at", &self.at)
            .field("name", &self.name)
            .field("faults", &self.faults.len())
            .finish()
    }
}
