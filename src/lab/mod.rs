//! The lab server: a reference MCP Streamable HTTP server, correct by default, that can
//! misbehave on purpose in exactly the ways the two seed documents describe, so `tearline
//! replay` and the tests have a server whose every byte they control.
//!
//! # Eras
//! Dual-era by default: a POST carrying 2026-07-28 `_meta`/`MCP-Protocol-Version` (or
//! `server/discover`) is served by [`stateless`] (no session, no ids, header validation,
//! cache hints, `subscriptions/listen`, `input_required`); everything below describes the
//! legacy (2025) era. [`LabConfig::narrow`] (`serve --protocol X`) serves only X; a
//! modern-only lab answers `initialize` with 400 / -32022.
//!
//! Where the SDKs and the published spec differ, the lab follows the spec: the TS 2.x client
//! rejects a 2026-07-28 result without `resultType` (the spec makes it required, so the lab
//! always sends it); Python `mcp` 2.x sends `server/discover` first in its default `auto` mode
//! while TS `@modelcontextprotocol/client` 2.x stays legacy unless `versionNegotiation` asks.
//!
//! # Layers
//! The lab's files import in one direction, bottom to top, as `LAB_LAYERS` below lists them; the
//! test in `layers.rs` fails on an import of a higher layer, or on a circle within a layer,
//! naming the file and the path. Why: the lab grew as one circle of 14 files (the config
//! imported the bugs, the bugs the sessions, the sessions the config; routing, POST and the
//! stateless era imported one another), so no part could be read or changed alone and h2 had
//! no place to enter. A protocol layer now sits below the MCP and LLM behaviour, as in `src/`:
//! 1. Values: `config` (every knob, `ServerBug` and `IdStyle` included), `llm::knobs`,
//!    `auth` (the token audience) and `truth` (the record the outside reads back). They import
//!    nothing above.
//! 2. Protocol: `conn` (HTTP/1.1, h2c and h2 on one port), `http` (JSON-RPC errors, JSON and
//!    SSE responses, the request checks), `sse_body` (SSE framing, the response body).
//! 3. State: `hold`, `ring`, `ids` (event names), `session` (sessions and their lookup by
//!    header), `bugs` (what a scripted bug does to a batch, the shared store), `plain_feed`.
//! 4. Server state: `shared`, what every connection shares (state types from below only).
//! 5. MCP building blocks: `tools` (and their producers), `legs` (truth and bug of a leg),
//!    `delivery` (ring to body), `calls` (planning and streaming a call, for both eras).
//! 6. Handlers, one per endpoint and era: `post`, `stateless`, `resume` (GET, DELETE), `plain`,
//!    `plain_priming`, `llm`.
//! 7. Dispatch: `router` (which handler answers), `socketless`, and this file (the server).
//!
//! No lower module calls a higher one: what a lower layer used to reach up for moved down (the
//! ids, the plain feed, the server state) or is passed in (the checks of `http` take the
//! config, not the server).
//!
//! # Endpoint (default `/mcp`; HTTP/1.1, h2c and h2 on one port, see [`conn`])
//! - `POST initialize` → 200 JSON with `Mcp-Session-Id` (32 hex digits). The revision is the
//!   client's `protocolVersion` if it is 2025-03-26, 2025-06-18 or 2025-11-25, else
//!   [`LabConfig::protocol`] (always it when [`LabConfig::narrow`]).
//! - `POST` of notifications/responses only → 202, no body. `ping`, `tools/list` and unknown
//!   methods → 200 JSON (unknown method: JSON-RPC error -32601). Any `tools/call` → 200 SSE
//!   stream carrying, in order: the priming event (2025-11-25), then every request's events.
//! - `GET` with `Last-Event-ID: <stream>-<seq>` → resume of that stream (see below). `GET`
//!   without it → 405 (the lab has no standalone stream). `DELETE` → 200 and the session ends.
//!   Sessions live until DELETE, server shutdown, or [`LabConfig::session_idle`] (default
//!   10 min) without a request naming them or a connected reader; at most
//!   [`LabConfig::max_sessions`] exist at once. Headers must arrive within
//!   [`LabConfig::read_timeout`], and a POST body within it again (else 408).
//! - Errors, always with a JSON-RPC error body: 400 missing `Mcp-Session-Id`, invalid JSON
//!   (-32700), not a JSON-RPC message (-32600), unsupported `MCP-Protocol-Version`, or a
//!   `Last-Event-ID` naming no event of the session; 401 missing/invalid lab token (auth on);
//!   403 non-loopback `Origin`, or a call outside the token's audience; 404 unknown session or
//!   path; 405 other methods (and GET/DELETE in 2026-07-28 mode); 406 POST without both
//!   `application/json` and `text/event-stream` in `Accept` (GET: without
//!   `text/event-stream`; `type/*` and `*/*` count); 410 evicted cursor (below); 413 body
//!   over [`LabConfig::max_body_bytes`]; 415 non-JSON `Content-Type`; 503 session limit.
//!
//! # Events
//! Ids are `<stream>-<seq>` (or opaque, below): the stream number is unique within the session, `seq` counts
//! from 0 (the priming event, `id`, `retry: <ms>`, empty `data:`). Message events are
//! `event: message`, `id:`, then `data:` lines (see [`sse_body`]). Every event goes into the
//! session's ring ([`LabConfig::buffer`] events shared by all its streams). A producer stays
//! less than half a ring ahead of its stream's connected reader, and keeps pushing at full
//! speed while no client is connected, which is what makes the ring evict.
//!
//! # Resume
//! A resume is honoured iff the event named by `Last-Event-ID` is still in the ring: the
//! response replays the events after it, byte for byte, then follows the live stream until its
//! last event. Otherwise [`OnEvicted`] decides: `error` answers **HTTP 410** with JSON-RPC
//! error -32010 whose `data` is `{"last_event_id": "<id>", "lost": {"from": "<id>", "to":
//! "<id>"} | null}` (`null`: only the cursor event itself is gone); `fresh` answers 200 with a
//! new priming event (2025-11-25 sessions; older ones get none) whose id continues after the
//! newest one, a `notifications/message` greeting (`FRESH_STREAM_GREETING`), then whatever the
//! call still produces (seed 004's continuation-instead-of-replay); `replay-from-oldest`
//! answers 200 from the oldest retained event of that stream (a silent gap). A live reader that falls behind
//! the ring gets `event: error` with data `{"error": "events-evicted", "lost_from",
//! "lost_to"}` under `error`; the other modes skip the lost range silently.
//!
//! # Scripted server bugs and id styles (off by default; see [`bugs`])
//! [`LabConfig::bug`] makes every resume misbehave in one documented way: `reorder` (the first
//! two replayed progress events swapped), `drop-after-replay` (the first replayed event, then
//! two progress events skipped, then the rest), `duplicate` (the first replayed progress event
//! sent twice), `shared-store` (one store for all sessions keyed by request id: a resume is
//! served from the first stream ever opened for that request id, whichever session owns it),
//! `lose-final` (the call's response dropped and the body ended cleanly). POST streams are
//! never touched. [`LabConfig::ids`] = `opaque` names events with random UUID-like ids instead
//! of `<stream>-<seq>` (the resume rules are the same).
//!
//! # LLM endpoints (see [`llm`])
//! `POST /v1/chat/completions`, `/v1/responses` and `/v1/messages` answer deterministic
//! OpenAI- and Anthropic-shaped token streams (text or a tool call), paced by [`llm::Knobs`].
//!
//! # Plain SSE (off by default; see [`plain`])
//! With [`LabConfig::plain_path`], `GET <plain_path>` serves a fixed feed of
//! [`plain::PLAIN_EVENTS`] events without MCP or sessions, resumable by `Last-Event-ID`;
//! with [`LabConfig::plain_priming`] each resume starts with a priming event repeating the
//! cursor ([`plain_priming`]).
//!
//! # Ground truth (off by default; see [`truth`])
//! With [`LabConfig::truth`], every leg records the events handed to its body and every bug it
//! injected, for measuring the audit (`tearline::accuracy`).
//!
//! # Auth (lab-only, off by default)
//! See [`auth`]: `Authorization: Bearer aud=<uri>,…`, no cryptography. Tool resource
//! indicators: `https://lab/tools/{blob,progress,search,fetch}`; `https://lab` covers all.
//! On a resume, an event outside the token's audience gets, per [`OnUnauthorized`]:
//! `error`: `event: error` with data `{"error": "unauthorized-event", "event_id", "resource",
//! "last_delivered"}` and no id (cursor not advanced), then the body ends; `silent-end`:
//! `event: end` with data `{}`, then the body ends (seed 000).
//!
//! # Tools
//! - `blob {"size": 4194304, "lines": 3}`: 3 `notifications/progress`, then ONE message event
//!   whose data, the `lines` data lines joined with LF, is exactly
//!   `{"jsonrpc":"2.0","id":<id>,"result":{"content":[<item>,LF<item>,…],"structuredContent":
//!   {"size":<size>,"lines":<lines>},"isError":false}}` where item `k` is
//!   `{"type":"text","text":"<t_k>"}`, `t_k` holds text bytes `size*k/lines .. size*(k+1)/lines`
//!   and text byte `i` is `b'a' + i % 26`. Data line `k+1` starts with item `k`.
//!   Optional `"hold_ms": T, "gate": N` (see [`hold`]): the result's delivery pauses in the
//!   middle of its last data line's value for T ms, counted from when N streams of the server
//!   are paused there at once (no gate when N is 0); the bytes are the same.
//! - `progress {"n": 10, "interval": 0}`: `n` progress notifications, `interval` ms apart,
//!   then result text `progress done: <n>`.
//! - `search {"query", "n": 0}`, `fetch {"url", "n": 0}`: `n` progress notifications, then a
//!   one-item text result.
//! - `append {"amount": 1, "pad": 0}`: NOT idempotent (annotations say so; every other tool is
//!   `readOnlyHint`/`idempotentHint: true`). Adds `amount` to [`LabConfig::side_effects`]
//!   before sending anything, then one progress notification and the result
//!   `appended: <value>` (plus `pad` filler bytes). The counter is the ground truth of how
//!   often the side effect ran.
//! - `confirm {"message"}` (2026-07-28 only): the `input_required` round trip, see [`stateless`].
//! - With [`LabConfig::max_event_bytes`], a `blob` without `size` shrinks to fit one event.
//!
//! Progress notifications carry `params._meta.progressToken`, or the request id when absent.

