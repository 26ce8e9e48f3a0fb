//! One MCP session on the wire: `initialize` + `notifications/initialized`, then requests that
//! carry the session id and the negotiated protocol version, over a kept-alive connection.
//!
//! Invariants: every request after `initialize` carries `Mcp-Session-Id` (when the server gave
//! one) and `MCP-Protocol-Version`; a connection is reused if and only if its previous response
//! body ended cleanly (see [`super::http::Body::into_conn`]); a reused connection the server had
//! closed meanwhile is replaced once, transparently, before any response byte was read; a
//! `tools/call` sent with [`Session::send_call`] carries its call's `Idempotency-Key`.

use serde_json::{Value, json};
use thiserror::Error;
use tokio::time::Instant;

use super::config::{LoadConfig, OFFERED_PROTOCOL_VERSION, Target};
use super::http::{Body, Conn, HttpError, Next, Request, Response};
use crate::wire::sse::SseScanner;

/// The re-send marker header (IETF httpapi `Idempotency-Key`): see [`Session::send_call`].
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// `Accept` of every POST: MCP servers may answer JSON or an SSE stream.
pub const ACCEPT_POST: &str = "application/json, text/event-stream";

/// Why a session could not be opened.
#[derive(Debug, Error)]
pub enum SessionError {
    /// The initialize exchange failed at the HTTP level.
    #[error("initialize request failed")]
    Http(#[source] HttpError),
    /// The server answered initialize with a non-2xx status.
    #[error("initialize answered HTTP {status}{}", reason(*status))]
    Status {
        /// The status code.
        status: u16,
    },
    /// The answer did not carry a JSON-RPC result for the initialize request.
    #[error("initialize answer is not a JSON-RPC result ({0})")]
    BadAnswer(&'static str),
    /// `notifications/initialized` was refused.
    #[error("notifications/initialized answered HTTP {status}")]
    Initialized {
        /// The status code.
        status: u16,
    },
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => " (Bad Request)",
        401 => " (Unauthorized)",
        403 => " (Forbidden)",
        404 => " (Not Found: is the path the MCP endpoint?)",
        405 => " (Method Not Allowed)",
        500..=599 => " (server error)",
        _ => "",
    }
}

impl SessionError {
    /// A stable label for counting errors by kind.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionError::Http(e) => e.kind(),
            SessionError::Status { .. } => "initialize-status",
            SessionError::BadAnswer(_) => "initialize-answer",
            SessionError::Initialized { .. } => "initialized-status",
        }
    }
}

/// An initialized session.
#[derive(Debug)]
pub struct Session {
    target: Target,
    connect_timeout: std::time::Duration,
    /// The `Mcp-Session-Id` the server assigned, if any.
    pub id: Option<String>,
    /// The protocol version the server chose.
    pub protocol_version: String,
    idle: Option<Conn>,
    next_request_id: u64,
    /// True for a 2026-07-28 session (no initialize, no session id; see [`super::era`]).
    pub modern: bool,
    /// Whether the called tool is declared idempotent in `tools/list` (read in modern sessions).
    pub repeat_safe: bool,
    token: Option<String>,
    /// Presented instead of `token` on resume GETs while set (seed 000's narrowed refresh;
    /// see [`LoadConfig::resume_token`]).
    pub resume_token: Option<String>,
    /// Requests sent again on a fresh connection because the pooled one failed first (the
    /// first sending may have reached the server: the truth record keeps it as a leg).
    pub silent_resends: u64,
}

