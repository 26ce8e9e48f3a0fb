//! Fault profiles: TOML files that declare proxies, their faults and a seed.
//!
//! Exists so that a scenario is a reviewable file rather than a sequence of API calls. The
//! pipeline is text → [`parse`] (TOML with spans) → [`validate`] (every fault through the
//! registry, cross references) → [`Profile`]. Invariant: a [`Profile`] value is valid — every
//! fault built, every referenced proxy defined, names unique — and every error carries
//! `origin:line:column`, the key at fault and what is allowed.

pub mod model;
pub mod parse;
pub mod shipped;
pub mod validate;

use std::path::Path;

pub use model::{FaultSpec, PhaseSpec, PhaseStep, Profile, ProxyDef};

/// A profile could not be read or is invalid.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The file could not be read. The I/O error is part of the message (not a separate
    /// source), so a one-line report names it once.
    #[error("{path}: cannot read: {error}")]
    Read {
        /// The path as given.
        path: String,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The text is not a valid profile.
    #[error("{origin}:{line}:{column}: {message}")]
    Invalid {
        /// File name (or another label of the text).
        origin: String,
        /// 1-based line of the offending text.
        line: usize,
        /// 1-based column (in characters).
        column: usize,
        /// The key at fault, if one is.
        key: Option<String>,
        /// What is wrong and what is allowed.
        message: String,
    },
}

impl ProfileError {
    /// The error's message without the location.
    pub fn message(&self) -> String {
        match self {
            ProfileError::Read { error, .. } => error.to_string(),
            ProfileError::Invalid { message, .. } => message.clone(),
        }
    }
}

/// Reads and validates the profile at `path`.
pub fn load(path: &Path) -> Result<Profile, ProfileError> {
    let text = std::fs::read_to_string(path).map_err(|error| ProfileError::Read {
        path: path.display().to_string(),
        error,
    })?;
    parse(&text, &path.display().to_string())
}

/// Parses and validates profile `text`; `origin` names it in errors (usually the path).
pub fn parse(text: &str, origin: &str) -> Result<Profile, ProfileError> {
    let raw = parse::raw(text).map_err(|e| e.locate(text, origin))?;
    validate::profile(raw, text, origin).map_err(|e| e.locate(text, origin))
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}