pub mod auth;
pub mod bugs;
mod calls;
pub mod config;
pub mod conn;
mod delivery;
pub mod hold;
mod http;
pub mod ids;
#[cfg(test)]
mod layers;
mod legs;
pub mod llm;
pub mod plain;
pub mod plain_feed;
pub mod plain_priming;
mod post;
mod resume;
pub mod ring;
mod router;
pub mod session;
mod shared;
#[doc(hidden)]
#[cfg(feature = "harness")]
pub mod socketless;
pub mod sse_body;
pub mod stateless;
pub mod tools;
pub mod truth;

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use shared::{LlmState, Shared};

pub use config::{
    Chunking, LabConfig, LineEnding, OnEvicted, OnUnauthorized, ProtocolVersion, SideEffects,
};
pub use http::{EVICTED_ERROR, SESSION_HEADER, TRANSPORT_ERROR, VERSION_HEADER};
pub use resume::FRESH_STREAM_GREETING;

/// The lab's layers, bottom to top (see the module doc): a module imports only modules of the
/// layers before its own, or of its own layer without closing a circle. `llm::knobs` is apart
/// from `llm` because the config holds it; `mod` is this file.
#[cfg(test)]
const LAB_LAYERS: &[&[&str]] = &[
    &["config", "llm::knobs", "auth", "truth"],
    &["conn", "http", "sse_body"],
    &["hold", "ring", "ids", "session", "bugs", "plain_feed"],
    &["shared"],
    &["tools", "legs", "delivery", "calls"],
    &[
        "post",
        "stateless",
        "resume",
        "plain",
        "plain_priming",
        "llm",
    ],
    &["router", "socketless", "mod"],
];

