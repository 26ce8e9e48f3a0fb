//! The proxies and toxics the API manages, with Toxiproxy's semantics, carried out on a
//! [`ProxyHub`]. Toxic operations are in `toxics.rs`.
//!
//! Invariants: a proxy is `enabled` if and only if the hub runs it on the address in `listen`;
//! the API's faults of a running proxy always equal its toxics (upstream ones first, then
//! downstream, each in the order added; `noop` toxics contribute nothing), in force after the
//! faults of the profile the proxy was adopted from, which are listed as toxics too
//! ([`super::profile_view`]) and cannot be edited or deleted one by one (409): `/reset`
//! removes every toxic, the profile's included, and detaches the profile (its later phase
//! steps and outage windows do not apply until a `--watch` reload). A failed request leaves
//! the toxics as they were. Every change is made under one lock, so concurrent requests are
//! applied one after the other.
//!
//! `/populate` follows Toxiproxy (`proxy_collection.go`): that every element has a name and an
//! upstream is checked first (400, nothing changed); then each element in order is kept (same
//! name, same resolved listen address, same upstream: toxics included), or replaces the proxy of
//! that name (which is stopped first), or is added. An element whose listen address does not
//! parse or bind (500 with Go's text: `listen tcp: address local373: missing port in address`,
//! `listen tcp 127.0.0.1:3310: bind: address already in use`), or whose upstream is not
//! `host:port` (400, tearline's check), stops the request there; the proxies handled before it
//! stay and are returned next to the error; a proxy it was replacing stays, stopped.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::StatusCode;
use serde_json::{Map, Value};

use super::errors::ApiError;
use super::hub::{FaultCatalog, HubError, ProxyHub};
use super::listen::{bind, resolved};
use super::model::{ProxyDoc, ProxyInput, ProxyPatch, ToxicDoc, check_address};
use super::profile_view::{ProfileToxic, listed};
use crate::fault::FaultFactory;
use crate::fault::outage::OutageSchedule;
use crate::vocab::Direction;

/// How long a stop waits for the proxy's listener to close.
pub const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Listen address used when a create request gives none.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:0";

/// One toxic as the API keeps it.
pub(super) struct ToxicEntry {
    pub(super) name: String,
    pub(super) type_: String,
    pub(super) stream: Direction,
    pub(super) toxicity: f64,
    pub(super) attributes: Map<String, Value>,
    /// What the toxic does.
    pub(super) fault: ToxicFault,
}

/// What a toxic does.
#[derive(Clone)]
pub(super) enum ToxicFault {
    /// Nothing (`noop`).
    Nothing,
    /// A per-connection fault.
    Conn(Arc<dyn FaultFactory>),
    /// A proxy-wide outage schedule.
    Outage(OutageSchedule),
}

/// One proxy as the API keeps it.
pub(super) struct ProxyEntry {
    pub(super) listen: String,
    pub(super) upstream: String,
    pub(super) enabled: bool,
    /// In insertion order, both streams.
    pub(super) toxics: Vec<ToxicEntry>,
    /// The faults a profile gave an adopted proxy, as written at start (the hub says which
    /// are in force).
    pub(super) profile: Vec<ProfileToxic>,
}

/// The managed proxies, behind one async lock.
pub struct Store {
    pub(super) hub: Arc<dyn ProxyHub>,
    pub(super) catalog: Arc<dyn FaultCatalog>,
    pub(super) proxies: tokio::sync::Mutex<BTreeMap<String, ProxyEntry>>,
}

