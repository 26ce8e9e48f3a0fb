//! Every knob of the lab server, in one value the CLI, `tearline replay` and the tests build.
//!
//! Invariant: `LabConfig::default()` is a correct MCP Streamable HTTP server (protocol
//! 2025-11-25, 64-event ring, explicit errors on eviction and on unauthorized replay, LF line
//! endings, one HTTP chunk per SSE event, no keep-alive comments, auth off). Every deviation
//! from the specification is opt-in and named after the document it reproduces.

use std::time::Duration;

/// The MCP protocol revisions the lab server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum ProtocolVersion {
    /// 2025-03-26: resumable, no priming event, JSON-RPC batches.
    #[value(name = "2025-03-26")]
    V2025_03_26,
    /// 2025-06-18: adds the `MCP-Protocol-Version` header.
    #[value(name = "2025-06-18")]
    V2025_06_18,
    /// 2025-11-25: adds the priming event and `retry:`.
    #[value(name = "2025-11-25")]
    V2025_11_25,
    /// 2026-07-28: not resumable (no ids, no sessions, GET and DELETE answer 405).
    #[value(name = "2026-07-28")]
    V2026_07_28,
}

impl ProtocolVersion {
    /// The revision string as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parses a revision string; `None` for revisions the lab does not speak.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "2025-03-26" => Some(ProtocolVersion::V2025_03_26),
            "2025-06-18" => Some(ProtocolVersion::V2025_06_18),
            "2025-11-25" => Some(ProtocolVersion::V2025_11_25),
            "2026-07-28" => Some(ProtocolVersion::V2026_07_28),
            _ => None,
        }
    }

    /// Whether streams of this revision carry event ids and can be resumed.
    pub fn resumable(self) -> bool {
        self != ProtocolVersion::V2026_07_28
    }

    /// Whether streams of this revision start with a priming event and `retry:`.
    pub fn primes(self) -> bool {
        self == ProtocolVersion::V2025_11_25
    }
}

/// What a resume does when the event named by `Last-Event-ID` is no longer in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnEvicted {
    /// Correct: HTTP 410 with a JSON-RPC error naming the lost range (see the module doc of
    /// [`crate::lab`]); a live stream that falls behind gets `event: error` instead.
    #[default]
    Error,
    /// Seed 004's bug: a 200 stream that continues from the newest event (a new priming event
    /// with the next id, a greeting notification, then whatever the call still produces):
    /// continuation, not replay.
    Fresh,
    /// A silent gap: replay from the oldest event of that stream still in the ring.
    ReplayFromOldest,
}

/// What a resume does with a buffered event outside the reconnect token's audience.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OnUnauthorized {
    /// Correct: `event: error` naming the offending event id and the required resource
    /// indicator, no id on the error (the cursor does not advance), then the stream closes.
    #[default]
    Error,
    /// Seed 000's bug: a clean `event: end`, then the stream closes.
    SilentEnd,
}

/// The line ending of every SSE line the server writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LineEnding {
    /// `\n`.
    #[default]
    Lf,
    /// `\r\n`.
    Crlf,
}

impl LineEnding {
    /// The bytes of one line ending.
    pub fn bytes(self) -> &'static [u8] {
        match self {
            LineEnding::Lf => b"\n",
            LineEnding::Crlf => b"\r\n",
        }
    }
}

/// How SSE bytes map onto HTTP chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Chunking {
    /// One HTTP chunk per SSE event (and per comment).
    #[default]
    PerEvent,
    /// Every event already available when the body is polled goes into one chunk.
    Coalesce,
    /// One HTTP chunk per SSE line, the blank line included.
    PerLine,
}