/// Errors of the lab server.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The configuration cannot describe a working server.
    #[error("invalid lab configuration: {0}")]
    Config(&'static str),
}

/// Serves the lab on `listener` until `shutdown` is cancelled; then stops accepting, ends
/// every stream and returns once all connection and producer tasks are gone.
pub async fn serve(
    listener: TcpListener,
    config: LabConfig,
    shutdown: CancellationToken,
) -> Result<(), LabError> {
    serve_tls(listener, config, None, shutdown).await
}

/// [`serve`], over TLS when `tls` is given (each connection's handshake runs in its own task;
/// a failed handshake only ends that connection).
pub async fn serve_tls(
    listener: TcpListener,
    config: LabConfig,
    tls: Option<Arc<crate::tls::Terminator>>,
    shutdown: CancellationToken,
) -> Result<(), LabError> {
    if config.buffer == 0 {
        return Err(LabError::Config("buffer must hold at least one event"));
    }
    if !config.path.starts_with('/') {
        return Err(LabError::Config("path must start with '/'"));
    }
    let limit = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let shared = Arc::new(Shared {
        enc: sse_body::SseEncoder::new(config.line_ending),
        sessions: session::Sessions::new(config.max_sessions, config.buffer, config.buffer_bytes)
            .with_id_style(config.ids),
        bugs: bugs::BugState::default(),
        plain: plain_feed::Feed::new(config.ids, config.line_ending),
        cfg: config,
        shutdown: shutdown.child_token(),
        tasks: TaskTracker::new(),
        gate: hold::Gate::default(),
        llm: LlmState::default(),
    });
    if let Some(idle) = shared.cfg.session_idle {
        shared
            .tasks
            .spawn(expire_sessions(Arc::clone(&shared), idle));
    }
    let tls = tls.as_deref().map(|t| Arc::new(conn::acceptor(t)));
    let mut backoff = Duration::from_millis(5);
    loop {
        let permit = tokio::select! {
            p = Arc::clone(&limit).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shared.shutdown.cancelled() => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shared.shutdown.cancelled() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => {
                backoff = Duration::from_millis(5);
                a
            }
            Err(e) => {
                tracing::debug!(error = %e, "lab accept failed; backing off");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn_shared = Arc::clone(&shared);
        let tls = tls.clone();
        shared.tasks.spawn(async move {
            let _permit = permit;
            let stream = match conn::handshake(stream, tls.as_deref()).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "lab TLS handshake failed");
                    return;
                }
            };
            let svc_shared = Arc::clone(&conn_shared);
            let svc = service_fn(move |req| router::handle(Arc::clone(&svc_shared), req));
            let conn = conn::serve(stream, svc, conn_shared.cfg.read_timeout);
            tokio::select! {
                r = conn => if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "lab connection ended with an error");
                },
                _ = conn_shared.shutdown.cancelled() => {}
            }
        });
    }
    shared.shutdown.cancel();
    shared.tasks.close();
    shared.tasks.wait().await;
    Ok(())
}

/// Ends sessions idle for longer than `idle`, checking four times per `idle`.
async fn expire_sessions(shared: Arc<Shared>, idle: Duration) {
    let mut tick = tokio::time::interval((idle / 4).max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shared.shutdown.cancelled() => return,
        }
        let gone = shared.sessions.expire(idle);
        if !gone.is_empty() {
            tracing::info!(
                count = gone.len(),
                ?idle,
                "lab sessions expired after idling"
            );
        }
    }
}
