//! `sse_cut`'s HTTP/2 keys, `scope` and `h2_error`, read apart from the HTTP/1.1 keys so that
//! [`super::sse_cut::SseCutConfig`] keeps its shape for every caller that builds one in code.
//!
//! On HTTP/2 (the stream relay, `proxy::h2`) these two keys apply: `scope` (`"stream"`, the
//! default, or `"connection"`) and `h2_error` (an RFC 9113 error code name, default
//! `"cancel"`). With `scope = "stream"` the positions are those of each stream's `DATA` bodies
//! and a cut ends that stream only: `reset` → a `DATA` frame of the bytes before the cut, then
//! `RST_STREAM(h2_error)` to the client and `RST_STREAM(CANCEL)` to the server; `clean-end` →
//! those bytes with `END_STREAM` and `RST_STREAM(CANCEL)` to the server. HTTP/2 has no
//! orderly end of one stream short of `END_STREAM`, so `fin` always ends the whole connection,
//! as `scope = "connection"` does for every action. Both keys are ignored on HTTP/1.1.
//!
//! Invariant: an unknown `scope` or error code name is an error naming the value and listing
//! what is allowed; absent keys mean stream scope and `CANCEL`.

use super::h2::CutScope;
use super::keys::{FaultConfigError, FaultDef, KeyReader};
use crate::wire::h2::ErrorCode;

/// The keys that apply on HTTP/2 only (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct H2Keys {
    /// `scope`.
    pub scope: CutScope,
    /// `h2_error` (`None`: `CANCEL`).
    pub h2_error: Option<ErrorCode>,
}

impl H2Keys {
    /// Reads `scope` and `h2_error` from a definition; errors name the value and what is
    /// allowed.
    pub(crate) fn read(r: &mut KeyReader<'_>) -> Result<H2Keys, FaultConfigError> {
        let scope = match r.choice("scope", &CutScope::NAMES)? {
            Some("connection") => CutScope::Connection,
            _ => CutScope::Stream,
        };
        let h2_error = match r.str("h2_error")? {
            None => None,
            Some((name, p)) => Some(ErrorCode::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = ErrorCode::NAMED.iter().map(|(n, _)| *n).collect();
                FaultConfigError::at_value(
                    p,
                    format!(
                        "sse_cut 'h2_error': unknown HTTP/2 error code '{name}'; known: {}",
                        known.join(", ")
                    ),
                )
            })?),
        };
        Ok(H2Keys { scope, h2_error })
    }
}

/// The definition without the HTTP/2 keys, which [`H2Keys::read`] has read.
pub(crate) fn without_h2_keys(def: &FaultDef) -> FaultDef {
    FaultDef {
        span: def.span.clone(),
        params: def
            .params
            .iter()
            .filter(|p| !matches!(p.key.as_str(), "scope" | "h2_error"))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::registry;

    fn built(text: &str) -> Result<std::sync::Arc<dyn crate::fault::FaultFactory>, String> {
        let def: toml::Table = toml::from_str(text).unwrap();
        match registry::build(&FaultDef::from_pairs(def)) {
            Ok(crate::fault::kind::Built::Conn(f)) => Ok(f),
            Ok(other) => Err(format!("{other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn scope_and_h2_error_are_read_and_fin_always_ends_the_connection() {
        let f = built("kind = \"sse_cut\"\nat = \"mid-value\"").unwrap();
        let b = f.h2_body_cut().unwrap();
        assert_eq!(
            (b.scope, b.client_code),
            (CutScope::Stream, ErrorCode::CANCEL)
        );
        let f = built(
            "kind = \"sse_cut\"\nat = \"mid-value\"\nscope = \"connection\"\nh2_error = \"internal_error\"",
        )
        .unwrap();
        let b = f.h2_body_cut().unwrap();
        assert_eq!(
            (b.scope, b.client_code),
            (CutScope::Connection, ErrorCode::INTERNAL_ERROR)
        );
        let f = built("kind = \"sse_cut\"\nat = \"mid-value\"\naction = \"fin\"").unwrap();
        assert_eq!(f.h2_body_cut().unwrap().scope, CutScope::Connection);
    }

    #[test]
    fn unknown_scope_or_error_code_names_the_value_and_the_choices() {
        let e = built("kind = \"sse_cut\"\nat = \"mid-value\"\nh2_error = \"oops\"")
            .err()
            .unwrap();
        assert!(e.contains("oops") && e.contains("refused_stream"), "{e}");
        let e = built("kind = \"sse_cut\"\nat = \"mid-value\"\nscope = \"session\"")
            .err()
            .unwrap();
        assert!(e.contains("session") && e.contains("connection"), "{e}");
    }
}