/// The lab server's configuration. `Default` is the correct server.
#[derive(Debug, Clone)]
pub struct LabConfig {
    /// The MCP endpoint path.
    pub path: String,
    /// The legacy revision `initialize` answers when the client asks for none the lab speaks
    /// (and the only one when `narrow`); 2026-07-28 makes the lab modern-only (an
    /// `initialize` then gets 400 with -32022 naming the supported revisions).
    pub protocol: ProtocolVersion,
    /// Capacity of each session's ring of events, shared by the session's streams.
    pub buffer: usize,
    /// Memory budget of each session's ring in bytes: when a stream's reader detaches and the
    /// ring holds more, the oldest events are evicted until it fits (`None`: no budget).
    pub buffer_bytes: Option<usize>,
    /// Behaviour of a resume whose cursor event was evicted.
    pub on_evicted: OnEvicted,
    /// Whether requests need a lab bearer token (see [`crate::lab::auth`]).
    pub auth: bool,
    /// Behaviour of a resume that meets an event outside the token's audience.
    pub on_unauthorized: OnUnauthorized,
    /// Line ending of SSE output.
    pub line_ending: LineEnding,
    /// Mapping of SSE bytes onto HTTP chunks.
    pub chunking: Chunking,
    /// Interval of `: keepalive` comments on idle streams; `None` sends none.
    pub keepalive: Option<Duration>,
    /// The `retry:` value sent in priming events (2025-11-25 sessions).
    pub retry: Duration,
    /// Sessions beyond this many are refused with 503.
    pub max_sessions: usize,
    /// Connections beyond this many wait for a slot before being served.
    pub max_connections: usize,
    /// A session no request has named and no reader has followed for this long ends (its
    /// producers stop; later requests naming it get 404). `None`: sessions live until DELETE.
    pub session_idle: Option<Duration>,
    /// Time a client has to send a request's headers, and then a POST body: slow clients
    /// cannot hold connection slots.
    pub read_timeout: Duration,
    /// Largest accepted POST body; larger ones get 413.
    pub max_body_bytes: usize,
    /// Largest `size` the `blob` tool accepts.
    pub max_blob_bytes: usize,
    /// Whether `protocol` is the only revision served (`tearline serve --protocol`). When
    /// false (the default) the lab is dual-era: `initialize` negotiates a 2025 revision and
    /// requests carrying 2026-07-28 metadata are served statelessly (see [`crate::lab::stateless`]).
    pub narrow: bool,
    /// Largest SSE event the lab may write (`None`: unlimited). A `blob` without an explicit
    /// `size` shrinks to fit; a larger explicit `size` is refused with -32602. Real Python
    /// clients cap one event at 1 MiB.
    pub max_event_bytes: Option<usize>,
    /// The server-side counter the non-idempotent `append` tool adds to: the ground truth of
    /// how often a side effect ran. Clones of a config share it.
    pub side_effects: SideEffects,
    /// A scripted server bug acting on resume legs (see [`crate::lab::bugs`]).
    pub bug: ServerBug,
    /// How events are named: `<stream>-<seq>` counters or opaque UUID-like ids.
    pub ids: IdStyle,
    /// Path of the plain-SSE endpoint (no MCP, no session; see [`crate::lab::plain`]).
    pub plain_path: Option<String>,
    /// The plain feed starts every resume with a priming event repeating the cursor (see
    /// [`crate::lab::plain_priming`]).
    pub plain_priming: bool,
    /// Records what the lab emitted per leg (see [`crate::lab::truth`]); `None`: no record.
    pub truth: Option<std::sync::Arc<super::truth::LabTruth>>,
    /// Knobs of the LLM endpoints (see [`crate::lab::llm`]).
    pub llm: super::llm::knobs::Knobs,
    /// 2026-07-28: answer `tools/call` with one `application/json` body (the final response,
    /// no progress notifications) instead of an SSE stream, as the spec lets a server choose
    /// (see [`super::tools::answer_json`]). Off by default; the accuracy harness cuts such
    /// bodies.
    pub json_results: bool,
}

/// Default of [`LabConfig::session_idle`].
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);

/// Default of [`LabConfig::read_timeout`].
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A shared counter of side effects (the `append` tool's state), readable by whoever built
/// the config (tests, `tearline replay`).
#[derive(Debug, Clone, Default)]
pub struct SideEffects(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl SideEffects {
    /// Adds `n` and returns the new value.
    pub fn add(&self, n: u64) -> u64 {
        self.0.fetch_add(n, std::sync::atomic::Ordering::SeqCst) + n
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl PartialEq for SideEffects {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            path: "/mcp".to_owned(),
            protocol: ProtocolVersion::V2025_11_25,
            buffer: 64,
            buffer_bytes: None,
            on_evicted: OnEvicted::Error,
            auth: false,
            on_unauthorized: OnUnauthorized::Error,
            line_ending: LineEnding::Lf,
            chunking: Chunking::PerEvent,
            keepalive: None,
            retry: Duration::from_millis(1000),
            max_sessions: 10_000,
            max_connections: 8_192,
            session_idle: Some(DEFAULT_SESSION_IDLE),
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_body_bytes: 1 << 20,
            max_blob_bytes: 256 << 20,
            narrow: false,
            max_event_bytes: None,
            side_effects: SideEffects::default(),
            bug: ServerBug::None,
            ids: IdStyle::Counter,
            plain_path: None,
            plain_priming: false,
            truth: None,
            llm: super::llm::knobs::Knobs::default(),
            json_results: false,
        }
    }
}

/// A scripted server bug (`tearline serve --bug`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ServerBug {
    /// A correct event store.
    #[default]
    None,
    /// A resume sends the first two replayed progress events in swapped order.
    Reorder,
    /// A resume sends the first replayed event (the end of its "replay"), then skips the next
    /// two progress events (the ones "produced between replay and live delivery") when a later
    /// event follows them, then continues.
    DropAfterReplay,
    /// A resume sends its first replayed progress event twice.
    Duplicate,
    /// One event store for all sessions, keyed by JSON-RPC request id: a resume is served from
    /// the first stream ever opened for the same request id, whichever session opened it.
    SharedStore,
    /// A resume drops the call's JSON-RPC response and ends the body cleanly there (the
    /// response is lost for every later resume too).
    LoseFinal,
}

impl ServerBug {
    /// Every bug, `None` first.
    pub const ALL: [ServerBug; 6] = [
        ServerBug::None,
        ServerBug::Reorder,
        ServerBug::DropAfterReplay,
        ServerBug::Duplicate,
        ServerBug::SharedStore,
        ServerBug::LoseFinal,
    ];

    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerBug::None => "none",
            ServerBug::Reorder => "reorder",
            ServerBug::DropAfterReplay => "drop-after-replay",
            ServerBug::Duplicate => "duplicate",
            ServerBug::SharedStore => "shared-store",
            ServerBug::LoseFinal => "lose-final",
        }
    }
}

/// How the lab names events.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Default,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum IdStyle {
    /// `<stream>-<seq>` (plain endpoint: `<seq>`).
    #[default]
    Counter,
    /// Random UUID-like ids.
    Opaque,
}

impl IdStyle {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            IdStyle::Counter => "counter",
            IdStyle::Opaque => "opaque",
        }
    }
}
