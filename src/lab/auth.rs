//! Lab-only bearer tokens that name their audiences, for reproducing seed 000 (per-tool OAuth
//! resource indicators) without an authorization server.
//!
//! Format (NO cryptography, never use outside the lab): `Authorization: Bearer aud=<uri>[,<uri>…]`,
//! for example `Bearer aud=https://lab/tools/search,https://lab/tools/fetch`. The token is
//! the audience list itself; whoever can write the header holds any audience.
//!
//! Invariant: an event with a resource indicator is authorized iff the token's audience names
//! exactly that indicator or the aggregate resource [`AGGREGATE`] (which covers every tool).

use std::collections::BTreeSet;

/// Resource indicator of the `search` tool.
pub const SEARCH: &str = "https://lab/tools/search";
/// Resource indicator of the `fetch` tool.
pub const FETCH: &str = "https://lab/tools/fetch";
/// Resource indicator of the `blob` tool.
pub const BLOB: &str = "https://lab/tools/blob";
/// Resource indicator of the `progress` tool.
pub const PROGRESS: &str = "https://lab/tools/progress";
/// Resource indicator of the `append` tool.
pub const APPEND: &str = "https://lab/tools/append";
/// The aggregate resource: a token naming it covers every tool.
pub const AGGREGATE: &str = "https://lab";

/// A parsed lab token: the set of audiences it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audience {
    uris: BTreeSet<String>,
}

impl Audience {
    /// Parses an `Authorization` header value; `None` if it is not a lab bearer token with at
    /// least one non-empty audience.
    pub fn from_header(value: &str) -> Option<Audience> {
        let (scheme, token) = value.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        let list = token.trim().strip_prefix("aud=")?;
        let uris: BTreeSet<String> = list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if uris.is_empty() {
            None
        } else {
            Some(Audience { uris })
        }
    }

    /// Whether this audience may receive an event requiring `resource`.
    pub fn covers(&self, resource: &str) -> bool {
        self.uris.contains(resource) || self.uris.contains(AGGREGATE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_names_its_audiences() {
        let a = Audience::from_header(&format!("Bearer aud={SEARCH}, {FETCH}"));
        let a = a.unwrap_or_else(|| panic!("token should parse"));
        assert!(a.covers(SEARCH) && a.covers(FETCH) && !a.covers(BLOB));
    }

    #[test]
    fn aggregate_audience_covers_every_tool() {
        let a = Audience::from_header("bearer aud=https://lab");
        assert!(a.is_some_and(|a| a.covers(FETCH)));
    }

    #[test]
    fn malformed_tokens_are_rejected() {
        for bad in [
            "",
            "Bearer",
            "Bearer x",
            "Basic aud=a",
            "Bearer aud=",
            "Bearer aud=,",
        ] {
            assert_eq!(Audience::from_header(bad), None, "{bad:?}");
        }
    }
}
