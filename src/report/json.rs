//! `report.json`: writing, reading, and the JSON Schema it conforms to.
//!
//! Why: CI jobs and other tools read a run's outcome from JSON; `tearline report show` rebuilds
//! the full [`Report`] (histograms included) from it.
//! Invariants: output is pretty-printed, deterministic (ordered maps) and validates against
//! [`SCHEMA`] (`report.schema.json`, JSON Schema draft 2020-12); reading checks
//! `schema_version` before anything else so a future layout fails with a version error, not a
//! field error, and upgrades an older readable version ([`FIRST_READABLE`]) to today's;
//! `to_json(from_json(x)) == x` for any `x` produced by [`to_json`].

use std::path::Path;

use super::ReportError;
use super::model::{Report, SCHEMA_VERSION};

/// The JSON Schema of `report.json` (also at `src/report/report.schema.json`).
pub const SCHEMA: &str = include_str!("report.schema.json");

/// `report` as pretty JSON.
pub fn to_json(report: &Report) -> Result<String, ReportError> {
    serde_json::to_string_pretty(report).map_err(|source| ReportError::Json {
        path: "<memory>".into(),
        source,
    })
}

/// Parses a report from JSON text; `path` only labels errors.
pub fn from_json(text: &str, path: &Path) -> Result<Report, ReportError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|source| ReportError::Json {
            path: path.to_owned(),
            source,
        })?;
    let found = value
        .get("schema_version")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    if !(FIRST_READABLE..=u64::from(SCHEMA_VERSION)).contains(&found) {
        return Err(ReportError::SchemaVersion {
            path: path.to_owned(),
            found,
        });
    }
    let mut report: Report = serde_json::from_value(value).map_err(|source| ReportError::Json {
        path: path.to_owned(),
        source,
    })?;
    report.schema_version = SCHEMA_VERSION;
    Ok(report)
}

/// The oldest `schema_version` read: version 2 named five client counters differently
/// (`torn-detections`, `reissues`, `duplicates`, `gaps`, `reorders`, `fresh-streams`) and had
/// no `explicit-loss`, `abandoned` or `reconciliation`; it is read under today's names.
pub const FIRST_READABLE: u64 = 2;

/// Reads and parses `path`.
pub fn load(path: &Path) -> Result<Report, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::io(path, e))?;
    from_json(&text, path)
}
