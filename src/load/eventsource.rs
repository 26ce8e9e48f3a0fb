//! An EventSource-like client: what a browser's `EventSource` does, without MCP. A plain GET of
//! a URL answered by `text/event-stream`; after a disconnect (or a clean end before the feed is
//! complete) it waits the server's `retry:` (or its backoff) and GETs the same URL again with
//! `Last-Event-ID` = the last event id string (WHATWG: committed at dispatch, sticky across
//! connections). No session header, no JSON-RPC.
//!
//! Invariants:
//! - A non-200 status or a non-SSE `Content-Type` on the stream URL fails the client for good.
//! - One connection pool: a connection whose body ended cleanly is reused for the next request,
//!   and the optional side request (e.g. `/favicon.ico`, answered 404) is sent on that pool
//!   after the first interruption, as a browser tab would.
//! - The feed is complete when an event whose data holds `"last":true` is dispatched (the lab's
//!   plain feed marks its final event so); then the client stops.
//! - With truth recording on, every request is one [`ClientLeg`].

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::config::Target;
use super::http::{Conn, HttpError, Next, Request, Response};
use super::truth::{ClientLeg, ClientTruth, Dispatched};
use crate::wire::sse::SseScanner;

/// One EventSource-like client.
#[derive(Debug, Clone)]
pub struct EventSourceConfig {
    /// The stream URL.
    pub url: Target,
    /// A side request sent on the same pool after the first interruption (e.g. `/favicon.ico`).
    pub side_path: Option<String>,
    /// Stream requests at most (the first GET and every reconnect).
    pub max_connections: u32,
    /// Budget of the whole run.
    pub timeout: Duration,
    /// Reconnect delay when the server sent no `retry:`.
    pub backoff: Duration,
    /// Records every leg, when set.
    pub truth: Option<Arc<ClientTruth>>,
}

/// How the client ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventSourceOutcome {
    /// Events dispatched over all connections.
    pub events: u64,
    /// Stream requests sent.
    pub connections: u32,
    /// Whether the final event of the feed arrived.
    pub complete: bool,
    /// The status that failed the client for good, if one did.
    pub failed_status: Option<u16>,
}

fn record(cfg: &EventSourceConfig, leg: ClientLeg) {
    if let Some(t) = &cfg.truth {
        t.push(leg);
    }
}

async fn send(
    pool: &mut Option<Conn>,
    target: &Target,
    req: &Request<'_>,
    deadline: Instant,
) -> Result<Response, HttpError> {
    if let Some(conn) = pool.take() {
        match conn.send(target, req, deadline).await {
            Err(HttpError::ClosedBeforeHead | HttpError::Io(_)) => {}
            other => return other,
        }
    }
    let budget = deadline.saturating_duration_since(Instant::now());
    Conn::connect(target, budget)
        .await?
        .send(target, req, deadline)
        .await
}

/// Runs the client until the feed is complete, it fails for good, or its budget ends.
pub async fn run(cfg: &EventSourceConfig) -> EventSourceOutcome {
    let deadline = Instant::now() + cfg.timeout;
    let mut pool: Option<Conn> = None;
    let mut cursor = String::new();
    let mut retry: Option<u64> = None;
    let mut out = EventSourceOutcome {
        events: 0,
        connections: 0,
        complete: false,
        failed_status: None,
    };
    let mut side = cfg.side_path.clone();
    while out.connections < cfg.max_connections && Instant::now() < deadline {
        out.connections += 1;
        let mut headers = vec![
            ("Accept", "text/event-stream"),
            ("Cache-Control", "no-cache"),
        ];
        if !cursor.is_empty() {
            headers.push(("Last-Event-ID", cursor.as_str()));
        }
        let sent = (!cursor.is_empty()).then(|| cursor.clone());
        let (req, mut leg) = get(&headers, &cfg.url.path, sent);
        let mut resp = match send(&mut pool, &cfg.url, &req, deadline).await {
            Ok(r) => r,
            Err(e) => {
                leg.stop = e.kind().to_owned();
                record(cfg, leg);
                tokio::time::sleep(cfg.backoff).await;
                continue;
            }
        };
        leg.status = Some(resp.status);
        if resp.status != 200 || !resp.is_event_stream() {
            leg.stop = "refused".to_owned();
            record(cfg, leg);
            out.failed_status = Some(resp.status);
            return out;
        }
        let mut scanner = SseScanner::new();
        let mut dispatched = Vec::new();
        let mut complete = false;
        let stop = loop {
            let chunk = match resp.body.next(deadline).await {
                Ok(Next::Data(d)) => d,
                Ok(Next::End) => break "clean-end",
                Err(e) => break e.kind(),
            };
            scanner.feed(chunk, &mut |ev| {
                dispatched.push(Dispatched::of(ev));
                if memchr::memmem::find(ev.data, b"\"last\":true").is_some() {
                    complete = true;
                }
            });
            if complete {
                break "complete";
            }
        };
        out.events += dispatched.len() as u64;
        leg.dispatched = dispatched;
        leg.committed = scanner.last_event_id().to_owned();
        leg.partial = scanner.has_partial_event();
        leg.stop = stop.to_owned();
        record(cfg, leg);
        if !scanner.last_event_id().is_empty() {
            cursor = scanner.last_event_id().to_owned();
        }
        retry = scanner.retry().or(retry);
        if stop == "clean-end" {
            pool = resp.body.into_conn();
        }
        if complete {
            out.complete = true;
            return out;
        }
        if let Some(path) = side.take() {
            side_request(cfg, &mut pool, &path, deadline).await;
        }
        let delay = retry.map_or(cfg.backoff, Duration::from_millis);
        tokio::time::sleep_until((Instant::now() + delay).min(deadline)).await;
    }
    out
}

/// A GET of `path` with `headers`, and the record of its leg (`cursor`: the `Last-Event-ID`
/// it sends).
fn get<'a>(
    headers: &'a [(&'a str, &'a str)],
    path: &str,
    cursor: Option<String>,
) -> (Request<'a>, ClientLeg) {
    let req = Request {
        method: "GET",
        headers,
        body: b"",
    };
    let leg = ClientLeg {
        method: "GET".to_owned(),
        path: path.to_owned(),
        cursor,
        ..ClientLeg::default()
    };
    (req, leg)
}

/// A browser's side request on the same pool (its body read and the connection kept).
async fn side_request(
    cfg: &EventSourceConfig,
    pool: &mut Option<Conn>,
    path: &str,
    deadline: Instant,
) {
    let target = Target {
        path: path.to_owned(),
        ..cfg.url.clone()
    };
    let headers = [("Accept", "image/avif,image/webp,*/*")];
    let (req, mut leg) = get(&headers, path, None);
    match send(pool, &target, &req, deadline).await {
        Ok(mut resp) => {
            leg.status = Some(resp.status);
            leg.stop = match resp.body.read_all(deadline).await {
                Ok(_) => "side".to_owned(),
                Err(e) => e.kind().to_owned(),
            };
            *pool = resp.body.into_conn();
        }
        Err(e) => leg.stop = e.kind().to_owned(),
    }
    record(cfg, leg);
}
