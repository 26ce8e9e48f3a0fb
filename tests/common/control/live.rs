//! An API server over the real relay and fault registry.

use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, StatusCode};
use serde_json::json;
use tearline::control::catalog::RegistryCatalog;
use tearline::control::runtime::RuntimeHub;
use tearline::control::{ApiConfig, ApiState, serve_api};
use tearline::proxy::ProxyConfig;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::call;

/// A running API over a [`RuntimeHub`]; cancel `shutdown` to stop everything.
pub struct Live {
    pub addr: SocketAddr,
    pub shutdown: CancellationToken,
}

/// Starts the API over the real runtime.
pub async fn start_live() -> Live {
    let shutdown = CancellationToken::new();
    let hub = Arc::new(RuntimeHub::new(
        ProxyConfig::new("template", "127.0.0.1:1"),
        shutdown.clone(),
    ));
    let state = ApiState::new(ApiConfig::new(hub, Arc::new(RegistryCatalog)));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind api");
    let addr = listener.local_addr().expect("api addr");
    let token = shutdown.clone();
    tokio::spawn(async move {
        let _ = serve_api(listener, state, token).await;
    });
    Live { addr, shutdown }
}

/// Creates an enabled proxy to `upstream` on 127.0.0.1:0; returns its bound address.
pub async fn create(api: SocketAddr, name: &str, upstream: SocketAddr) -> String {
    let body = json!({"name": name, "listen": "127.0.0.1:0", "upstream": upstream.to_string()});
    let r = call(api, Method::POST, "/proxies", Some(body)).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    r.json()["listen"].as_str().unwrap_or_default().to_owned()
}
