//! How a client reaches a server: direct, or through an in-process `tearline proxy` on
//! 127.0.0.1:0 relaying bytes (`--observe bytes`: no observer) or observing (`--observe http`,
//! every observation recorded for the test to read), or terminating TLS and originating it
//! again (`--tls-cert`/`--tls-key` with the servers' own certificate, `--upstream-tls` trusting
//! their CA), observing: ALPN is then negotiated on each side by the proxy. An observing
//! proxy's observations also feed a live [`Auditor`] (`Hop::auditor`), as `tearline proxy
//! --audit` would, so a test can check the findings a real peer's traffic gives.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor};
use tearline::proxy::{self, CancellationToken, FaultList, Proxy, ProxyConfig};
use tearline::tls::{ProxyTls, Terminator, Upstream, UpstreamOptions};
use tearline::wire::{Observation, ObservationSink};

use super::certs::Certs;

/// The ways a client reaches its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Direct,
    /// Through the proxy with `--observe bytes`.
    Bytes,
    /// Through the proxy observing HTTP and SSE.
    Observed,
    /// Through the proxy terminating TLS on both sides, observing.
    Terminated,
}

/// The routes of a cleartext (h2c) pair.
pub const ALL: [Route; 3] = [Route::Direct, Route::Bytes, Route::Observed];
/// The routes of a TLS (ALPN h2) pair.
pub const TLS_ALL: [Route; 4] = [
    Route::Direct,
    Route::Bytes,
    Route::Observed,
    Route::Terminated,
];

/// Records every observation.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

/// Hands every observation to the recorder and to the auditor.
struct Tee {
    rec: Arc<Recorder>,
    auditor: Arc<Auditor>,
}

impl ObservationSink for Tee {
    fn record(&self, obs: Observation) {
        self.auditor.record(obs.clone());
        self.rec.record(obs);
    }

    fn record_all(&self, batch: &mut dyn Iterator<Item = Observation>) {
        let batch: Vec<Observation> = batch.collect();
        self.auditor.record_all(&mut batch.iter().cloned());
        for obs in batch {
            self.rec.record(obs);
        }
    }

    fn closing(&self) {
        self.auditor.closing();
    }
}

/// A way in: the address a client dials, and the proxy behind it (if any).
pub struct Hop {
    pub addr: SocketAddr,
    pub proxy: Option<Arc<Proxy>>,
    pub rec: Arc<Recorder>,
    /// The audit of what an observing proxy saw (empty on the other routes).
    pub auditor: Arc<Auditor>,
    shutdown: CancellationToken,
}

impl Drop for Hop {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Hop {
    /// Puts a new auditor built from `cfg` behind this hop's proxy (which must observe), fed
    /// with the recorder the same observations in the same order; the hop's own
    /// [`Hop::auditor`] hears nothing from then on. Call it before any client connects.
    pub fn audit_with(&self, cfg: AuditConfig) -> Arc<Auditor> {
        let auditor = Arc::new(Auditor::new(cfg));
        let sink: Arc<dyn ObservationSink> = Arc::new(Tee {
            rec: self.rec.clone(),
            auditor: auditor.clone(),
        });
        self.proxy
            .as_ref()
            .expect("an audited hop is a proxy")
            .observe_http(sink);
        auditor
    }

    pub fn observations(&self) -> Vec<Observation> {
        self.rec.0.lock().unwrap().clone()
    }

    /// `scheme://127.0.0.1:port` of this hop.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }
}

/// Opens `route` to `server` (whose TLS certificate, for [`Route::Terminated`], is in
/// `certs`), with `cfg` edited by `edit` when it is a proxy.
pub async fn open(
    route: Route,
    server: SocketAddr,
    certs: Option<&Certs>,
    edit: impl FnOnce(&mut ProxyConfig),
) -> Hop {
    open_with_faults(route, server, certs, edit, Vec::new()).await
}

/// [`open`] with the proxy's fault list `faults`.
pub async fn open_with_faults(
    route: Route,
    server: SocketAddr,
    certs: Option<&Certs>,
    edit: impl FnOnce(&mut ProxyConfig),
    faults: FaultList,
) -> Hop {
    let rec = Arc::new(Recorder::default());
    let auditor = Arc::new(Auditor::new(AuditConfig::default()));
    let shutdown = CancellationToken::new();
    if route == Route::Direct {
        return Hop {
            addr: server,
            proxy: None,
            rec,
            auditor,
            shutdown,
        };
    }
    let mut cfg = ProxyConfig::new("h2", server.to_string());
    cfg.drain_timeout = Duration::from_secs(1);
    if route == Route::Terminated {
        let c = certs.expect("a terminating route needs the server's certificates");
        let upstream = UpstreamOptions {
            ca: vec![c.ca.clone()],
            no_system_roots: true,
            ..UpstreamOptions::default()
        };
        cfg.tls = ProxyTls {
            client: Some(Arc::new(Terminator::from_files(&c.cert, &c.key).unwrap())),
            upstream: Some(Arc::new(Upstream::new(&upstream).unwrap())),
            ..ProxyTls::default()
        };
    }
    edit(&mut cfg);
    let listener = proxy::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::with_faults(cfg, faults);
    if matches!(route, Route::Observed | Route::Terminated) {
        let sink: Arc<dyn ObservationSink> = Arc::new(Tee {
            rec: rec.clone(),
            auditor: auditor.clone(),
        });
        proxy.observe_http(sink);
    }
    tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    Hop {
        addr,
        proxy: Some(proxy),
        rec,
        auditor,
        shutdown,
    }
}
