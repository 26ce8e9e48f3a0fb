//! Accept loop and shutdown of one proxy, and the entry points that start several.
//!
//! Invariants:
//! - [`run`] never returns because of an accept error: it logs, backs off (5 ms doubling to
//!   1 s) and accepts again. It returns only after `shutdown` fired, the listener was closed,
//!   and every connection task ended (drained within `drain_timeout`, the rest reset).
//! - At most `max_connections` connection tasks exist (default: what the open-file limit
//!   allows, see `fd_limit`). A connection over the limit is never left waiting unserved: it is
//!   accepted and reset (RST) at once, counted as refused and over the limit, and the first one
//!   is logged as a warning. When the process is out of file descriptors (EMFILE/ENFILE), a
//!   spare descriptor is given up to accept the waiting connection and reset it the same way.
//!   The backlog is as deep as the kernel allows ([`LISTEN_BACKLOG`], capped at
//!   `net.core.somaxconn`), not tokio's default of 1,024.
//! - A connection accepted while the proxy is disabled, or during a `Refuse` outage, is reset
//!   (RST) at once and counted as refused.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::conn::{reset, serve};
use super::state::Proxy;
use super::{FaultList, ProxyConfig, ProxyError};
use crate::vocab::CutAction;
use crate::vocab::OutageMode;

/// Largest read buffer accepted (each connection allocates two).
const MAX_BUFFER: usize = 16 * 1024 * 1024;

/// Listen backlog asked for; the kernel caps it at `net.core.somaxconn` (4,096 on Linux since
/// 5.4), as Go's `net` package — and so Toxiproxy — does. With tokio's default of 1,024, a
/// burst of 5,000 clients overflowed the accept queue: SYNs were dropped (connects took 1–3 s
/// of retransmits), SYN cookies were sent, and a client whose cookie ACK then failed believed
/// it was connected while the proxy never saw it (reset minutes later).
pub const LISTEN_BACKLOG: u32 = 65_535;

/// Binds `addr` (with `SO_REUSEADDR`, as `TcpListener::bind`) and listens with
/// [`LISTEN_BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(LISTEN_BACKLOG)
}

/// One proxy to start: where it listens, its configuration and its initial faults.
pub struct ProxySpec {
    /// Listen address.
    pub listen: SocketAddr,
    /// Configuration (name, upstream, limits, seed).
    pub config: ProxyConfig,
    /// Initial fault factories (both directions).
    pub faults: FaultList,
}

/// Builds the [`Proxy`] of `spec` without binding anything (a proxy that starts disabled).
pub fn build(spec: ProxySpec) -> Result<Arc<Proxy>, ProxyError> {
    check(&spec.config)?;
    Ok(Proxy::with_faults(spec.config, spec.faults))
}

/// Binds `spec.listen` and builds its [`Proxy`].
pub async fn bind(spec: ProxySpec) -> Result<(TcpListener, Arc<Proxy>), ProxyError> {
    check(&spec.config)?;
    let listener = listen(spec.listen).map_err(|source| ProxyError::Bind {
        addr: spec.listen,
        source,
    })?;
    Ok((listener, Proxy::with_faults(spec.config, spec.faults)))
}

/// Binds every spec (all or none: the first failure is returned and nothing runs). Names must
/// be unique. The proxies are returned so a control API can manage them.
pub async fn bind_all(specs: Vec<ProxySpec>) -> Result<Vec<(TcpListener, Arc<Proxy>)>, ProxyError> {
    let mut names = std::collections::HashSet::new();
    for s in &specs {
        if !names.insert(s.config.name.clone()) {
            return Err(ProxyError::DuplicateName(s.config.name.clone()));
        }
    }
    let mut bound = Vec::with_capacity(specs.len());
    for spec in specs {
        bound.push(bind(spec).await?);
    }
    Ok(bound)
}

/// Runs already-bound proxies until `shutdown` fires and all of them drained.
pub async fn run_bound(
    bound: Vec<(TcpListener, Arc<Proxy>)>,
    shutdown: CancellationToken,
) -> Result<(), ProxyError> {
    let runs = bound.into_iter().map(|(l, p)| run(l, p, shutdown.clone()));
    futures_util::future::try_join_all(runs).await.map(|_| ())
}

/// Binds and runs several proxies (a profile's) until `shutdown` fires.
pub async fn run_all(specs: Vec<ProxySpec>, shutdown: CancellationToken) -> Result<(), ProxyError> {
    let bound = bind_all(specs).await?;
    run_bound(bound, shutdown).await
}

