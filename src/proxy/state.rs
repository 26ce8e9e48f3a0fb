//! The shared, runtime-changeable state of one proxy: what the control API edits while
//! connections run.
//!
//! Invariants:
//! - Fault changes are published as a (generation, list, start times) triple under one lock
//!   (and on a watch channel that wakes waiting pumps, on the copying and the zero-copy path);
//!   a fault's start time is the edit that added its identity, kept by later edits; a pump that sees a new generation diffs its chain
//!   against the list before its next chunk (`chain` says what survives), and bytes already
//!   planned keep their place in the queue (nothing lost or reordered).
//! - The faults in force are two layers, published as one list: the profile's (command line,
//!   profile, phase steps, `--watch`: [`Proxy::set_faults`]) followed by the control API's
//!   toxics ([`Proxy::set_api_faults`]); neither writer replaces the other's layer. A detached
//!   profile layer ([`Proxy::detach_profile`], the API's `/reset`) is empty and ignores the
//!   profile's writes until [`Proxy::attach_profile`] (a `--watch` reload).
//! - Every connection holds the kill signal that was current when it was accepted; killing
//!   (disable, outage, forced shutdown) fires the current signal and installs a fresh one, so
//!   connections accepted afterwards are unaffected. State (disabled, outage window) is set
//!   before the signal fires, so an accept racing with a kill either is killed or sees the state.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::readbuf::{ReadBufferGauge, ReadBufs};
use super::stats::Stats;
use super::{FaultList, ProxyConfig};
use crate::fault::FaultFactory;
use crate::vocab::{CutAction, OutageMode};
use crate::wire::observe::NoObserver;
use crate::wire::{ObservationSink, WireObserver};

/// Makes the (upstream, downstream) observers of connection `id`.
pub type ObserverFactory =
    dyn Fn(u64) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) + Send + Sync;

/// The fault factories in force, shared by every connection that reads them.
pub type Factories = Arc<[Arc<dyn FaultFactory>]>;

/// One published fault list: its generation, the factories, and for each factory (same index)
/// when its identity (`chain::identities`) entered the list — kept across later edits, so a
/// connection that first sees a fault some edits later still counts its time from the edit
/// that added it.
#[derive(Clone)]
pub(crate) struct Published {
    pub(crate) generation: u64,
    pub(crate) factories: Factories,
    pub(crate) since: Arc<[Instant]>,
}

