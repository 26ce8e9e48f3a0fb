//! The vocabulary the folders trade: which way bytes flow ([`Direction`]), how a cut ends a
//! connection ([`CutAction`]), what an outage does to new connections ([`OutageMode`]) and what
//! a fault may know of an SSE response stream ([`StreamInfo`]), and which LLM streaming API a
//! request speaks ([`LlmApi`]).
//!
//! It exists so that `wire`, `fault`, `proxy` and `audit` share these types without importing
//! each other for them. Invariants: the types are plain data (no behaviour beyond their
//! names); their serialized names are the ones profiles, logs and the control API use, and
//! they are defined here only (no re-exports at other paths).

use std::fmt;

/// The protocol a connection speaks, when it is not HTTP/1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireProtocol {
    /// HTTP/1.1 (the default; not announced).
    Http1,
    /// HTTP/2 over cleartext TCP, with prior knowledge (the connection preface).
    H2c,
    /// HTTP/2 over TLS (ALPN `h2`).
    H2,
}

impl WireProtocol {
    /// `http1`, `h2c` or `h2`, as reports write it.
    pub fn as_str(self) -> &'static str {
        match self {
            WireProtocol::Http1 => "http1",
            WireProtocol::H2c => "h2c",
            WireProtocol::H2 => "h2",
        }
    }
}

/// The direction of a pump. `Upstream` carries client→server bytes, `Downstream` server→client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client → server.
    Upstream,
    /// Server → client.
    Downstream,
}

impl Direction {
    /// `"upstream"` or `"downstream"`, the names profiles and the control API use.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Upstream => "upstream",
            Direction::Downstream => "downstream",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a cut ends the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CutAction {
    /// RST to the client (SO_LINGER 0), and the upstream side closed.
    Reset,
    /// Orderly close (FIN) to the client, and the upstream side closed.
    Fin,
    /// The proxy ends the chunked body itself with `0\r\n\r\n` (a "normal" end of stream), then
    /// closes.
    CleanEnd,
}

impl CutAction {
    /// `reset`, `fin` or `clean-end`.
    pub fn as_str(self) -> &'static str {
        match self {
            CutAction::Reset => "reset",
            CutAction::Fin => "fin",
            CutAction::CleanEnd => "clean-end",
        }
    }
}

/// What happens to new connections during an outage window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutageMode {
    /// Refused with RST (accepted and reset at once).
    Refuse,
    /// Accepted and held (no upstream connect, no bytes) until the window ends, then served.
    Hold,
}

impl OutageMode {
    /// `refuse` or `hold`.
    pub fn as_str(self) -> &'static str {
        match self {
            OutageMode::Refuse => "refuse",
            OutageMode::Hold => "hold",
        }
    }
}

/// What a fault may know of an SSE response stream: its request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// Per-connection response sequence number (pairs with `Observation::Request::seq`).
    pub seq: u64,
    /// Request method (`GET` when the response had no visible request).
    pub method: String,
    /// Request target.
    pub path: String,
    /// `Mcp-Session-Id` of the response or its request.
    pub session: Option<String>,
    /// The request carried `Last-Event-ID`: this stream is a resume leg (else a first leg).
    pub resume: bool,
}

/// The LLM streaming APIs tearline knows, recognised by request path only (never guessed from
/// the bytes): the lab serves them, the observer follows them, the load client drives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LlmApi {
    /// OpenAI Chat Completions, `POST /v1/chat/completions` (and every OpenAI-compatible
    /// server: `data:` chunks, `finish_reason`, `data: [DONE]`).
    ChatCompletions,
    /// OpenAI Responses, `POST /v1/responses` (typed `response.*` events).
    Responses,
    /// Anthropic Messages, `POST /v1/messages` (`message_start` … `message_stop`).
    Messages,
}

impl LlmApi {
    /// Every API, in a fixed order.
    pub const ALL: [LlmApi; 3] = [LlmApi::ChatCompletions, LlmApi::Responses, LlmApi::Messages];

    /// The API a request target names: its path (query string ignored), after any prefix (a
    /// gateway's base URL), ends with the API's endpoint (`/v1/chat/completions`,
    /// `/team-a/openai/v1/chat/completions`, `/v1/messages?beta=true`), or is one of the
    /// unversioned forms servers also use: `…/chat/completions` (Azure's
    /// `/openai/deployments/{d}/chat/completions?api-version=…`, servers without `/v1`) and
    /// Azure's `/openai/responses`. A bare `…/messages` or `…/responses` is not enough: MCP
    /// servers and other APIs use those names.
    pub fn from_path(path: &str) -> Option<LlmApi> {
        let path = path.split(['?', '#']).next().unwrap_or("");
        if let Some(api) = LlmApi::ALL
            .into_iter()
            .find(|api| path.ends_with(api.endpoint()))
        {
            return Some(api);
        }
        if path.ends_with("/chat/completions") {
            Some(LlmApi::ChatCompletions)
        } else if path.ends_with("/openai/responses") {
            Some(LlmApi::Responses)
        } else {
            None
        }
    }

    /// The endpoint path of the API (`/v1/…`).
    pub fn endpoint(self) -> &'static str {
        match self {
            LlmApi::ChatCompletions => "/v1/chat/completions",
            LlmApi::Responses => "/v1/responses",
            LlmApi::Messages => "/v1/messages",
        }
    }

    /// `chat-completions`, `responses` or `messages`: the name in logs, findings and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            LlmApi::ChatCompletions => "chat-completions",
            LlmApi::Responses => "responses",
            LlmApi::Messages => "messages",
        }
    }
}

impl fmt::Display for LlmApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::LlmApi;

    #[test]
    fn llm_apis_are_recognised_after_any_prefix_and_in_azure_and_unversioned_forms() {
        for (path, api) in [
            ("/v1/chat/completions", LlmApi::ChatCompletions),
            (
                "/gw/team-a/v1/chat/completions?x=1",
                LlmApi::ChatCompletions,
            ),
            (
                "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
                LlmApi::ChatCompletions,
            ),
            ("/chat/completions", LlmApi::ChatCompletions),
            ("/api/openai/chat/completions", LlmApi::ChatCompletions),
            ("/base/v1/responses", LlmApi::Responses),
            ("/openai/responses?api-version=preview", LlmApi::Responses),
            ("/anthropic/v1/messages?beta=true", LlmApi::Messages),
        ] {
            assert_eq!(LlmApi::from_path(path), Some(api), "{path}");
        }
    }

    #[test]
    fn paths_that_only_resemble_an_llm_api_are_not_one() {
        for path in [
            "/messages",
            "/mcp/messages",
            "/responses",
            "/v1/chat",
            "/chat/completions/extra",
            "/v1/chat/completionsx",
            "/mcp",
        ] {
            assert_eq!(LlmApi::from_path(path), None, "{path}");
        }
    }
}
