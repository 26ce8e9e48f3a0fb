//! TOML text → the raw profile, with the source span of every key and value.
//!
//! Invariant: nothing is validated here beyond TOML syntax, the top-level and `[[proxy]]` keys
//! and their types; every `[[fault]]` table is kept as written (keys in source order, with spans)
//! for the registry to judge.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use crate::fault::keys::{FaultDef, Param};

/// A profile as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProfile {
    /// `description`.
    pub description: Option<Spanned<String>>,
    /// `seed` (checked to be a non-negative integer by validation).
    pub seed: Option<Spanned<toml::Value>>,
    /// `[[proxy]]` tables.
    #[serde(default)]
    pub proxy: Vec<Spanned<RawProxy>>,
    /// `[[fault]]` tables.
    #[serde(default)]
    pub fault: Vec<Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>>,
    /// `[[phase]]` tables.
    #[serde(default)]
    pub phase: Vec<Spanned<RawPhase>>,
    /// `[[llm_route]]` tables.
    #[serde(default)]
    pub llm_route: Vec<Spanned<RawLlmRoute>>,
}

/// A `[[llm_route]]` as written: requests to `path` (a prefix when it ends in `*`) speak `api`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLlmRoute {
    /// `path`.
    pub path: Spanned<String>,
    /// `api`: `chat-completions`, `responses` or `messages`.
    pub api: Spanned<String>,
}

/// A `[[phase]]` as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhase {
    /// `name`.
    pub name: Spanned<String>,
    /// `duration_ms` (checked to be a positive integer by validation; absent on the last).
    pub duration_ms: Option<Spanned<toml::Value>>,
    /// `faults`: names of `[[fault]]`s in force during the phase.
    pub faults: Spanned<Vec<Spanned<String>>>,
}

/// A `[[proxy]]` as written.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProxy {
    /// `name`.
    pub name: Spanned<String>,
    /// `listen`.
    pub listen: Spanned<String>,
    /// `upstream`.
    pub upstream: Spanned<String>,
    /// `enabled` (default true).
    pub enabled: Option<Spanned<bool>>,
}

/// An error with a byte span, before it is located in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanError {
    /// Byte span, if known.
    pub span: Option<Range<usize>>,
    /// The key at fault.
    pub key: Option<String>,
    /// The message.
    pub message: String,
}

impl SpanError {
    /// Turns the span into `origin:line:column`.
    pub fn locate(self, text: &str, origin: &str) -> super::ProfileError {
        let (line, column) = super::line_col(text, self.span.map_or(0, |s| s.start));
        super::ProfileError::Invalid {
            origin: origin.to_owned(),
            line,
            column,
            key: self.key,
            message: self.message,
        }
    }
}

/// Parses the TOML text.
pub fn raw(text: &str) -> Result<RawProfile, SpanError> {
    toml::from_str(text).map_err(|e| {
        let mut message = tidy(e.message());
        // serde does not say which table misses a key; the span points at its header.
        let header = e
            .span()
            .and_then(|s| text.get(s))
            .filter(|h| h.starts_with('['));
        if let (true, Some(h)) = (message.starts_with("missing required key"), header) {
            message = format!("{message} in {}", h.trim());
        }
        SpanError {
            span: e.span(),
            key: None,
            message,
        }
    })
}

/// Rewrites serde's messages into the profile vocabulary ("key", '…' quotes, "known: …").
fn tidy(message: &str) -> String {
    let m = message.trim_end();
    if let Some(rest) = m.strip_prefix("unknown field `")
        && let Some((key, expected)) = rest.split_once('`')
    {
        let known = expected
            .trim_start_matches(", expected one of ")
            .trim_start_matches(", expected ")
            .replace('`', "");
        return format!("unknown key '{key}'; known: {known}");
    }
    if let Some(rest) = m.strip_prefix("missing field `") {
        return format!("missing required key '{}'", rest.trim_end_matches('`'));
    }
    if m == "invalid type: map, expected a sequence" {
        return "a single [table] where a list of tables belongs: write [[fault]], [[proxy]], \
                [[phase]] or [[llm_route]] (double brackets), once per entry"
            .to_owned();
    }
    if m.contains(" as i128") || m == "u64 value was too large" || m.contains("number too large") {
        return format!(
            "integer out of range: TOML integers are 64-bit, at most {}",
            i64::MAX
        );
    }
    m.replace('`', "'")
}

/// A `[[fault]]` table as a definition for the registry (keys in source order).
pub fn fault_def(table: &Spanned<BTreeMap<Spanned<String>, Spanned<toml::Value>>>) -> FaultDef {
    let mut params: Vec<Param> = table
        .get_ref()
        .iter()
        .map(|(k, v)| Param {
            key: k.get_ref().clone(),
            key_span: Some(k.span()),
            value: v.get_ref().clone(),
            value_span: Some(v.span()),
        })
        .collect();
    params.sort_by_key(|p| p.key_span.as_ref().map_or(0, |s| s.start));
    FaultDef {
        span: Some(table.span()),
        params,
    }
}
