//! `tearline replay --scenario`: which document's run to reproduce.
//!
//! Why: the two seed documents describe the 2025 era (resumable streams); MCP 2026-07-28 has
//! no resumption, so the same cuts tell a different story there. A scenario only changes the
//! lab server's era and the opening lines of the story; the proxy profile, the load client
//! and the reports are the same, so runs of different scenarios compare line by line.
//!
//! Invariant: `reset-250ms` (the default) leaves the configuration exactly as it was before
//! scenarios existed.

use crate::lab::{LabConfig, ProtocolVersion};

/// A replay scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Scenario {
    /// Seed 004: a 250 ms reset at a random byte of half the streams; 2025-11-25 resumption
    /// against a lab whose ring evicted the cursor (continuation instead of replay).
    #[default]
    #[value(name = "reset-250ms")]
    Reset250ms,
    /// MCP 2026-07-28: the same cuts against a stateless lab. Nothing can be resumed: the
    /// strict client re-issues the (idempotent) call with a new id, the naive one takes the
    /// truncated stream as the answer and loses the call silently.
    Stateless,
}

impl Scenario {
    /// Adjusts the lab configuration for this scenario.
    pub fn apply(self, lab: &mut LabConfig) {
        if self == Scenario::Stateless {
            lab.protocol = ProtocolVersion::V2026_07_28;
            lab.narrow = true;
        }
    }

    /// The opening of the story, as the scenario's document tells it.
    pub fn intro(self) -> &'static str {
        match self {
            Scenario::Reset250ms => {
                "scenario reset-250ms (seed 004): a 4 MB tool result is streamed, a proxy resets \
                 the connection at a random byte of half the streams for 250 ms; the client \
                 resumes with Last-Event-ID."
            }
            Scenario::Stateless => {
                "scenario stateless (MCP 2026-07-28): the same cuts, but streams carry no event \
                 ids and cannot be resumed; a cut request is lost unless the client re-issues it \
                 with a new id (safe only for a tool declared idempotent: `blob` is)."
            }
        }
    }
}
