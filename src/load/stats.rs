//! What a run counts and which disconnect stories it keeps.
//!
//! The counters are the reports' one [`Counters`] type (`crate::report::counters`), named as
//! the audit names the same facts. Invariant: every finished call lands in exactly one of `ok`,
//! `failed`, `silent-loss` ([`Counters::is_balanced`]); the other counters count events inside
//! calls (a call may resume several times).

use serde::Serialize;

use super::config::Policy;

pub use crate::report::counters::Counters;

/// One finished call as the client saw it: its requests and its share of the counters, for
/// setting them beside the audit's findings call by call (`replay`'s reconciliation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallFacts {
    /// The call's POSTs that reached the server, in order: the `Mcp-Session-Id` they named (none
    /// in 2026-07-28) and their JSON-RPC id.
    pub requests: Vec<(Option<String>, u64)>,
    /// What the call added to the counters (`calls` is 1).
    pub counts: Counters,
    /// How it ended.
    pub end: CallEnd,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallEnd {
    /// Verified result (or JSON-RPC error) for the call's id.
    Ok,
    /// Known failure.
    Failed,
    /// Taken as complete without a valid result.
    SilentlyLost,
}

/// What the server answered to a resume GET.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ResumeAnswer {
    /// The GET failed before a response head.
    NoResponse {
        /// [`super::http::HttpError::kind`] of the failure.
        error: &'static str,
    },
    /// A non-200 status or a non-SSE body.
    Refused {
        /// The status code.
        status: u16,
    },
    /// 200 with an SSE stream; the ids the client saw first.
    Stream {
        /// The first id committed on the resumed stream, if any.
        first_id: Option<String>,
        /// True if the strict client judged that it does not continue the broken stream
        /// (another stream, or a gap), rather than replaying it.
        discontinuous: bool,
        /// True if the stream carried `event: error`.
        error_event: bool,
    },
}

/// The story of one disconnect inside a call: what the client held and what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallTrace {
    /// The policy that handled the call.
    pub policy: Policy,
    /// The JSON-RPC id of the request whose stream broke.
    pub request_id: u64,
    /// Why the stream stopped (`clean-end` or an HTTP error kind).
    pub stop: &'static str,
    /// The committed (dispatched) last event id at the disconnect.
    pub committed_id: String,
    /// The id line of the event in progress, if one was seen (not committed).
    pub pending_id: Option<String>,
    /// True if bytes of an incomplete event were in hand.
    pub partial: bool,
    /// `data:` lines of the incomplete event seen complete before the cut.
    pub partial_data_lines: u32,
    /// True if the cut fell inside a `data:` line.
    pub mid_data_line: bool,
    /// Bytes of the incomplete event in hand.
    pub partial_bytes: u64,
    /// The `Last-Event-ID` sent on the resume, if the client resumed.
    pub last_event_id_sent: Option<String>,
    /// What the server answered to the resume.
    pub answer: Option<ResumeAnswer>,
    /// How the call ended.
    pub outcome: Option<CallEnd>,
}
