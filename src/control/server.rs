//! The HTTP/1.1 server of the control API (hyper 1.x).
//!
//! Invariants: every request is answered (no input panics or hangs a handler: bodies are
//! size-limited, a request head is at most [`MAX_HEAD_BYTES`] and must arrive within the read
//! timeout ([`READ_TIMEOUT`] by default), the body within the same time again, else the
//! connection is closed (431 for a head too large, 408 for a slow body)); the order of checks
//! is `Host` allowlist and browser refusal (403), token (401), route (404/405), body
//! (413/400/408), handler; at most [`MAX_CONNECTIONS`] API connections hold a slot at once, and
//! when they are all taken a new connection evicts the one that has waited longest without a
//! complete request ([`super::slots`]), so slow or idle clients, however many, never make a
//! well-behaved request wait; accept errors back off and never end the server; on shutdown
//! the server stops accepting, lets in-flight requests finish for up to [`DRAIN_TIMEOUT`],
//! then returns. Every answer of a handler carries `X-Toxiproxy-Request-Id`, as Toxiproxy's.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::errors::{ApiError, ControlError};
use super::routes::{Route, dispatch, error_response, method_not_allowed};
use super::safety::{check_headers, check_host, read_body};
use super::slots::{Acquired, Slot, Slots};
use super::{ApiInner, ApiState};

/// Time a client has to send a request's headers, and then its body (the default of
/// [`super::ApiConfig::read_timeout`]).
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// API connections served at once (more evict the one waiting longest for its request).
pub const MAX_CONNECTIONS: usize = 64;
/// Largest request head (request line and headers) accepted; a larger one is answered 431.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Least time between two warnings about evicted connections.
const EVICT_WARN_EVERY: Duration = Duration::from_secs(10);
/// How long shutdown waits for in-flight requests.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the control API on `listener` until `shutdown` is cancelled.
pub async fn serve_api(
    listener: TcpListener,
    state: ApiState,
    shutdown: CancellationToken,
) -> Result<(), ControlError> {
    let addr = listener.local_addr().map_err(ControlError::Listener)?;
    tracing::info!(%addr, "control API listening");
    let tracker = TaskTracker::new();
    let slots = Slots::new(MAX_CONNECTIONS);
    let mut backoff = Duration::from_millis(5);
    let mut warned: Option<tokio::time::Instant> = None;
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "control API accept failed; backing off");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
            },
        };
        backoff = Duration::from_millis(5);
        let slot = tokio::select! {
            () = shutdown.cancelled() => break,
            (slot, how) = slots.acquire() => {
                if how == Acquired::Evicted {
                    let total = state.inner.counters.note_evicted();
                    if warned.is_none_or(|t| t.elapsed() >= EVICT_WARN_EVERY) {
                        warned = Some(tokio::time::Instant::now());
                        tracing::warn!(
                            %peer,
                            evicted_total = total,
                            "control API: all {MAX_CONNECTIONS} connection slots taken; closed \
                             the connection that waited longest without a complete request \
                             (slow, idle or hostile clients)"
                        );
                    }
                }
                Arc::new(slot)
            }
        };
        let inner = Arc::clone(&state.inner);
        let shutdown = shutdown.clone();
        let local = stream.local_addr().unwrap_or(addr);
        tracker.spawn(serve_connection(inner, slot, stream, peer, local, shutdown));
    }
    tracker.close();
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, tracker.wait()).await;
    Ok(())
}

/// Serves one API connection until it ends, is evicted from its slot, or shutdown.
async fn serve_connection(
    inner: Arc<ApiInner>,
    slot: Arc<Slot>,
    stream: tokio::net::TcpStream,
    peer: std::net::SocketAddr,
    local: std::net::SocketAddr,
    shutdown: CancellationToken,
) {
    let read_timeout = inner.read_timeout;
    let evicted = slot.evicted().clone();
    let svc = service_fn(move |req| {
        let inner = Arc::clone(&inner);
        let slot = Arc::clone(&slot);
        async move { Ok::<_, Infallible>(handle(&inner, &slot, local, req).await) }
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .serve_connection(TokioIo::new(stream), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        biased;
        () = evicted.cancelled() => {
            tracing::debug!(%peer, "control API connection evicted: it waited longest for a request");
        }
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "control API connection ended");
            }
        }
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(DRAIN_TIMEOUT, conn).await;
        }
    }
}

/// Answers one request; records it in the API counters. The connection counts as waiting
/// again (evictable) from the moment the answer is ready.
async fn handle(
    api: &ApiInner,
    slot: &Slot,
    local: std::net::SocketAddr,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (label, result) = answer(api, slot, local, req).await;
    slot.waiting();
    let response = match result {
        Ok(r) => r,
        Err(e) => {
            let mut r = error_response(&e);
            if e.status == StatusCode::UNAUTHORIZED {
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            if matches!(
                e.status,
                StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
            ) {
                r.headers_mut().insert(
                    header::CONNECTION,
                    header::HeaderValue::from_static("close"),
                );
            }
            r
        }
    };
    api.counters.record(label, response.status().as_u16());
    let mut response = response;
    if let Ok(id) = header::HeaderValue::from_str(&api.request_ids.next()) {
        response.headers_mut().insert(super::request_id::HEADER, id);
    }
    response
}

async fn answer(
    api: &ApiInner,
    slot: &Slot,
    local: std::net::SocketAddr,
    req: Request<Incoming>,
) -> (&'static str, Result<Response<Full<Bytes>>, ApiError>) {
    if let Err(e) = check_host(req.headers(), local, &api.allowed_hosts) {
        tracing::warn!(host = ?req.headers().get(http::header::HOST), "control API: Host refused");
        return ("Refused", Err(e));
    }
    if let Err(e) = check_headers(req.headers(), api.token.as_deref()) {
        return ("Refused", Err(e));
    }
    let Some(route) = Route::parse(req.uri().path()) else {
        return (
            "NotFound",
            Err(ApiError::new(StatusCode::NOT_FOUND, "404 page not found")),
        );
    };
    let method = req.method().clone();
    let Some(label) = route.handler(&method) else {
        return ("MethodNotAllowed", Ok(method_not_allowed(&route, &method)));
    };
    let (parts, body) = req.into_parts();
    let read = read_body(&parts.headers, body, api.max_body);
    let body = match tokio::time::timeout(api.read_timeout, read).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => return (label, Err(e)),
        Err(_) => {
            let why = format!(
                "request body not received within {:?}; send the whole body at once",
                api.read_timeout
            );
            return (label, Err(ApiError::new(StatusCode::REQUEST_TIMEOUT, why)));
        }
    };
    if !slot.busy() {
        let why = "connection closed to make room for another: all control API connection slots were taken";
        return (
            label,
            Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, why)),
        );
    }
    (label, dispatch(api, route, &method, body).await)
}
