//! Request targets as tearline writes them: the path and the query's parameter *names*, never
//! their values.
//!
//! Why: APIs take credentials in the query string (`?key=…` for Gemini, `?api-version=…&sig=…`
//! for Azure SAS URLs, tokens in EventSource URLs, which cannot send headers). Cut records,
//! findings, `GET /cuts`, logs and reports name the request they are about; they must not leak
//! a key. The audit still tells streams apart by the whole target (it keeps it in memory only,
//! for matching, and writes nothing of it but this form).

use std::borrow::Cow;

/// `target` with every query value replaced by `…` (`/v1/x?key=…&alt=…`); a fragment is
/// dropped. Unchanged (borrowed) when there is no query or fragment.
pub fn target(target: &str) -> Cow<'_, str> {
    let Some(cut) = target.find(['?', '#']) else {
        return Cow::Borrowed(target);
    };
    let (path, rest) = target.split_at(cut);
    let mut out = String::with_capacity(target.len());
    out.push_str(path);
    if let Some(query) = rest.strip_prefix('?') {
        let query = query.split('#').next().unwrap_or("");
        out.push('?');
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((name, _)) => {
                    out.push_str(name);
                    out.push_str("=…");
                }
                None => out.push_str(pair),
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn query_values_are_replaced_and_names_kept() {
        assert_eq!(
            target("/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSECRET"),
            "/v1beta/models/g:streamGenerateContent?alt=…&key=…"
        );
        assert_eq!(
            target("/openai/deployments/d/chat/completions?api-version=2024-10-21"),
            "/openai/deployments/d/chat/completions?api-version=…"
        );
        assert_eq!(target("/events?flag&token=t#frag"), "/events?flag&token=…");
        assert_eq!(target("/mcp#x"), "/mcp");
    }

    #[test]
    fn a_target_without_query_is_borrowed_unchanged() {
        assert!(matches!(target("/mcp"), std::borrow::Cow::Borrowed("/mcp")));
        assert_eq!(target("/events?"), "/events?");
    }
}
