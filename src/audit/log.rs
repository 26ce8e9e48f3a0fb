//! The findings log (`--findings-log FILE`): each finding as one JSON line, written when found.
//!
//! Invariants: one line per finding, flushed at once (a crash loses no finding already
//! reported); a write error disables the log (reported once through `tracing`) instead of
//! failing the data path.

use super::finding::Finding;
use std::io::Write;

/// A JSONL sink for findings.
pub struct FindingsLog {
    out: Box<dyn Write + Send>,
    failed: bool,
}

impl std::fmt::Debug for FindingsLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FindingsLog")
            .field("failed", &self.failed)
            .finish()
    }
}

impl FindingsLog {
    /// Writes findings to `out`.
    pub fn new(out: Box<dyn Write + Send>) -> Self {
        FindingsLog { out, failed: false }
    }

    /// Appends one finding as a JSON line and flushes.
    pub fn write(&mut self, finding: &Finding) {
        if self.failed {
            return;
        }
        let result = serde_json::to_writer(&mut self.out, finding)
            .map_err(std::io::Error::from)
            .and_then(|()| self.out.write_all(b"\n"))
            .and_then(|()| self.out.flush());
        if let Err(e) = result {
            self.failed = true;
            tracing::warn!(error = %e, "findings log write failed; log disabled");
        }
    }
}
