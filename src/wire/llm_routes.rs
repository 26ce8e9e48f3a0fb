//! Which request paths are LLM APIs: the paths tearline knows ([`LlmApi::from_path`]: the
//! OpenAI and Anthropic endpoints after any prefix, Azure's deployment paths) and the routes a
//! user declares for the others (`[[llm_route]]` in a profile, `--llm-route PATH=API`) — a
//! gateway at `/gen/stream` that speaks Chat Completions is otherwise only an SSE stream.
//!
//! Why declared, never guessed: an LLM stream is recognised by its request path, not its
//! bytes (a verdict must not depend on what a payload happens to look like). Instead, the
//! first `POST` to an unknown path answered with `text/event-stream` (not a JSON-RPC call)
//! is noticed once per path in the log, saying how to declare it.
//!
//! Invariants: declared routes are matched before the known paths, in declaration order (a
//! pattern ending in `*` is a prefix, else the whole path; the query is ignored); the set of
//! paths already noticed is bounded ([`MAX_NOTICED`]); matching allocates nothing.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use crate::vocab::LlmApi;

/// Distinct unrecognised paths remembered for the once-per-path notice.
pub const MAX_NOTICED: usize = 1024;

/// The LLM routes of a proxy (see the module doc).
#[derive(Debug, Default)]
pub struct LlmRoutes {
    declared: Vec<(String, LlmApi)>,
    noticed: Mutex<HashSet<String>>,
}

impl LlmRoutes {
    /// Routes with `declared` (pattern, API) pairs before the known paths.
    pub fn new(declared: Vec<(String, LlmApi)>) -> Self {
        LlmRoutes {
            declared,
            noticed: Mutex::default(),
        }
    }

    /// The routes with nothing declared (the known paths only), shared.
    pub fn known() -> Arc<LlmRoutes> {
        static KNOWN: OnceLock<Arc<LlmRoutes>> = OnceLock::new();
        KNOWN.get_or_init(Arc::default).clone()
    }

    /// The declared (pattern, API) pairs.
    pub fn declared(&self) -> &[(String, LlmApi)] {
        &self.declared
    }

    /// The API the request target `path` names, if any.
    pub fn api_of(&self, path: &str) -> Option<LlmApi> {
        let bare = path.split(['?', '#']).next().unwrap_or("");
        self.declared
            .iter()
            .find(|(p, _)| match p.strip_suffix('*') {
                Some(prefix) => bare.starts_with(prefix),
                None => bare == p,
            })
            .map(|(_, api)| *api)
            .or_else(|| LlmApi::from_path(bare))
    }

    /// The unrecognised paths noticed so far, sorted.
    pub fn noticed(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .noticed
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// True the first time `path` (query ignored) is offered, while fewer than
    /// [`MAX_NOTICED`] paths were: whether to log the notice for it.
    pub fn first_notice(&self, path: &str) -> bool {
        let bare = path.split(['?', '#']).next().unwrap_or("");
        let Ok(mut seen) = self.noticed.lock() else {
            return false;
        };
        if seen.len() >= MAX_NOTICED || seen.contains(bare) {
            return false;
        }
        seen.insert(bare.to_owned())
    }
}

/// The API named `name` (`chat-completions`, `responses`, `messages`).
pub fn api_named(name: &str) -> Result<LlmApi, String> {
    LlmApi::ALL
        .into_iter()
        .find(|a| a.as_str() == name)
        .ok_or_else(|| {
            let known: Vec<&str> = LlmApi::ALL.iter().map(|a| a.as_str()).collect();
            format!("unknown LLM API '{name}'; known: {}", known.join(", "))
        })
}

/// A route pattern as declared: a path starting with `/` (a trailing `*` makes it a prefix).
pub fn check_pattern(path: &str) -> Result<(), String> {
    if path.starts_with('/') && !path.contains(['?', '#', ' ']) {
        Ok(())
    } else {
        Err(format!(
            "an LLM route path starts with '/' and has no query (a trailing * makes it a prefix), got '{path}'"
        ))
    }
}

/// `--llm-route PATH=API`.
pub fn parse_route(s: &str) -> Result<(String, LlmApi), String> {
    let (path, api) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("expected PATH=API (e.g. /gen/*=chat-completions), got '{s}'"))?;
    check_pattern(path)?;
    Ok((path.to_owned(), api_named(api)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_routes_come_first_and_the_known_paths_still_count() {
        let r = LlmRoutes::new(vec![
            ("/gen/stream".into(), LlmApi::ChatCompletions),
            ("/claude/*".into(), LlmApi::Messages),
        ]);
        assert_eq!(r.api_of("/gen/stream?x=1"), Some(LlmApi::ChatCompletions));
        assert_eq!(r.api_of("/claude/any/thing"), Some(LlmApi::Messages));
        assert_eq!(r.api_of("/v1/responses"), Some(LlmApi::Responses));
        assert_eq!(r.api_of("/gen/stream/more"), None);
        assert_eq!(r.api_of("/gen"), None);
        assert_eq!(LlmRoutes::known().api_of("/gen/stream"), None);
    }

    #[test]
    fn routes_parse_from_flags_and_bad_ones_say_why() {
        assert_eq!(
            parse_route("/gen/*=responses"),
            Ok(("/gen/*".to_owned(), LlmApi::Responses))
        );
        assert!(parse_route("/gen").is_err_and(|e| e.contains("PATH=API")));
        assert!(parse_route("/gen=chat").is_err_and(|e| e.contains("chat-completions")));
        assert!(parse_route("gen=messages").is_err_and(|e| e.contains("starts with '/'")));
    }

    #[test]
    fn an_unrecognised_path_is_noticed_once() {
        let r = LlmRoutes::default();
        assert!(r.first_notice("/gen/stream?a=1"));
        assert!(!r.first_notice("/gen/stream?a=2"));
        assert!(r.first_notice("/other"));
    }
}
