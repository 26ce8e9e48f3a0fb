//! Command-line surface of `tearline serve`: maps flags onto [`LabConfig`] one to one and runs
//! the server until SIGINT or SIGTERM. One port answers HTTP/1.1, h2c and (over TLS, by ALPN)
//! h2; see [`crate::lab::conn`].

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::lab::config::{
    Chunking, LabConfig, LineEnding, OnEvicted, OnUnauthorized, ProtocolVersion,
};

pub use crate::units::parse_duration;

/// Errors of `tearline serve`.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    /// The server refused the configuration.
    #[error(transparent)]
    Lab(#[from] crate::lab::LabError),
    /// A TLS flag could not be turned into a configuration.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// Run the lab MCP Streamable HTTP server (correct by default; flags reproduce the seed bugs).
#[derive(Debug, clap::Args)]
#[command(after_long_help = "Examples:
  tearline serve --listen 127.0.0.1:8931
      A correct dual-era server: legacy clients get the 2025 revision they ask for
      (64-event ring per session, explicit errors); 2026-07-28 requests are stateless.
  tearline serve --buffer 64 --on-evicted fresh
      Seed 004: a resume whose cursor was evicted silently gets a fresh stream.
  tearline serve --auth --on-unauthorized silent-end
      Seed 000: a resume with a narrowed token ends cleanly at the first event it may not see.
  tearline serve --line-ending crlf --chunking per-line --keepalive 15s
      Wire variations for SSE parsers.
  tearline serve --listen 127.0.0.1:8443 --tls-self-signed
      HTTPS with a certificate from tearline's local CA (prints the line to trust it);
      ALPN offers h2 and http/1.1 (`curl --http2 -k`, `tearline load --http2`). Plain
      ports answer h2c by prior knowledge too (`curl --http2-prior-knowledge`).
  tearline serve --protocol 2026-07-28
      Modern only: no event ids, no resumption, GET answers 405, initialize gets -32022.
  tearline serve --max-event-bytes 1MiB
      No SSE event over 1 MiB (real Python clients refuse larger ones).

Tools (tools/call arguments), among others:
  blob {\"size\": 4194304, \"lines\": 3, \"hold_ms\": 0, \"gate\": 0}
      One result event of `size` text bytes over `lines` data: lines. hold_ms pauses it
      mid-way through its last data line; with gate N the pause counts from when N streams
      are paused there at once (every stream open and mid-event: bench/sse_memory.sh).

LLM endpoints (always on; OpenAI and Anthropic SDKs take http://HOST:PORT/v1 or
http://HOST:PORT as their base URL; any API key is accepted and never logged):
  POST /v1/chat/completions, /v1/responses, /v1/messages  (\"stream\": true for SSE)
  tearline serve --llm-tokens 200 --llm-token-rate 50 --llm-ttft 300ms
      200-token answers at 50 tokens/s after 300 ms; a request offering tools gets a call.
  Per request: x-tearline-lab: tokens=64, rate=200, ttft=150ms, usage=always, tool=none

Lab tokens (with --auth, no cryptography, lab-only):
  Authorization: Bearer aud=https://lab/tools/search,https://lab/tools/fetch

Try it:
  curl -si -X POST http://127.0.0.1:8931/mcp -H 'Content-Type: application/json' \\
    -H 'Accept: application/json, text/event-stream' \\
    -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"}}'
  curl -s -X POST http://127.0.0.1:8931/mcp -H 'Content-Type: application/json' \\
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \\
    -H 'Mcp-Method: tools/list' -d '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",
    \"params\":{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}'")]
pub struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8931")]
    pub listen: SocketAddr,
    /// Path of the MCP endpoint.
    #[arg(long, default_value = "/mcp")]
    pub path: String,
    /// Serve only this revision. Without it the lab is dual-era: `initialize` negotiates the
    /// 2025 revision the client asks for (else 2025-11-25) and requests carrying 2026-07-28
    /// `_meta`/headers (or `server/discover`) are served statelessly. 2026-07-28 makes the
    /// whole server stateless and non-resumable.
    #[arg(long, value_enum)]
    pub protocol: Option<ProtocolVersion>,
    /// Largest SSE event the lab writes (e.g. 1MiB for Python clients, which refuse larger
    /// events): a `blob` without `size` shrinks to fit, a larger explicit `size` is refused.
    #[arg(long, value_parser = crate::units::parse_size)]
    pub max_event_bytes: Option<usize>,
    /// Events kept per session (one ring shared by the session's streams).
    #[arg(long, default_value_t = 64)]
    pub buffer: usize,
    /// Memory budget of each session's ring in bytes: when a stream's client disconnects and
    /// the ring holds more, the oldest events are evicted (eviction under memory pressure).
    #[arg(long)]
    pub buffer_bytes: Option<usize>,
    /// What a resume gets when its Last-Event-ID was evicted.
    #[arg(long, value_enum, default_value = "error")]
    pub on_evicted: OnEvicted,
    /// Require lab bearer tokens naming audiences (`Bearer aud=<uri>,…`).
    #[arg(long)]
    pub auth: bool,
    /// What a resume gets at an event outside the token's audience.
    #[arg(long, value_enum, default_value = "error")]
    pub on_unauthorized: OnUnauthorized,
    /// Line ending of SSE output.
    #[arg(long, value_enum, default_value = "lf")]
    pub line_ending: LineEnding,
    /// How SSE bytes map onto HTTP chunks.
    #[arg(long, value_enum, default_value = "per-event")]
    pub chunking: Chunking,
    /// Send `: keepalive` comments on idle streams this often (e.g. 15s, 500ms); off if absent.
    #[arg(long, value_parser = parse_duration)]
    pub keepalive: Option<Duration>,
    /// The `retry:` value of priming events (2025-11-25 sessions).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub retry: Duration,
    /// Live sessions beyond this many are refused with 503.
    #[arg(long, default_value_t = 10_000)]
    pub max_sessions: usize,
    /// A session no request and no connected reader has used for this long ends (0 = never).
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub session_idle: Duration,
    /// Time a client has to send request headers (also the keep-alive idle limit), and then a
    /// POST body.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub read_timeout: Duration,
    /// Serve HTTPS (--tls-cert/--tls-key, or --tls-self-signed).
    #[command(flatten)]
    pub tls: super::tls::ServerTlsArgs,
    /// A scripted server bug on resumes (reorder, drop-after-replay, duplicate, shared-store,
    /// lose-final); `none` is a correct event store.
    #[arg(long, value_enum, default_value = "none")]
    pub bug: crate::lab::bugs::ServerBug,
    /// Event ids: `counter` (`<stream>-<seq>`) or `opaque` (UUID-like).
    #[arg(long, value_enum, default_value = "counter")]
    pub ids: crate::lab::bugs::IdStyle,
    /// Also serve a plain SSE feed (no MCP, no session; EventSource-style) at this path.
    #[arg(long)]
    pub plain_path: Option<String>,
    /// Knobs of the LLM endpoints (/v1/chat/completions, /v1/responses, /v1/messages).
    #[command(flatten)]
    pub llm: crate::lab::llm::LlmArgs,
}

impl Args {
    /// The server configuration these flags describe.
    pub fn config(&self) -> LabConfig {
        LabConfig {
            path: self.path.clone(),
            protocol: self.protocol.unwrap_or(ProtocolVersion::V2025_11_25),
            narrow: self.protocol.is_some(),
            max_event_bytes: self.max_event_bytes,
            buffer: self.buffer,
            buffer_bytes: self.buffer_bytes,
            on_evicted: self.on_evicted,
            auth: self.auth,
            on_unauthorized: self.on_unauthorized,
            line_ending: self.line_ending,
            chunking: self.chunking,
            keepalive: self.keepalive.filter(|d| !d.is_zero()),
            retry: self.retry,
            max_sessions: self.max_sessions,
            session_idle: (!self.session_idle.is_zero()).then_some(self.session_idle),
            read_timeout: self.read_timeout,
            bug: self.bug,
            ids: self.ids,
            plain_path: self.plain_path.clone(),
            llm: self.llm.knobs(),
            ..LabConfig::default()
        }
    }
}

/// Runs `tearline serve` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> Result<ExitCode, ServeError> {
    // The proxy's deep backlog: a load test's burst of clients is queued, not answered with
    // SYN cookies (which can reset a client the lab never saw).
    let listener = crate::proxy::listen(args.listen).map_err(|source| ServeError::Bind {
        addr: args.listen,
        source,
    })?;
    let addr = listener.local_addr().unwrap_or(args.listen);
    let shutdown = CancellationToken::new();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(ServeError::Signals)?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        stop.cancel();
    });
    let config = args.config();
    tracing::info!(%addr, path = %config.path, protocol = config.protocol.as_str(), "lab server listening");
    let tls = args.tls.build(addr.ip())?;
    crate::lab::serve_tls(listener, config, tls, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}
