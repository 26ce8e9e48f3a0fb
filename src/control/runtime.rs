//! [`RuntimeHub`]: the [`ProxyHub`] over tearline's relay ([`crate::proxy`]).
//!
//! One [`Proxy`] per name lives as long as the API knows the name, so its counters survive
//! disable/enable cycles; each start runs it on a fresh listener under a child of the hub's
//! shutdown token. Invariants: at most one relay loop per name; `stop` disables the proxy
//! (connections accepted in the race window are refused), closes its connections with FIN as
//! Toxiproxy does, stops its outage schedules, and resolves once the relay loop (and so its
//! listener) has ended.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::hub::{HistogramSnapshot, HubError, ProxyHub, ProxyStats, RESIDENCE_BOUNDS, Stopped};
use crate::fault::FaultFactory;
use crate::fault::outage::OutageSchedule;
use crate::proxy::{Proxy, ProxyConfig, run};
use crate::vocab::OutageMode;

struct Slot {
    proxy: Arc<Proxy>,
    run: Option<(CancellationToken, tokio::task::JoinHandle<()>)>,
    /// Running outage schedules by toxic name.
    outages: BTreeMap<String, (OutageSchedule, CancellationToken)>,
}

impl Slot {
    fn new(proxy: Arc<Proxy>) -> Self {
        Slot {
            proxy,
            run: None,
            outages: BTreeMap::new(),
        }
    }

    fn stop_outages(&mut self) {
        for (_, (_, token)) in std::mem::take(&mut self.outages) {
            token.cancel();
        }
    }
}

fn mode(schedule: &OutageSchedule) -> OutageMode {
    schedule.mode
}

/// Drives one outage schedule on `proxy` from `t0`, skipping the first `skip` windows (already
/// begun by the caller).
async fn drive_outage(
    proxy: Arc<Proxy>,
    schedule: OutageSchedule,
    t0: tokio::time::Instant,
    skip: usize,
    stop: CancellationToken,
) {
    let mode = mode(&schedule);
    for (start, duration) in schedule.windows().skip(skip) {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(t0 + start) => proxy.begin_outage(duration, mode),
        }
    }
}

/// The relay runtime as the control API drives it.
pub struct RuntimeHub {
    template: ProxyConfig,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    slots: Mutex<BTreeMap<String, Slot>>,
}

impl RuntimeHub {
    /// A hub whose new proxies copy `template` (buffer sizes, limits, seed; name and upstream
    /// are replaced) and whose relays all stop when `shutdown` fires.
    pub fn new(template: ProxyConfig, shutdown: CancellationToken) -> Self {
        RuntimeHub {
            template,
            shutdown,
            tracker: TaskTracker::new(),
            slots: Mutex::new(BTreeMap::new()),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Slot>> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs a proxy built elsewhere (the command line, a profile) on `listener` and manages it
    /// from now on under its name. Register it with the API too
    /// ([`ApiState::adopt_proxy`](super::ApiState::adopt_proxy)).
    pub fn run_existing(&self, listener: TcpListener, proxy: Arc<Proxy>) {
        let name = proxy.name().to_owned();
        let mut slots = self.slots();
        if let Some(old) = slots.remove(&name)
            && let Some((token, _)) = old.run
        {
            token.cancel();
        }
        let run = self.spawn(listener, Arc::clone(&proxy));
        let mut slot = Slot::new(proxy);
        slot.run = Some(run);
        slots.insert(name, slot);
    }

    /// Manages a proxy built elsewhere that starts stopped (a profile's `enabled = false`):
    /// nothing listens until the API enables it, which reuses this proxy (counters, sink).
    pub fn adopt_stopped(&self, proxy: Arc<Proxy>) {
        proxy.set_enabled(false);
        let name = proxy.name().to_owned();
        let mut slots = self.slots();
        if let Some(old) = slots.remove(&name)
            && let Some((token, _)) = old.run
        {
            token.cancel();
        }
        slots.insert(name, Slot::new(proxy));
    }

    /// The proxy of a name, if the hub knows it.
    pub fn proxy(&self, name: &str) -> Option<Arc<Proxy>> {
        self.slots().get(name).map(|s| Arc::clone(&s.proxy))
    }

    /// Waits until every relay loop has ended (after `shutdown` fired).
    pub async fn wait(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }

    fn spawn(
        &self,
        listener: TcpListener,
        proxy: Arc<Proxy>,
    ) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let token = self.shutdown.child_token();
        let t = token.clone();
        let handle = self.tracker.spawn(async move {
            let name = proxy.name().to_owned();
            if let Err(e) = run(listener, proxy, t).await {
                tracing::warn!(proxy = %name, error = %e, "relay ended with an error");
            }
        });
        (token, handle)
    }
}

impl ProxyHub for RuntimeHub {
    fn start(
        &self,
        name: &str,
        listener: TcpListener,
        upstream: &str,
        faults: Vec<Arc<dyn FaultFactory>>,
    ) -> Result<(), HubError> {
        if upstream.is_empty() {
            return Err(HubError::Upstream {
                address: upstream.to_owned(),
                reason: "empty".to_owned(),
            });
        }
        let mut slots = self.slots();
        let proxy = match slots.get_mut(name) {
            Some(slot) => {
                if let Some((token, _)) = slot.run.take() {
                    token.cancel();
                }
                slot.proxy.set_upstream(upstream);
                slot.proxy.set_api_faults(faults);
                slot.proxy.set_enabled(true);
                Arc::clone(&slot.proxy)
            }
            None => {
                let mut config = self.template.clone();
                config.name = name.to_owned();
                config.upstream = upstream.to_owned();
                let proxy = Proxy::new(config);
                proxy.set_api_faults(faults);
                slots.insert(name.to_owned(), Slot::new(Arc::clone(&proxy)));
                proxy
            }
        };
        let run = self.spawn(listener, proxy);
        if let Some(slot) = slots.get_mut(name) {
            slot.run = Some(run);
        }
        Ok(())
    }

