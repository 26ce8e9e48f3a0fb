//! The auditor's settings (a base type: every part of the audit may read it, it reads nothing
//! of the audit).

use std::time::Duration;

/// The default of [`AuditConfig::rst_unread`]: headless Chromium and the Python `mcp` client
/// discarded at most what was written within 0.4 ms of a reset on an idle machine
/// (`bench/rst_unread.py`); 50 ms leaves room for a loaded one, while an event written 50 ms
/// before the reset was read by every client measured.
pub const DEFAULT_RST_UNREAD: Duration = Duration::from_millis(50);

/// Settings of the auditor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditConfig {
    /// How long an ended stream (and an idle session) is remembered, so a late resume can still
    /// be mapped; also how long after a cut a re-open without cursor may be followed by a real
    /// resume before it counts as `cursor-missing`.
    pub grace: Duration,
    /// How long after its last cut (or failed resume) a call may wait for an answer, a resume
    /// or a proven re-send before it is `abandoned` (both eras; `--abandon-after`). At
    /// [`Auditor::finish`](super::Auditor::finish) every such call is reported whatever it waited.
    pub abandon_after: Duration,
    /// Delivered events remembered per stream (oldest forgotten first).
    pub ids_per_stream: usize,
    /// Findings kept in memory for [`Auditor::findings`](super::Auditor::findings).
    pub max_findings: usize,
    /// Delivered events an ended stream keeps for its grace (the newest; see [`grace`](super::grace)).
    pub ended_events: usize,
    /// Ended streams kept for their grace, at most; beyond, the oldest are forgotten early and
    /// counted (see [`grace`](super::grace)).
    pub max_ended_streams: usize,
    /// Observations the intake queues for the ledger, at most (`--audit-queue`); beyond, the
    /// relay drops them (it never waits) and the streams they belonged to are not judged.
    pub queue: usize,
    /// After a `reset` cut, events the proxy wrote less than this long before the reset may be
    /// unread by the client (its kernel and its own buffers discard what it had not read); a
    /// resume from inside that window is judged from its cursor, and what the cut leg delivered
    /// after the cursor is owed again. Events written longer ago count as read: a resume behind
    /// them is a stale cursor (`--rst-unread`; measured in bench/RESULTS.md).
    pub rst_unread: Duration,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            grace: Duration::from_secs(60),
            abandon_after: Duration::from_secs(30),
            ids_per_stream: 4096,
            max_findings: 100_000,
            ended_events: 64,
            max_ended_streams: 100_000,
            queue: 65_536,
            rst_unread: DEFAULT_RST_UNREAD,
        }
    }
}