impl Published {
    /// A list whose every fault starts at `now` (the proxy's first, or an edit's new ones).
    fn new(generation: u64, factories: FaultList, prev: Option<&Published>) -> Self {
        let now = Instant::now();
        let ids = super::chain::identities(&factories);
        let old = prev.map(|p| (super::chain::identities(&p.factories), &p.since));
        let since = ids
            .iter()
            .map(|id| {
                old.as_ref()
                    .and_then(|(ids, since)| ids.iter().position(|o| o == id).map(|i| since[i]))
                    .unwrap_or(now)
            })
            .collect();
        Published {
            generation,
            factories: factories.into(),
            since,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Outage {
    until: Instant,
    mode: OutageMode,
}

/// Fired when a proxy closes its open connections; `action` says how.
#[derive(Debug, Default)]
pub(crate) struct KillSignal {
    pub(crate) token: CancellationToken,
    action: OnceLock<CutAction>,
}

impl KillSignal {
    /// How the connection must end once `token` fired.
    pub(crate) fn action(&self) -> CutAction {
        self.action.get().copied().unwrap_or(CutAction::Reset)
    }
}

/// One proxy's shared state. Cheap to read from the data path (atomics, uncontended locks taken
/// per connection or per fault change, never per byte).
pub struct Proxy {
    config: ProxyConfig,
    upstream: RwLock<String>,
    enabled: AtomicBool,
    fault_generation: AtomicU64,
    faults: RwLock<Published>,
    /// The profile's and the API's fault lists, and whether the profile is detached.
    layers: Mutex<Layers>,
    /// The generation, for pumps waiting on I/O or a timer to wake on an edit.
    fault_edits: tokio::sync::watch::Sender<u64>,
    outage: Mutex<Option<Outage>>,
    kill: Mutex<Arc<KillSignal>>,
    observers: RwLock<Arc<ObserverFactory>>,
    /// The LLM routes the observers recognise (the h2 stream relay builds its own observer).
    llm_routes: RwLock<Arc<crate::wire::llm_routes::LlmRoutes>>,
    sink: RwLock<Option<Arc<dyn ObservationSink>>>,
    next_conn: AtomicU64,
    listen: Mutex<Option<SocketAddr>>,
    stats: Stats,
    /// The pumps' read buffers (lent while bytes pass).
    read_bufs: ReadBufs,
    /// When a budget refusal was last logged (rate limit: one warning per second).
    budget_warned: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("name", &self.config.name)
            .field("upstream", &self.upstream())
            .field("enabled", &self.is_enabled())
            .finish_non_exhaustive()
    }
}

/// The two sources of a proxy's faults (see the module doc).
#[derive(Default)]
struct Layers {
    profile: FaultList,
    api: FaultList,
    detached: bool,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn byte_mode(_: u64) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
    (
        Box::new(NoObserver::default()),
        Box::new(NoObserver::default()),
    )
}

impl Proxy {
    /// A proxy with no faults, byte-mode observers and no sink, enabled.
    pub fn new(config: ProxyConfig) -> Arc<Self> {
        Self::with_faults(config, Vec::new())
    }

    /// A proxy with initial fault factories.
    pub fn with_faults(config: ProxyConfig, faults: FaultList) -> Arc<Self> {
        Arc::new(Proxy {
            upstream: RwLock::new(config.upstream.clone()),
            read_bufs: ReadBufs::new(config.buffer_size, config.read_budget),
            config,
            enabled: AtomicBool::new(true),
            fault_generation: AtomicU64::new(0),
            faults: RwLock::new(Published::new(0, faults.clone(), None)),
            layers: Mutex::new(Layers {
                profile: faults,
                ..Layers::default()
            }),
            fault_edits: tokio::sync::watch::Sender::new(0),
            outage: Mutex::new(None),
            kill: Mutex::new(Arc::default()),
            observers: RwLock::new(Arc::new(byte_mode)),
            llm_routes: RwLock::new(crate::wire::llm_routes::LlmRoutes::known()),
            sink: RwLock::new(None),
            next_conn: AtomicU64::new(0),
            listen: Mutex::new(None),
            stats: Stats::new(),
            budget_warned: Mutex::new(None),
        })
    }

    /// The static configuration (its `upstream` is the initial one; see [`Proxy::upstream`]).
    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// The proxy's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Live counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The lender of the pumps' read buffers.
    pub(crate) fn read_bufs(&self) -> &ReadBufs {
        &self.read_bufs
    }

    /// The pumps' read buffers now: how many directions hold one, their bytes, the peak.
    pub fn read_buffers(&self) -> ReadBufferGauge {
        self.read_bufs.gauge()
    }

    /// Whether the proxy holds at least its memory budget (`max_buffered_bytes`).
    pub fn over_budget(&self) -> bool {
        let budget = self.config.max_buffered_bytes;
        budget > 0 && self.stats.bytes_buffered() >= budget
    }

    /// Logs a refusal for the budget, at most once a second.
    pub(crate) fn warn_over_budget(&self) {
        let now = Instant::now();
        let mut last = lock(&self.budget_warned);
        if last.is_some_and(|t| now.duration_since(t) < Duration::from_secs(1)) {
            return;
        }
        *last = Some(now);
        tracing::warn!(
            proxy = %self.config.name,
            buffered = self.stats.bytes_buffered(),
            budget = self.config.max_buffered_bytes,
            "memory budget reached: new connections refused (RST) and queues paused until \
             buffered bytes fall below it (raise --max-buffered, or lower --max-inflight)"
        );
    }

    /// The address [`run`](super::run) is serving this proxy on, while it runs.
    pub fn listen_addr(&self) -> Option<SocketAddr> {
        *lock(&self.listen)
    }

    pub(crate) fn set_listen_addr(&self, addr: Option<SocketAddr>) {
        *lock(&self.listen) = addr;
    }

    /// The upstream new connections go to.
    pub fn upstream(&self) -> String {
        read(&self.upstream).clone()
    }

    /// Changes the upstream for new connections; open connections keep theirs.
    pub fn set_upstream(&self, upstream: impl Into<String>) {
        *write(&self.upstream) = upstream.into();
    }

    /// Whether the proxy accepts connections.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Disabled: new connections are reset at accept and every open connection is closed (FIN).
    /// Enabled again: connections are served as before.
    pub fn set_enabled(&self, enabled: bool) {
        let was = self.enabled.swap(enabled, Ordering::AcqRel);
        if was && !enabled {
            self.kill_all(CutAction::Fin);
        }
    }

    /// Replaces the profile's fault factories (both directions), unless the profile is
    /// detached. Live connections switch at their next chunk, keeping the state of unchanged
    /// faults (see `chain`); bytes already planned keep their timing and order.
    pub fn set_faults(&self, faults: FaultList) {
        let mut layers = lock(&self.layers);
        if layers.detached {
            tracing::debug!(proxy = %self.config.name, "profile detached by /reset: faults not applied");
            return;
        }
        layers.profile = faults;
        self.publish(&layers);
    }

    /// Replaces the control API's fault factories (its toxics), which follow the profile's.
    pub fn set_api_faults(&self, faults: FaultList) {
        let mut layers = lock(&self.layers);
        layers.api = faults;
        self.publish(&layers);
    }

    /// The profile's fault factories in force (empty while detached).
    pub fn profile_faults(&self) -> FaultList {
        lock(&self.layers).profile.clone()
    }

    /// Empties the profile's layer and ignores the profile's later writes (phase steps) and
    /// outage windows, until [`Proxy::attach_profile`].
    pub fn detach_profile(&self) {
        let mut layers = lock(&self.layers);
        layers.detached = true;
        layers.profile = Vec::new();
        self.publish(&layers);
    }

    /// Puts a profile's faults back in force (a `--watch` reload after a detach).
    pub fn attach_profile(&self, faults: FaultList) {
        let mut layers = lock(&self.layers);
        layers.detached = false;
        layers.profile = faults;
        self.publish(&layers);
    }

    /// True while the profile is detached (its outage windows are skipped).
    pub fn profile_detached(&self) -> bool {
        lock(&self.layers).detached
    }

    fn publish(&self, layers: &Layers) {
        let faults: FaultList = layers.profile.iter().chain(&layers.api).cloned().collect();
        let mut g = write(&self.faults);
        let generation = g.generation + 1;
        *g = Published::new(generation, faults, Some(&g));
        self.fault_generation.store(generation, Ordering::Release);
        self.fault_edits.send_replace(generation);
    }

    /// A receiver that changes with every [`Proxy::set_faults`].
    pub(crate) fn fault_edits(&self) -> tokio::sync::watch::Receiver<u64> {
        self.fault_edits.subscribe()
    }

    /// The current fault factories.
    pub fn faults(&self) -> Factories {
        read(&self.faults).factories.clone()
    }

    /// The generation counter of the fault list (bumped by every [`Proxy::set_faults`]).
    pub fn fault_generation(&self) -> u64 {
        self.fault_generation.load(Ordering::Acquire)
    }

    /// The fault list in force, with its generation and start times.
    pub(crate) fn published(&self) -> Published {
        read(&self.faults).clone()
    }

    /// Starts (or extends) an outage: every open connection is reset now, and connections
    /// accepted before `now + duration` are refused with RST or held until then (`mode`).
    pub fn begin_outage(&self, duration: Duration, mode: OutageMode) {
        self.open_window(duration, mode);
        tracing::info!(proxy = %self.config.name, ?duration, ?mode, "outage begins");
        self.kill_all(CutAction::Reset);
    }

    /// The outage a cut opens (the documents' "250 ms connection reset"): connections accepted
    /// before `now + duration` are held until then; open connections are left alone (the cut
    /// already ended the one it hit), so concurrent sessions are not all torn by one cut.
    /// Returns the window actually in effect from now (longer than `duration` when a running
    /// outage ends later), for the cut record.
    pub fn hold_new_connections(&self, duration: Duration) -> Duration {
        let now = Instant::now();
        let until = self.open_window(duration, OutageMode::Hold);
        tracing::debug!(proxy = %self.config.name, ?duration, "new connections held after a cut");
        until.saturating_duration_since(now)
    }

    /// Starts or extends the outage window (the later end wins; the newest mode applies);
    /// returns the window's end.
    fn open_window(&self, duration: Duration, mode: OutageMode) -> Instant {
        let until = Instant::now() + duration;
        let mut o = lock(&self.outage);
        let until = o.map_or(until, |old| old.until.max(until));
        *o = Some(Outage { until, mode });
        until
    }

    /// The end of the current outage window and its mode, if one is running.
    pub fn outage(&self) -> Option<(Instant, OutageMode)> {
        let mut o = lock(&self.outage);
        match *o {
            Some(out) if out.until > Instant::now() => Some((out.until, out.mode)),
            Some(_) => {
                *o = None;
                None
            }
            None => None,
        }
    }

    /// Sets the observer factory (default: byte mode, [`NoObserver`] both ways) for new
    /// connections.
    pub fn set_observer_factory(&self, factory: Arc<ObserverFactory>) {
        *write(&self.observers) = factory;
    }

    /// Sets where observations (connections, cuts, what observers learn) go; `None` drops them.
    pub fn set_sink(&self, sink: Option<Arc<dyn ObservationSink>>) {
        *write(&self.sink) = sink;
    }

    /// Observes HTTP/1.1 or h2c (told apart by the client's first bytes) and SSE on every new
    /// connection and sends what is learnt, with the connections and cuts, to `sink`: the one
    /// call that wires an observer and its sink (the observer factory and the sink must name
    /// the same sink, or facts and cuts part).
    pub fn observe_http(&self, sink: Arc<dyn ObservationSink>) {
        self.observe_http_routed(sink, crate::wire::llm_routes::LlmRoutes::known());
    }

    /// [`Proxy::observe_http`], recognising LLM streams on `routes` (declared routes first).
    pub fn observe_http_routed(
        &self,
        sink: Arc<dyn ObservationSink>,
        routes: Arc<crate::wire::llm_routes::LlmRoutes>,
    ) {
        let observer_sink = sink.clone();
        // The h2 stream relay builds its observer from these too (conn.rs).
        *write(&self.llm_routes) = routes.clone();
        // The client's first bytes pick the observer: the HTTP/2 preface → h2c, else HTTP/1.1.
        self.set_observer_factory(Arc::new(move |conn| {
            crate::wire::h2::observer_pair_sniffed(conn, observer_sink.clone(), routes.clone())
        }));
        self.set_sink(Some(sink));
    }

    pub(crate) fn llm_routes(&self) -> Arc<crate::wire::llm_routes::LlmRoutes> {
        read(&self.llm_routes).clone()
    }

    pub(crate) fn sink(&self) -> Option<Arc<dyn ObservationSink>> {
        read(&self.sink).clone()
    }

    pub(crate) fn observers(&self, conn: u64) -> (Box<dyn WireObserver>, Box<dyn WireObserver>) {
        let f = read(&self.observers).clone();
        f(conn)
    }

    /// Closes every open connection now (`action`: reset or FIN), without changing any state.
    pub fn kill_all(&self, action: CutAction) {
        let old = std::mem::take(&mut *lock(&self.kill));
        let _ = old.action.set(action);
        old.token.cancel();
    }

    pub(crate) fn kill_signal(&self) -> Arc<KillSignal> {
        lock(&self.kill).clone()
    }

    pub(crate) fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real time (the crate does not enable tokio's test-util); windows are short.
    #[tokio::test]
    async fn outage_window_ends_on_time_and_extends_not_shortens() {
        let p = Proxy::new(ProxyConfig::new("t", "127.0.0.1:1"));
        let kill = p.kill_signal();
        p.begin_outage(Duration::from_millis(250), OutageMode::Refuse);
        assert!(kill.token.is_cancelled(), "open connections are killed");
        assert_eq!(kill.action(), CutAction::Reset);
        assert!(
            !p.kill_signal().token.is_cancelled(),
            "later connections get a fresh signal"
        );
        let (until, _) = p.outage().expect("outage running");
        // A shorter second outage does not cut the first one short.
        p.begin_outage(Duration::from_millis(50), OutageMode::Hold);
        assert_eq!(p.outage(), Some((until, OutageMode::Hold)));
        tokio::time::sleep_until(until).await;
        assert_eq!(p.outage(), None);
    }

    #[test]
    fn declared_llm_routes_reach_the_h2_relay_as_well_as_the_pumps() {
        let p = Proxy::new(ProxyConfig::new("t", "127.0.0.1:1"));
        let routes = Arc::new(crate::wire::llm_routes::LlmRoutes::new(vec![(
            "/gw/chat".to_owned(),
            crate::vocab::LlmApi::ChatCompletions,
        )]));
        assert_eq!(p.llm_routes().api_of("/gw/chat"), None);
        p.observe_http_routed(Arc::new(crate::wire::observe::FanOut(Vec::new())), routes);
        assert_eq!(
            p.llm_routes().api_of("/gw/chat"),
            Some(crate::vocab::LlmApi::ChatCompletions)
        );
    }

    #[test]
    fn set_faults_bumps_the_generation() {
        let p = Proxy::new(ProxyConfig::new("t", "127.0.0.1:1"));
        assert_eq!(p.fault_generation(), 0);
        p.set_faults(Vec::new());
        p.set_faults(Vec::new());
        assert_eq!(p.fault_generation(), 2);
        assert_eq!(p.published().generation, 2);
    }

    fn latency(name: &str) -> Arc<dyn FaultFactory> {
        use crate::fault::common::{Common, Factory};
        let common = Common {
            direction: crate::vocab::Direction::Downstream,
            probability: 1.0,
        };
        let config = crate::fault::latency::LatencyConfig {
            latency: Duration::from_millis(5),
            jitter: Duration::ZERO,
        };
        crate::fault::named(name, Factory::shared(common, config))
    }

    fn names(p: &Proxy) -> Vec<String> {
        p.faults()
            .iter()
            .map(|f| f.name().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn profile_and_api_faults_are_in_force_together_profile_first() {
        let p = Proxy::with_faults(ProxyConfig::new("t", "127.0.0.1:1"), vec![latency("prof")]);
        p.set_api_faults(vec![latency("tox")]);
        assert_eq!(names(&p), ["prof", "tox"]);
        // A phase step replaces the profile's layer only.
        p.set_faults(vec![latency("step")]);
        assert_eq!(names(&p), ["step", "tox"]);
        p.set_api_faults(Vec::new());
        assert_eq!(names(&p), ["step"]);
    }

    #[test]
    fn a_detached_profile_ignores_phase_steps_until_attached_again() {
        let p = Proxy::with_faults(ProxyConfig::new("t", "127.0.0.1:1"), vec![latency("prof")]);
        p.set_api_faults(vec![latency("tox")]);
        p.detach_profile();
        assert!(p.profile_detached());
        assert_eq!(names(&p), ["tox"]);
        p.set_faults(vec![latency("step")]);
        assert_eq!(names(&p), ["tox"]);
        assert!(p.profile_faults().is_empty());
        p.attach_profile(vec![latency("reloaded")]);
        assert!(!p.profile_detached());
        assert_eq!(names(&p), ["reloaded", "tox"]);
    }
}