pub(super) fn hub_error(e: HubError) -> ApiError {
    match e {
        HubError::Upstream { .. } => ApiError::bad_body(e),
        other => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

pub(super) fn toxic_doc(t: &ToxicEntry) -> ToxicDoc {
    ToxicDoc {
        attributes: t.attributes.clone(),
        name: t.name.clone(),
        type_: t.type_.clone(),
        stream: t.stream.as_str().to_owned(),
        toxicity: t.toxicity,
        source: None,
    }
}

impl ProxyEntry {
    /// A proxy not started yet, without toxics or profile faults.
    pub(super) fn stopped(listen: String, upstream: String) -> ProxyEntry {
        ProxyEntry {
            listen,
            upstream,
            enabled: false,
            toxics: Vec::new(),
            profile: Vec::new(),
        }
    }

    /// Upstream toxics first, then downstream, each in insertion order.
    pub(super) fn ordered(&self) -> impl Iterator<Item = &ToxicEntry> {
        let up = self
            .toxics
            .iter()
            .filter(|t| t.stream == Direction::Upstream);
        let down = self
            .toxics
            .iter()
            .filter(|t| t.stream == Direction::Downstream);
        up.chain(down)
    }

    pub(super) fn chain(&self) -> Vec<Arc<dyn FaultFactory>> {
        self.ordered()
            .filter_map(|t| match &t.fault {
                // Named: a live edit keeps the state of the toxics it does not change.
                ToxicFault::Conn(f) => Some(crate::fault::named(t.name.clone(), Arc::clone(f))),
                _ => None,
            })
            .collect()
    }

    pub(super) fn outages(&self) -> Vec<(String, OutageSchedule)> {
        self.toxics
            .iter()
            .filter_map(|t| match t.fault {
                ToxicFault::Outage(s) => Some((t.name.clone(), s)),
                _ => None,
            })
            .collect()
    }

    /// Every toxic acting on the proxy: the profile's first, then the API's.
    pub(super) fn toxic_docs(&self, hub: &dyn ProxyHub, name: &str) -> Vec<ToxicDoc> {
        let mut docs = listed(hub, name, &self.profile);
        docs.extend(self.ordered().map(toxic_doc));
        docs
    }

    /// The profile toxic named `toxic` now listed, if any.
    pub(super) fn profile_toxic(
        &self,
        hub: &dyn ProxyHub,
        name: &str,
        toxic: &str,
    ) -> Option<ToxicDoc> {
        listed(hub, name, &self.profile)
            .into_iter()
            .find(|t| t.name == toxic)
    }

    fn doc(&self, hub: &dyn ProxyHub, name: &str) -> ProxyDoc {
        ProxyDoc {
            name: name.to_owned(),
            listen: self.listen.clone(),
            upstream: self.upstream.clone(),
            enabled: self.enabled,
            toxics: self.toxic_docs(hub, name),
        }
    }
}

impl Store {
    /// An empty store over `hub`, building toxics with `catalog`.
    pub fn new(hub: Arc<dyn ProxyHub>, catalog: Arc<dyn FaultCatalog>) -> Self {
        Store {
            hub,
            catalog,
            proxies: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// Records a proxy started by the CLI or a profile so the API lists and manages it: running
    /// on `listen` when `enabled` (the hub already runs it), else stopped until enabled (the hub
    /// knows it but runs nothing). `profile` describes the faults its profile gave it, which
    /// the hub keeps in force before the API's toxics until `/reset`.
    pub async fn adopt(
        &self,
        name: &str,
        listen: &str,
        upstream: &str,
        enabled: bool,
        profile: Vec<ProfileToxic>,
    ) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        if proxies.contains_key(name) {
            return Err(ApiError::proxy_exists());
        }
        proxies.insert(
            name.to_owned(),
            ProxyEntry {
                listen: listen.to_owned(),
                upstream: upstream.to_owned(),
                enabled,
                toxics: Vec::new(),
                profile,
            },
        );
        Ok(())
    }

    /// `GET /proxies`.
    pub async fn list(&self) -> BTreeMap<String, ProxyDoc> {
        let proxies = self.proxies.lock().await;
        proxies
            .iter()
            .map(|(n, p)| (n.clone(), p.doc(self.hub.as_ref(), n)))
            .collect()
    }

    /// `GET /proxies/{name}`.
    pub async fn get(&self, name: &str) -> Result<ProxyDoc, ApiError> {
        let proxies = self.proxies.lock().await;
        let p = proxies.get(name).ok_or_else(ApiError::proxy_not_found)?;
        Ok(p.doc(self.hub.as_ref(), name))
    }

    /// `POST /proxies`.
    pub async fn create(&self, input: ProxyInput) -> Result<ProxyDoc, ApiError> {
        let (name, listen, upstream, enabled) = validate_new(&input, None)?;
        let mut proxies = self.proxies.lock().await;
        if proxies.contains_key(&name) {
            return Err(ApiError::proxy_exists());
        }
        let mut entry = ProxyEntry::stopped(listen, upstream);
        if enabled {
            self.start(&name, &mut entry).await?;
        }
        let doc = entry.doc(self.hub.as_ref(), &name);
        proxies.insert(name, entry);
        Ok(doc)
    }

    /// `POST /populate` (see the module doc): the proxies handled, and the error that stopped
    /// the request part-way, if any (Toxiproxy answers both in one document).
    pub async fn populate(
        &self,
        inputs: Vec<ProxyInput>,
    ) -> Result<(Vec<ProxyDoc>, Option<ApiError>), ApiError> {
        for (i, input) in inputs.iter().enumerate() {
            check_required(input, Some(i + 1))?;
        }
        let mut proxies = self.proxies.lock().await;
        let mut out = Vec::with_capacity(inputs.len());
        for (i, input) in inputs.iter().enumerate() {
            let (name, listen, upstream, enabled) = match validate_new(input, Some(i + 1)) {
                Ok(v) => v,
                Err(e) => return Ok((out, Some(e))),
            };
            if let Some(existing) = proxies.get_mut(&name) {
                let same = match resolved(&listen).await {
                    Ok(l) => existing.listen == l && existing.upstream == upstream,
                    Err(e) => return Ok((out, Some(e))),
                };
                if same {
                    out.push(existing.doc(self.hub.as_ref(), &name));
                    continue;
                }
                // Toxiproxy stops the old proxy first; it stays (stopped) if the new one fails.
                if existing.enabled {
                    self.stop(&name).await;
                    existing.enabled = false;
                }
                // The replacement is the API's: the profile's faults go with the old proxy.
                self.hub.detach_profile(&name);
            }
            let mut entry = ProxyEntry::stopped(listen, upstream);
            if enabled && let Err(e) = self.start(&name, &mut entry).await {
                return Ok((out, Some(e)));
            }
            out.push(entry.doc(self.hub.as_ref(), &name));
            proxies.insert(name, entry);
        }
        Ok((out, None))
    }

    /// `PATCH /proxies/{name}`: a listen change rebinds; an upstream-only change on a running
    /// proxy is applied live (new connections go to the new upstream).
    pub async fn update(&self, name: &str, patch: ProxyPatch) -> Result<ProxyDoc, ApiError> {
        let mut proxies = self.proxies.lock().await;
        let entry = proxies
            .get_mut(name)
            .ok_or_else(ApiError::proxy_not_found)?;
        let listen = patch.listen.unwrap_or_else(|| entry.listen.clone());
        let upstream = patch.upstream.unwrap_or_else(|| entry.upstream.clone());
        let enabled = patch.enabled.unwrap_or(entry.enabled);
        if upstream != entry.upstream {
            check_address("upstream", &upstream)?;
        }
        if listen != entry.listen {
            if entry.enabled {
                self.stop(name).await;
                entry.enabled = false;
            }
            entry.listen = listen;
        }
        if upstream != entry.upstream {
            if entry.enabled {
                self.hub.set_upstream(name, &upstream).map_err(hub_error)?;
            }
            entry.upstream = upstream;
        }
        if enabled && !entry.enabled {
            self.start(name, entry).await?;
        } else if !enabled && entry.enabled {
            self.stop(name).await;
            entry.enabled = false;
        }
        Ok(entry.doc(self.hub.as_ref(), name))
    }

    /// `DELETE /proxies/{name}`.
    pub async fn delete(&self, name: &str) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        proxies.remove(name).ok_or_else(ApiError::proxy_not_found)?;
        self.stop(name).await;
        self.hub.remove(name);
        Ok(())
    }

    /// `POST /reset`: enables every proxy and removes every toxic it lists, the profile's
    /// included (the profile is detached: see the module doc).
    pub async fn reset(&self) -> Result<(), ApiError> {
        let mut proxies = self.proxies.lock().await;
        for (name, entry) in proxies.iter_mut() {
            entry.toxics.clear();
            self.hub.detach_profile(name);
            if entry.enabled {
                self.hub.set_faults(name, Vec::new()).map_err(hub_error)?;
                self.hub.set_outages(name, Vec::new()).map_err(hub_error)?;
            } else {
                self.start(name, entry).await?;
            }
        }
        Ok(())
    }

    /// Stops a proxy and waits (bounded) until its listener is closed.
    async fn stop(&self, name: &str) {
        if tokio::time::timeout(STOP_WAIT, self.hub.stop(name))
            .await
            .is_err()
        {
            tracing::warn!(proxy = %name, "listener still open {STOP_WAIT:?} after stop");
        }
    }

    async fn start(&self, name: &str, entry: &mut ProxyEntry) -> Result<(), ApiError> {
        let listener = bind(&entry.listen).await?;
        let addr = listener.local_addr().map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("listen tcp {}: {e}", entry.listen),
            )
        })?;
        self.hub
            .start(name, listener, &entry.upstream, entry.chain())
            .map_err(hub_error)?;
        self.hub
            .set_outages(name, entry.outages())
            .map_err(hub_error)?;
        entry.listen = addr.to_string();
        entry.enabled = true;
        Ok(())
    }
}

