//! Fuzz target `control`: control-API requests (method, path, JSON body) against the real
//! store and fault catalogue, with a hub that runs nothing.
//!
//! Input: 4 control bytes, then up to 8 requests separated by [`super::http1::SEPARATOR`], each
//! `METHOD /path` on its first line and the body after it. Every `listen` field is rewritten to
//! `127.0.0.1:0` so the target never binds chosen ports. A proxy `p` with no toxics exists
//! first. Invariants checked: no 5xx; every error carries `{"error": <text>, "status": <code>}`
//! with its own status; a refused request (other than `/populate`, which is partial by design)
//! leaves the proxies and toxics exactly as they were; every 2xx body is JSON or empty.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::control::catalog::RegistryCatalog;
use crate::control::{ApiConfig, ApiState, HubError, ProxyHub, ProxyStats, Stopped};
use crate::fault::FaultFactory;

use super::Input;
use super::http1::SEPARATOR;

/// A hub that accepts every command and relays nothing.
struct NullHub;

impl ProxyHub for NullHub {
    fn start(
        &self,
        _name: &str,
        _listener: tokio::net::TcpListener,
        _upstream: &str,
        _faults: Vec<Arc<dyn FaultFactory>>,
    ) -> Result<(), HubError> {
        Ok(())
    }
    fn stop(&self, _name: &str) -> Stopped {
        Box::pin(std::future::ready(()))
    }
    fn set_upstream(&self, _name: &str, _upstream: &str) -> Result<(), HubError> {
        Ok(())
    }
    fn set_faults(&self, _name: &str, _faults: Vec<Arc<dyn FaultFactory>>) -> Result<(), HubError> {
        Ok(())
    }
    fn set_outages(
        &self,
        _name: &str,
        _outages: Vec<(String, crate::fault::outage::OutageSchedule)>,
    ) -> Result<(), HubError> {
        Ok(())
    }
    fn remove(&self, _name: &str) {}
    fn stats(&self) -> Vec<ProxyStats> {
        Vec::new()
    }
}

/// Rewrites every `listen` in a body (object or array of objects) to an ephemeral loopback port.
fn tame(body: &[u8]) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else {
        return Bytes::copy_from_slice(body);
    };
    let fix = |o: &mut Value| {
        if let Some(l) = o.get_mut("listen") {
            *l = Value::from("127.0.0.1:0");
        }
    };
    match &mut v {
        Value::Array(items) => items.iter_mut().for_each(fix),
        other => fix(other),
    }
    Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
}

async fn call(api: &ApiState, method: &Method, path: &str, body: Bytes) -> (StatusCode, Bytes) {
    let r = api.answer_direct(method, path, body).await;
    let status = r.status();
    let body = match r.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(never) => match never {},
    };
    (status, body)
}

/// The state a refused request must leave: every proxy with its toxics, listen addresses aside
/// (a stopped proxy shows its configured address, a running one its bound port).
async fn snapshot(api: &ApiState) -> Value {
    let (_, body) = call(api, &Method::GET, "/proxies", Bytes::new()).await;
    serde_json::from_slice(&body).unwrap_or(Value::Null)
}

/// The target.
pub fn fuzz(data: &[u8]) {
    let input = Input::new(data);
    super::block_on(async {
        let api = ApiState::new(ApiConfig::new(Arc::new(NullHub), Arc::new(RegistryCatalog)));
        let create = br#"{"name":"p","listen":"127.0.0.1:0","upstream":"127.0.0.1:9"}"#;
        let (status, _) = call(&api, &Method::POST, "/proxies", Bytes::from_static(create)).await;
        assert_eq!(status, StatusCode::CREATED, "creating the first proxy");
        for req in split_all(input.payload).into_iter().take(8) {
            let (line, body) = match memchr::memchr(b'\n', req) {
                Some(i) => (&req[..i], &req[i + 1..]),
                None => (req, &req[req.len()..]),
            };
            let line = String::from_utf8_lossy(line);
            let (method, path) = line.split_once(' ').unwrap_or(("POST", &line));
            let Ok(method) = Method::from_bytes(method.as_bytes()) else {
                continue;
            };
            let path = path.trim();
            let before = snapshot(&api).await;
            let (status, out) = call(&api, &method, path, tame(body)).await;
            assert!(
                !status.is_server_error(),
                "{method} {path} answered {status}: {}",
                String::from_utf8_lossy(&out)
            );
            if status.is_client_error() {
                let v: Value = serde_json::from_slice(&out).unwrap_or_else(|e| {
                    panic!(
                        "error body is not JSON ({e}): {}",
                        String::from_utf8_lossy(&out)
                    )
                });
                assert!(
                    v["error"].as_str().is_some_and(|s| !s.is_empty()),
                    "error without text: {v}"
                );
                assert_eq!(v["status"], status.as_u16(), "error status mismatch: {v}");
                if !path.trim_end_matches('/').ends_with("/populate") && path != "/populate" {
                    assert_eq!(
                        snapshot(&api).await,
                        before,
                        "refused {method} {path} changed the state"
                    );
                }
            } else if !out.is_empty() && path != "/metrics" {
                assert!(
                    serde_json::from_slice::<Value>(&out).is_ok(),
                    "{method} {path} answered non-JSON: {}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
    });
}

/// The requests of a payload, in order.
pub(crate) fn split_all(p: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = p;
    while let Some(i) = memchr::memmem::find(rest, SEPARATOR) {
        out.push(&rest[..i]);
        rest = &rest[i + SEPARATOR.len()..];
    }
    out.push(rest);
    out
}
