//! How a client reaches a server: direct, or through an in-process `tearline proxy` on
//! 127.0.0.1:0 relaying bytes (`--observe bytes`: no observer) or observing (`--observe http`,
//! every observation recorded for the test to read).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tearline::proxy::{self, CancellationToken, Proxy, ProxyConfig};
use tearline::wire::{Observation, ObservationSink};

/// The ways a client reaches its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Direct,
    /// Through the proxy with `--observe bytes`.
    Bytes,
    /// Through the proxy observing HTTP and SSE.
    Observed,
}

pub const ALL: [Route; 3] = [Route::Direct, Route::Bytes, Route::Observed];

/// Records every observation.
#[derive(Default)]
pub struct Recorder(pub Mutex<Vec<Observation>>);

impl ObservationSink for Recorder {
    fn record(&self, obs: Observation) {
        self.0.lock().unwrap().push(obs);
    }
}

/// A way in: the address a client dials, and the proxy behind it (if any).
pub struct Hop {
    pub addr: SocketAddr,
    pub proxy: Option<Arc<Proxy>>,
    pub rec: Arc<Recorder>,
    shutdown: CancellationToken,
}

impl Drop for Hop {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Hop {
    pub fn observations(&self) -> Vec<Observation> {
        self.rec.0.lock().unwrap().clone()
    }

    /// `scheme://127.0.0.1:port` of this hop.
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}", self.addr)
    }
}

/// Opens `route` to `server`, with `cfg` edited by `edit` when it is a proxy.
pub async fn open(route: Route, server: SocketAddr, edit: impl FnOnce(&mut ProxyConfig)) -> Hop {
    let rec = Arc::new(Recorder::default());
    let shutdown = CancellationToken::new();
    if route == Route::Direct {
        return Hop {
            addr: server,
            proxy: None,
            rec,
            shutdown,
        };
    }
    let mut cfg = ProxyConfig::new("h2", server.to_string());
    cfg.drain_timeout = Duration::from_secs(1);
    edit(&mut cfg);
    let listener = proxy::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let proxy = Proxy::new(cfg);
    if route == Route::Observed {
        let sink: Arc<dyn ObservationSink> = rec.clone();
        proxy.observe_http(sink);
    }
    tokio::spawn(proxy::run(listener, proxy.clone(), shutdown.clone()));
    Hop {
        addr,
        proxy: Some(proxy),
        rec,
        shutdown,
    }
}
