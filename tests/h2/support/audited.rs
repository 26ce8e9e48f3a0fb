//! The audit on a hop with a short `abandon_after`: every observation the proxy records goes
//! both to the hop's recorder (so a test still reads the raw observations) and to a real
//! [`Auditor`] (through [`Hop::audit_with`]), so a test checks what the audit itself says of a
//! fault — the findings a user reads — and not only what was observed.

use std::sync::Arc;
use std::time::Duration;

use tearline::audit::{AuditConfig, Auditor, Finding, FindingKind};

use super::route::Hop;

/// Puts an auditor behind `hop`'s proxy (which must observe: `Route::Observed` or
/// `Route::Terminated`), before any client connects. `abandon_after` is short so that a call
/// or stream left for lost is judged within a test.
pub fn audit(hop: &Hop) -> Arc<Auditor> {
    hop.audit_with(AuditConfig {
        abandon_after: Duration::from_millis(500),
        ..AuditConfig::default()
    })
}

/// The findings of `kind` so far.
pub fn of(auditor: &Auditor, kind: FindingKind) -> Vec<Finding> {
    auditor
        .findings()
        .into_iter()
        .filter(|f| f.kind == kind)
        .collect()
}

/// Every finding, one per line, for failure messages.
pub fn show(auditor: &Auditor) -> String {
    auditor
        .findings()
        .iter()
        .map(|f| serde_json::to_string(f).unwrap_or_else(|_| format!("{f:?}")))
        .collect::<Vec<_>>()
        .join("\n")
}
