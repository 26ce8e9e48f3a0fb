//! The Toxiproxy-compatible control API and Prometheus metrics.
//!
//! Teams drive Toxiproxy from their test suites through its REST API and its published clients;
//! answering the same API (same paths, methods, JSON shapes, status codes and error texts) lets
//! those suites switch to tearline by changing a port. On top of it: `GET /cuts`,
//! `GET /findings` and `GET /metrics` (Prometheus text format 0.0.4).
//!
//! The API keeps the Toxiproxy bookkeeping itself ([`store`]) and drives the relays through the
//! narrow [`ProxyHub`] seam and builds faults through [`FaultCatalog`], so it is tested without
//! the real runtime. Invariants: a request either applies completely or leaves proxies and
//! toxics as they were (except a failed rebind, which leaves the proxy disabled, as Toxiproxy
//! does); browser-originated requests never change anything (see [`safety`]).
//!
//! Files: [`server`] (hyper loop), [`slots`] (connection slots and eviction), [`routes`] (paths
//! → handlers), [`store`] and `toxics.rs` (Toxiproxy semantics), [`model`] (JSON shapes),
//! [`profile_view`] (a profile's faults listed as toxics), [`safety`] (origin, token, body limit), [`metrics`] (exposition format), [`hub`] (the
//! seams), [`runtime`] (the hub over [`crate::proxy`]),
//! [`catalog`] (the catalogue over [`crate::fault::registry`]), [`listen`] (binding with Go's
//! error texts), [`request_id`] (`X-Toxiproxy-Request-Id`), [`errors`].

pub mod catalog;
pub mod errors;
pub mod hub;
pub mod listen;
pub mod metrics;
pub mod model;
pub mod process;
pub mod profile_view;
pub mod request_id;
pub mod routes;
pub mod runtime;
pub mod safety;
pub mod server;
pub mod slots;
#[cfg(feature = "harness")]
mod socketless;
pub mod sources;
pub mod store;
mod toxics;

use std::sync::Arc;

pub use errors::{ApiError, ControlError};
pub use hub::{
    CatalogError, CutCount, CutsSource, FaultCatalog, FindingsSource, HistogramSnapshot, HubError,
    ProxyHub, ProxyStats, Stopped,
};
pub use server::serve_api;

use metrics::ApiCounters;
use store::Store;

/// How the API is set up; `ApiConfig::new(hub, catalog)` gives the defaults.
pub struct ApiConfig {
    /// The proxy runtime.
    pub hub: Arc<dyn ProxyHub>,
    /// The fault catalogue that turns toxics into faults.
    pub catalog: Arc<dyn FaultCatalog>,
    /// Bearer token every request must carry, if set (`--api-token`).
    pub token: Option<String>,
    /// Largest request body accepted (bytes).
    pub max_body: usize,
    /// Cut records for `/cuts` and `/metrics`.
    pub cuts: Option<Arc<dyn CutsSource>>,
    /// Audit findings for `/findings` and `/metrics`.
    pub findings: Option<Arc<dyn FindingsSource>>,
    /// Time a client has to send a request's headers, and then its body
    /// ([`server::READ_TIMEOUT`] by default): a slow client cannot hold a connection slot.
    pub read_timeout: std::time::Duration,
    /// `Host` names accepted besides the loopback names and the address the client connected
    /// to (`--api-allow-host`; see [`safety::check_host`]).
    pub allowed_hosts: Vec<String>,
}

impl ApiConfig {
    /// No token, [`safety::DEFAULT_MAX_BODY`], no cut or finding sources.
    pub fn new(hub: Arc<dyn ProxyHub>, catalog: Arc<dyn FaultCatalog>) -> Self {
        ApiConfig {
            hub,
            catalog,
            token: None,
            max_body: safety::DEFAULT_MAX_BODY,
            cuts: None,
            findings: None,
            read_timeout: server::READ_TIMEOUT,
            allowed_hosts: Vec::new(),
        }
    }
}

/// Shared state of the API; cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    inner: Arc<ApiInner>,
}

/// What handlers see.
pub struct ApiInner {
    store: Store,
    hub: Arc<dyn ProxyHub>,
    token: Option<String>,
    max_body: usize,
    cuts: Option<Arc<dyn CutsSource>>,
    findings: Option<Arc<dyn FindingsSource>>,
    counters: ApiCounters,
    request_ids: request_id::RequestIds,
    read_timeout: std::time::Duration,
    allowed_hosts: Vec<String>,
}

impl ApiState {
    /// State for one API server.
    pub fn new(config: ApiConfig) -> Self {
        ApiState {
            inner: Arc::new(ApiInner {
                store: Store::new(Arc::clone(&config.hub), config.catalog),
                hub: config.hub,
                token: config.token.filter(|t| !t.is_empty()),
                max_body: config.max_body,
                cuts: config.cuts,
                findings: config.findings,
                counters: ApiCounters::default(),
                request_ids: request_id::RequestIds::default(),
                read_timeout: config.read_timeout,
                allowed_hosts: config.allowed_hosts,
            }),
        }
    }

    /// Lists a proxy started from the command line or a profile so the API shows and manages
    /// it: `enabled` = the hub runs it on `listen` (its bound address), else it is stopped and
    /// `listen` is where it will bind when enabled. `profile` describes the faults its profile
    /// gave it ([`profile_view::profile_toxics`]): listed as toxics, in force before the API's
    /// toxics until `/reset` detaches the profile.
    pub async fn adopt_proxy(
        &self,
        name: &str,
        listen: &str,
        upstream: &str,
        enabled: bool,
        profile: Vec<profile_view::ProfileToxic>,
    ) -> Result<(), ApiError> {
        self.inner
            .store
            .adopt(name, listen, upstream, enabled, profile)
            .await
    }

    /// `POST /populate` from a file at start (`toxiproxy-server -config`): how many proxies
    /// were handled, and the error that stopped it part-way, if any.
    pub async fn populate(&self, inputs: Vec<model::ProxyInput>) -> (usize, Option<ApiError>) {
        match self.inner.store.populate(inputs).await {
            Ok((done, e)) => (done.len(), e),
            Err(e) => (0, Some(e)),
        }
    }

    /// The toxic types the API accepts, sorted.
    pub fn known_types(&self) -> Vec<String> {
        self.inner.store.known_types()
    }
}