fn check(cfg: &ProxyConfig) -> Result<(), ProxyError> {
    let bad = |problem: &str| {
        Err(ProxyError::Config {
            proxy: cfg.name.clone(),
            problem: problem.to_owned(),
        })
    };
    if cfg.buffer_size == 0 || cfg.buffer_size > MAX_BUFFER {
        return bad("buffer_size must be between 1 byte and 16 MiB");
    }
    if cfg.max_connections == 0 || cfg.max_connections > Semaphore::MAX_PERMITS {
        return bad("max_connections must be between 1 and 2^61");
    }
    if cfg.upstream.is_empty() {
        return bad("upstream is empty");
    }
    Ok(())
}

/// A descriptor held in reserve, given up to accept (and refuse) a connection when the process
/// has no other descriptor left.
struct Spare(Option<std::fs::File>);

impl Spare {
    fn open() -> Self {
        Spare(std::fs::File::open("/dev/null").ok())
    }

    /// Closes the spare; `false` when there was none to give up.
    fn release(&mut self) -> bool {
        self.0.take().is_some()
    }
}

fn is_out_of_fds(e: &std::io::Error) -> bool {
    // EMFILE (the process's limit) and ENFILE (the system's), as on Linux and the BSDs.
    matches!(e.raw_os_error(), Some(23 | 24))
}

/// Counts a connection refused over a limit; the first of the proxy is a warning.
fn over_limit(proxy: &Proxy, peer: SocketAddr, why: &str) {
    let n = proxy.stats().over_limit();
    if n == 1 {
        tracing::warn!(
            proxy = %proxy.name(),
            %peer,
            max_connections = proxy.config().max_connections,
            "connection refused (RST): {why}; further refusals are counted in \
             tearline_proxy_connections_over_limit_total (raise --max-connections or the \
             open-file limit, ulimit -n)"
        );
    } else {
        tracing::debug!(proxy = %proxy.name(), %peer, total = n, "connection refused over a limit: {why}");
    }
}

/// Serves `proxy` on `listener` until `shutdown` fires, then drains (see the module doc).
pub async fn run(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: CancellationToken,
) -> Result<(), ProxyError> {
    check(proxy.config())?;
    let tracker = TaskTracker::new();
    let slots = Arc::new(Semaphore::new(proxy.config().max_connections));
    // The spare descriptor exists before the proxy is seen to listen.
    let mut spare = Spare::open();
    let local = listener.local_addr().ok();
    proxy.set_listen_addr(local);
    if let Some(addr) = local {
        tracing::info!(proxy = %proxy.name(), listen = %addr, upstream = %proxy.upstream(), "listening");
    }
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            biased;
            () = shutdown.cancelled() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                backoff = Duration::from_millis(5);
                a
            }
            Err(e) if is_out_of_fds(&e) && spare.release() => {
                // Accept the waiting connection with the spare descriptor and refuse it.
                let r = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => break,
                    r = listener.accept() => r,
                };
                if let Ok((stream, peer)) = r {
                    over_limit(&proxy, peer, "the process is out of file descriptors");
                    reset(stream);
                }
                spare = Spare::open();
                continue;
            }
            Err(e) => {
                tracing::warn!(proxy = %proxy.name(), error = %e, ?backoff, "accept failed; backing off");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            over_limit(&proxy, peer, "max_connections are open");
            reset(stream);
            continue;
        };
        let id = proxy.next_conn_id();
        // Take the kill signal before looking at the state (see state.rs).
        let kill = proxy.kill_signal();
        let refuse = !proxy.is_enabled()
            || proxy
                .outage()
                .is_some_and(|(_, mode)| mode == OutageMode::Refuse);
        if refuse {
            tracing::debug!(proxy = %proxy.name(), conn = id, %peer, "refused (disabled or outage)");
            proxy.stats().refused();
            reset(stream);
            continue;
        }
        if proxy.over_budget() {
            proxy.warn_over_budget();
            proxy.stats().refused();
            reset(stream);
            continue;
        }
        let span = tracing::info_span!("conn", proxy = %proxy.name(), id, %peer);
        let proxy = proxy.clone();
        tracker.spawn(
            async move {
                serve(proxy, stream, id, kill).await;
                drop(permit);
            }
            .instrument(span),
        );
    }
    drop(listener);
    proxy.set_listen_addr(None);
    tracker.close();
    let drain = proxy.config().drain_timeout;
    if tokio::time::timeout(drain, tracker.wait()).await.is_err() {
        tracing::info!(proxy = %proxy.name(), open = tracker.len(), "drain timeout; resetting the rest");
        // The end of a run (shutdown, a replay phase): the audit judges what is still open
        // before the proxy closes it (`llm-hung`), and knows the closes that follow are the
        // proxy's. Not for a proxy stopped through the API (disabled first): its sink may be
        // shared with proxies that go on, whose streams are neither ended nor closed.
        if proxy.is_enabled()
            && let Some(sink) = proxy.sink()
        {
            sink.closing();
        }
        proxy.kill_all(CutAction::Reset);
        tracker.wait().await;
    }
    tracing::info!(proxy = %proxy.name(), "stopped");
    Ok(())
}