/// Toxiproxy's first check of a new proxy: a name and an upstream (400 naming the field, and
/// for a populate request the element, 1-based `index`).
fn check_required(input: &ProxyInput, index: Option<usize>) -> Result<(), ApiError> {
    let at = |field: &str| match index {
        Some(i) => format!("{field} at proxy {i}"),
        None => field.to_owned(),
    };
    if input.name.as_deref().unwrap_or_default().is_empty() {
        return Err(ApiError::missing_field(&at("name")));
    }
    if input.upstream.as_deref().unwrap_or_default().is_empty() {
        return Err(ApiError::missing_field(&at("upstream")));
    }
    Ok(())
}

/// Checks a new proxy (see [`check_required`]); the upstream must be `host:port` (400; Toxiproxy
/// accepts any text and fails every connection). The listen address is checked by binding it.
fn validate_new(
    input: &ProxyInput,
    index: Option<usize>,
) -> Result<(String, String, String, bool), ApiError> {
    check_required(input, index)?;
    let name = input.name.clone().unwrap_or_default();
    let upstream = input.upstream.clone().unwrap_or_default();
    let listen = match input.listen.as_deref() {
        None | Some("") => DEFAULT_LISTEN.to_owned(),
        Some(l) => l.to_owned(),
    };
    let enabled = input.enabled.unwrap_or(true);
    if enabled {
        check_address("upstream", &upstream)?;
    }
    Ok((name, listen, upstream, enabled))
}