impl Session {
    /// Opens a session: `initialize`, then `notifications/initialized`, all before `deadline`.
    pub async fn open(config: &LoadConfig, deadline: Instant) -> Result<Session, SessionError> {
        let mut session = Session {
            target: config.target.clone(),
            connect_timeout: config.connect_timeout,
            id: None,
            protocol_version: OFFERED_PROTOCOL_VERSION.to_string(),
            idle: None,
            next_request_id: 1,
            modern: false,
            repeat_safe: false,
            token: config.token.clone(),
            resume_token: None,
            silent_resends: 0,
        };
        // Era detection (see `era.rs`): a modern session needs no initialize.
        if config.era != super::era::EraChoice::Legacy
            && session.open_modern(config, deadline).await?
        {
            return Ok(session);
        }
        if config.era == super::era::EraChoice::Modern {
            return Err(SessionError::BadAnswer(
                "server/discover did not list 2026-07-28 (try --era auto or legacy)",
            ));
        }
        let init = json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": OFFERED_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "tearline-load", "version": env!("CARGO_PKG_VERSION")},
            }
        });
        let head_deadline = deadline.min(Instant::now() + config.connect_timeout);
        let mut resp = session
            .send(
                "POST",
                init.to_string().as_bytes(),
                None,
                head_deadline,
                false,
            )
            .await
            .map_err(SessionError::Http)?;
        if !(200..300).contains(&resp.status) {
            return Err(SessionError::Status {
                status: resp.status,
            });
        }
        session.id = resp.header("mcp-session-id").map(str::to_string);
        let answer = read_response(&mut resp, 0, deadline).await?;
        session.recycle(resp.body);
        let result = answer
            .get("result")
            .ok_or(SessionError::BadAnswer("no result"))?;
        if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
            session.protocol_version = v.to_string();
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let mut resp = session
            .send("POST", note.to_string().as_bytes(), None, deadline, true)
            .await
            .map_err(SessionError::Http)?;
        if !(200..300).contains(&resp.status) {
            return Err(SessionError::Initialized {
                status: resp.status,
            });
        }
        resp.body
            .read_all(deadline)
            .await
            .map_err(SessionError::Http)?;
        session.recycle(resp.body);
        Ok(session)
    }

    /// Probes with `server/discover`; on a modern answer makes this session modern and reads
    /// the tool's annotations. `Ok(false)`: not modern (fall back to initialize).
    async fn open_modern(
        &mut self,
        config: &LoadConfig,
        deadline: Instant,
    ) -> Result<bool, SessionError> {
        use super::era;
        self.modern = true;
        let head_deadline = deadline.min(Instant::now() + config.connect_timeout);
        let mut resp = self
            .send("POST", &era::discover_body(), None, head_deadline, true)
            .await
            .map_err(SessionError::Http)?;
        let answer = if (200..300).contains(&resp.status) {
            read_response(&mut resp, 0, deadline).await.ok()
        } else {
            let _ = resp.body.read_all(deadline).await;
            None
        };
        self.recycle(resp.body);
        if !answer.as_ref().is_some_and(era::is_modern_discover) {
            self.modern = false;
            return Ok(false);
        }
        self.protocol_version = era::MODERN_VERSION.to_string();
        let id = self.next_request_id();
        let mut resp = self
            .send("POST", &era::list_body(id), None, deadline, true)
            .await
            .map_err(SessionError::Http)?;
        let list = read_response(&mut resp, id, deadline).await?;
        self.recycle(resp.body);
        self.repeat_safe = era::declared_idempotent(&list, &config.tool);
        Ok(true)
    }

    /// A fresh JSON-RPC request id, unique within the session.
    pub fn next_request_id(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id += 1;
        id
    }

    /// Sends a request: POST `body` (`last_event_id` = None) or a resume GET with
    /// `Last-Event-ID` (`body` empty); returns once the response head arrived.
    pub async fn send(
        &mut self,
        method: &str,
        body: &[u8],
        last_event_id: Option<&str>,
        deadline: Instant,
        with_session: bool,
    ) -> Result<Response, HttpError> {
        self.send_marked(method, body, last_event_id, deadline, with_session, None)
            .await
    }

    /// POSTs one call (`tools/call`) carrying `Idempotency-Key: key` when given: the re-send
    /// marker (README "Marking re-sends"): one fresh key per logical call, the same key on
    /// every re-send of it, so a proxy's audit can prove a re-send from the wire alone.
    pub async fn send_call(
        &mut self,
        body: &[u8],
        key: Option<&str>,
        deadline: Instant,
    ) -> Result<Response, HttpError> {
        self.send_marked("POST", body, None, deadline, true, key)
            .await
    }

    async fn send_marked(
        &mut self,
        method: &str,
        body: &[u8],
        last_event_id: Option<&str>,
        deadline: Instant,
        with_session: bool,
        key: Option<&str>,
    ) -> Result<Response, HttpError> {
        let session_id = self.id.clone();
        let version = self.protocol_version.clone();
        let token = match (last_event_id, &self.resume_token) {
            (Some(_), Some(narrowed)) => Some(narrowed),
            _ => self.token.as_ref(),
        };
        let bearer = token.map(|t| format!("Bearer {t}"));
        // 2026-07-28: `_meta` in the body, method and name mirrored into headers.
        let modern = (self.modern && method == "POST")
            .then(|| super::era::modernize(body))
            .flatten();
        let body = modern.as_ref().map_or(body, |(b, _, _)| b.as_slice());
        let mut headers: Vec<(&str, &str)> = Vec::with_capacity(8);
        if let Some(b) = bearer.as_deref() {
            headers.push(("Authorization", b));
        }
        if let Some((_, m, name)) = &modern {
            headers.push(("MCP-Protocol-Version", super::era::MODERN_VERSION));
            headers.push(("Mcp-Method", m));
            if let Some(n) = name {
                headers.push(("Mcp-Name", n));
            }
        }
        if method == "POST" {
            headers.push(("Content-Type", "application/json"));
            headers.push(("Accept", ACCEPT_POST));
        } else {
            headers.push(("Accept", "text/event-stream"));
        }
        if with_session && modern.is_none() {
            if let Some(id) = session_id.as_deref() {
                headers.push(("Mcp-Session-Id", id));
            }
            headers.push(("MCP-Protocol-Version", &version));
        }
        if let Some(id) = last_event_id {
            headers.push(("Last-Event-ID", id));
        }
        if let Some(k) = key {
            headers.push((IDEMPOTENCY_KEY, k));
        }
        let req = Request {
            method,
            headers: &headers,
            body,
        };
        if let Some(conn) = self.idle.take() {
            match conn.send(&self.target, &req, deadline).await {
                Err(HttpError::ClosedBeforeHead | HttpError::Io(_)) => self.silent_resends += 1,
                other => return other,
            }
        }
        let budget = self
            .connect_timeout
            .min(deadline.saturating_duration_since(Instant::now()));
        let conn = Conn::connect(&self.target, budget).await?;
        conn.send(&self.target, &req, deadline).await
    }

    /// Ends the session at the server (`DELETE` with its `Mcp-Session-Id`) within `budget`;
    /// nothing to do for a session without an id (2026-07-28, or a server that gave none).
    /// Failures are logged: the server's idle expiry is the fallback.
    pub async fn delete(mut self, budget: std::time::Duration) {
        let Some(id) = self.id.clone().filter(|_| !self.modern) else {
            return;
        };
        let deadline = Instant::now() + budget;
        match self.send("DELETE", b"", None, deadline, true).await {
            Ok(mut resp) => {
                let _ = resp.body.read_all(deadline).await;
                tracing::debug!(session = %id, status = resp.status, "abandoned session deleted");
            }
            Err(e) => {
                tracing::debug!(session = %id, error = %e, "DELETE of an abandoned session failed")
            }
        }
    }

    /// Keeps the connection of a finished response for the next request, if reusable.
    pub fn recycle(&mut self, body: Body) {
        self.idle = body.into_conn();
    }
}

/// Reads the JSON-RPC response with `id` from a JSON or SSE response body.
async fn read_response(
    resp: &mut Response,
    id: u64,
    deadline: Instant,
) -> Result<Value, SessionError> {
    if !resp.is_event_stream() {
        let bytes = resp
            .body
            .read_all(deadline)
            .await
            .map_err(SessionError::Http)?;
        return serde_json::from_slice(&bytes).map_err(|_| SessionError::BadAnswer("not JSON"));
    }
    let mut scanner = SseScanner::new();
    let mut found: Option<Value> = None;
    loop {
        let next = resp.body.next(deadline).await.map_err(SessionError::Http)?;
        let mut on_event = |ev: &crate::wire::sse::SseEvent<'_>| {
            if found.is_none()
                && let Ok(v) = serde_json::from_slice::<Value>(ev.data)
                && v.get("id").and_then(Value::as_u64) == Some(id)
            {
                found = Some(v);
            }
        };
        match next {
            Next::Data(d) => scanner.feed(d, &mut on_event),
            Next::End => {
                scanner.finish(&mut on_event);
                break;
            }
        }
    }
    found.ok_or(SessionError::BadAnswer("stream ended without the response"))
}
