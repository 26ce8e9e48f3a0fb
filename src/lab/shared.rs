//! The state every connection of one lab server shares: its configuration, its session table,
//! the scripted bugs' store, the plain feed, the hold gate, the LLM counter, and the shutdown
//! token and task tracker every spawned task answers to.
//!
//! Why a file of its own, in the middle of the lab: every handler takes it, and it holds only
//! state types from the layers below, so handlers import it without importing the server
//! (`mod.rs`) or one another.

use std::sync::atomic::AtomicU64;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::bugs::BugState;
use super::config::LabConfig;
use super::hold::Gate;
use super::plain_feed::Feed;
use super::session::Sessions;
use super::sse_body::SseEncoder;

/// State shared by every connection of one server.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: LabConfig,
    pub(crate) enc: SseEncoder,
    pub(crate) sessions: Sessions,
    pub(crate) bugs: BugState,
    pub(crate) plain: Feed,
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
    /// The gate held `blob` results wait at (see [`super::hold`]).
    pub(crate) gate: Gate,
    /// State of the LLM endpoints (see [`super::llm`]).
    pub(crate) llm: LlmState,
}

/// Per-server state of the LLM endpoints.
#[derive(Debug, Default)]
pub(crate) struct LlmState {
    /// Requests answered so far (each answer's index, hence its ids).
    pub(crate) answered: AtomicU64,
}