    fn stop(&self, name: &str) -> Stopped {
        let run = self.slots().get_mut(name).and_then(|slot| {
            slot.stop_outages();
            slot.proxy.set_enabled(false);
            slot.run.take()
        });
        Box::pin(async move {
            if let Some((token, handle)) = run {
                token.cancel();
                let _ = handle.await;
            }
        })
    }

    fn set_upstream(&self, name: &str, upstream: &str) -> Result<(), HubError> {
        let slots = self.slots();
        let slot = slots
            .get(name)
            .ok_or_else(|| HubError::NotRunning(name.to_owned()))?;
        slot.proxy.set_upstream(upstream);
        Ok(())
    }

    fn set_faults(&self, name: &str, faults: Vec<Arc<dyn FaultFactory>>) -> Result<(), HubError> {
        let slots = self.slots();
        let slot = slots
            .get(name)
            .ok_or_else(|| HubError::NotRunning(name.to_owned()))?;
        slot.proxy.set_api_faults(faults);
        Ok(())
    }

    fn profile_faults(&self, name: &str) -> Vec<Arc<dyn FaultFactory>> {
        self.slots()
            .get(name)
            .map(|s| s.proxy.profile_faults())
            .unwrap_or_default()
    }

    fn detach_profile(&self, name: &str) {
        if let Some(slot) = self.slots().get(name) {
            slot.proxy.detach_profile();
        }
    }

    fn profile_detached(&self, name: &str) -> bool {
        self.slots()
            .get(name)
            .is_some_and(|s| s.proxy.profile_detached())
    }

    fn set_outages(
        &self,
        name: &str,
        outages: Vec<(String, OutageSchedule)>,
    ) -> Result<(), HubError> {
        let mut slots = self.slots();
        let slot = slots
            .get_mut(name)
            .ok_or_else(|| HubError::NotRunning(name.to_owned()))?;
        let keep: BTreeMap<String, OutageSchedule> = outages.into_iter().collect();
        let stale: Vec<String> = slot
            .outages
            .iter()
            .filter(|(n, (s, _))| keep.get(*n) != Some(s))
            .map(|(n, _)| n.clone())
            .collect();
        for n in stale {
            if let Some((_, token)) = slot.outages.remove(&n) {
                token.cancel();
            }
        }
        for (n, schedule) in keep {
            if slot.outages.contains_key(&n) {
                continue;
            }
            // A window that starts now begins before the API answers, so a client that
            // connects right after the answer is already inside it.
            let t0 = tokio::time::Instant::now();
            let mut skip = 0;
            if let Some((start, duration)) = schedule.windows().next()
                && start.is_zero()
            {
                slot.proxy.begin_outage(duration, mode(&schedule));
                skip = 1;
            }
            let token = self.shutdown.child_token();
            self.tracker.spawn(drive_outage(
                Arc::clone(&slot.proxy),
                schedule,
                t0,
                skip,
                token.clone(),
            ));
            slot.outages.insert(n, (schedule, token));
        }
        Ok(())
    }

    fn remove(&self, name: &str) {
        if let Some(mut slot) = self.slots().remove(name) {
            slot.stop_outages();
            if let Some((token, _)) = slot.run {
                slot.proxy.set_enabled(false);
                token.cancel();
            }
        }
    }

    fn stats(&self) -> Vec<ProxyStats> {
        self.slots()
            .iter()
            .map(|(name, slot)| {
                let s = slot.proxy.stats().snapshot();
                ProxyStats {
                    name: name.clone(),
                    bytes_upstream: s.bytes_upstream,
                    bytes_downstream: s.bytes_downstream,
                    connections_open: s.connections_open,
                    connections_total: s.connections_total,
                    connections_refused: s.connections_refused,
                    connections_over_limit: s.connections_over_limit,
                    received_upstream: s.received_upstream,
                    received_downstream: s.received_downstream,
                    listen: slot
                        .proxy
                        .listen_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default(),
                    upstream: slot.proxy.upstream(),
                    cuts_by_action: s
                        .cuts
                        .iter()
                        .map(|(a, n)| (a.as_str().to_owned(), *n))
                        .collect(),
                    fault_activations: s
                        .activations
                        .iter()
                        .map(|(k, n)| ((*k).to_owned(), *n))
                        .collect(),
                    residence: HistogramSnapshot::from_hdr(&s.residence_us, 1e-6, RESIDENCE_BOUNDS),
                }
            })
            .collect()
    }
}
