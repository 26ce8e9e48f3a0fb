//! `tearline replay --scenario`: which document's run to reproduce.
//!
//! Why: the two seed documents describe the 2025 era (resumable streams); MCP 2026-07-28 has
//! no resumption, so the same cuts tell a different story there. A scenario changes the lab
//! server's era, the phases it runs and the opening lines of the story; the proxy profile and
//! the reports are the same, so runs of different scenarios compare line by line.
//!
//! Invariants: `reset-250ms` (the default) leaves the configuration exactly as it was before
//! scenarios existed (one phase per policy, tool `blob`). A phase's label names its row in the
//! reports (`strict`, `naive`, `retry`) and is unique within a run.

use serde_json::{Value, json};

use crate::lab::config::OnUnauthorized;
use crate::lab::{LabConfig, ProtocolVersion};
use crate::load::Policy;

/// The line `--http2` adds after a scenario's intro: what changes on HTTP/2 and what does not.
pub const HTTP2_INTRO: &str = "over HTTP/2 (h2c): the client's sessions share one connection \
     per 100 and each request is a stream of it. The built-in cut resets the stream \
     (RST_STREAM CANCEL) instead of the TCP connection: the connection and its other streams \
     flow on (a profile with scope = \"connection\" resets the whole connection instead, \
     ending every stream on it). The client resumes with Last-Event-ID on a new stream, and \
     the server's answer to an evicted cursor is the same as over HTTP/1.1.";

/// The profile of `reset-250ms --http2` when none is given, for a `size`-byte result: seed
/// 004's reset as a reset of one *stream* (`RST_STREAM(CANCEL)` to the client, `CANCEL` to the
/// server) at a payload byte drawn uniformly from `[0, size]` of half the SSE streams, which is
/// what an h2 intermediary does where an HTTP/1.1 one resets the TCP connection: the connection
/// and the other streams on it flow on.
///
/// No `outage_ms`: the outage holds *new connections*, and a stream reset leaves the client's
/// connection open, so there is none to hold; the client's resume still waits the lab's
/// `retry: 250` as seed 004's did. The TCP reset stays reachable with the user's own profile
/// (`scope = "connection"`, see [`http2_connection_profile`]).
pub fn http2_profile(size: u64) -> String {
    format!(
        r#"description = "seed 004 over HTTP/2: a stream reset (RST_STREAM CANCEL) at a random byte of half the SSE streams; the connection and its other streams flow on"
[[fault]]
name = "torn-stream"
kind = "sse_cut"
direction = "downstream"
at = "any-byte"
range = [0, {size}]
action = "reset"
scope = "stream"
h2_error = "cancel"
probability = 0.5
"#
    )
}

/// `reset-250ms` over HTTP/2 as a TCP reset: the same cut with `scope = "connection"` (every
/// stream on the connection ends), then the documents' 250 ms outage for new connections.
/// Not a default of any scenario: the text a user's `--profile` holds to see the connection-wide
/// story (and what the tests compare the stream scope with).
pub fn http2_connection_profile(size: u64) -> String {
    format!(
        r#"description = "seed 004 over HTTP/2 as a TCP reset: the connection reset at a random byte of half the SSE streams, then a 250 ms outage"
[[fault]]
name = "torn-connection"
kind = "sse_cut"
direction = "downstream"
at = "any-byte"
range = [0, {size}]
action = "reset"
scope = "connection"
outage_ms = 250
probability = 0.5
"#
    )
}

/// A replay scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Scenario {
    /// Seed 004: a 250 ms reset at a random byte of half the streams; 2025-11-25 resumption
    /// against a lab whose ring evicted the cursor (continuation instead of replay).
    #[default]
    #[value(name = "reset-250ms")]
    Reset250ms,
    /// Seed 000: a `fetch` call read under a token with per-tool audiences (search and fetch);
    /// after a cut the client's refreshed token covers only `search`, and the lab (auth on,
    /// `on-unauthorized = silent-end`) ends the resumed stream cleanly at the first `fetch`
    /// event. Strict notices the pending call and re-authorizes; naive loses it silently.
    #[value(name = "audience-narrowing")]
    AudienceNarrowing,
    /// MCP 2026-07-28: the same cuts against a stateless lab. Nothing can be resumed: the
    /// strict client re-issues the (idempotent) `blob` call with a new id, the naive one takes
    /// the truncated stream as the answer and loses the call silently; then a careless retry
    /// layer re-issues the NOT idempotent `append` and the audit reports `reexecuted`.
    Stateless,
    /// LLM token streams (OpenAI Chat Completions against the lab): half the answers end with
    /// a clean end of the body mid-token or just before the completion signal
    /// (`profiles/llm-truncation.toml`). The naive client takes them as complete (the audit:
    /// `llm-truncated`, a loss); the strict client notices the missing completion signal and
    /// re-sends with the same `Idempotency-Key` (the audit: `llm-retried`).
    #[value(name = "llm-truncation")]
    LlmTruncation,
    /// HTTP/2 only (implies `--http2`): a gateway sends `GOAWAY(NO_ERROR)` 120 ms into every
    /// connection and closes it 60 ms later (an idle timeout, a rolling deploy), while calls
    /// stream slow progress (`progress`: 12 events 20 ms apart). The close cuts the streams
    /// still in flight. The naive client takes the graceful GOAWAY as a normal end and loses
    /// those calls silently; the strict client resumes them with Last-Event-ID on a new
    /// connection.
    Goaway,
    /// HTTP/2 only (implies `--http2`): a buffering hop holds an SSE response's HEADERS until
    /// its first DATA (`profiles/h2-hold-headers.toml`) in front of a 2025-06-18 lab (no
    /// priming event) whose tool is slow to its first event (`progress`: 400 ms before it).
    /// The naive client waits for the head as long as its call timeout, blind; the strict one
    /// gives up on the head after 150 ms, re-sends once under the same `Idempotency-Key` and
    /// reports `head-timeout`. The report's `response-head` histogram names the held time.
    #[value(name = "hold-headers")]
    HoldHeaders,
}

/// The built-in profile of `hold-headers` (the shipped `profiles/h2-hold-headers.toml`).
pub const HOLD_PROFILE: &str = include_str!("../../profiles/h2-hold-headers.toml");

/// `hold-headers`' tool is slow to its first event: `progress` with one event this many ms
/// after the call, then its result.
pub const HOLD_FIRST_EVENT_MS: u64 = 400;

/// The strict client's budget for a response head in `hold-headers` (well under the tool's
/// first event, as a client that expects an SSE head at once sets it).
pub const HOLD_HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(150);

/// Requests one strict call of `hold-headers` may send: the call, then one re-send.
pub const HOLD_STRICT_ATTEMPTS: u32 = 2;

/// The built-in profile of `goaway`: the shipped `profiles/h2-goaway.toml`'s gateway, sooner
/// (120 ms into each connection, a 60 ms drain) so that a short run meets it on every
/// connection and its close falls inside a call's stream.
pub const GOAWAY_PROFILE: &str = r#"description = "an HTTP/2 gateway that sends GOAWAY(NO_ERROR) 120 ms into every connection and closes it 60 ms later (idle timeout, rolling deploy)"
[[fault]]
name = "gateway-goaway"
kind = "goaway"
to = "client"
after_ms = 120
code = "no_error"
drain_ms = 60
"#;

/// The slow stream of `goaway`'s calls: this many `progress` events, this many ms apart.
pub const GOAWAY_PROGRESS: (u64, u64) = (12, 20);

/// The built-in profile of `llm-truncation` (the shipped `profiles/llm-truncation.toml`).
pub const LLM_PROFILE: &str = include_str!("../../profiles/llm-truncation.toml");

/// The endpoint the `llm-truncation` scenario's clients call.
pub const LLM_PATH: &str = "/v1/chat/completions";

/// One phase of a scenario: a client policy, the tool it calls, how it treats annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct PhasePlan {
    /// The client policy.
    pub policy: Policy,
    /// The phase's name in reports and logs (unique within a run).
    pub label: &'static str,
    /// The tool called.
    pub tool: &'static str,
    /// Its arguments; `None`: the `blob` arguments of the run (`size`, `lines`).
    pub args: Option<Value>,
    /// Bearer token of every request (lab audience token), if any.
    pub token: Option<&'static str>,
    /// Token of a call's first resume after a cut (seed 000's narrowed refresh), if any.
    pub resume_token: Option<&'static str>,
    /// Budget of a call's response head (`None`: the call's timeout; see
    /// `LoadConfig::head_timeout`).
    pub head_timeout: Option<std::time::Duration>,
    /// Requests one call may send (`None`: the replay's default).
    pub attempts: Option<u32>,
}

/// Seed 000's tokens: per-tool audiences covering both tools of the story, then the refresh
/// that a least-privilege authorization server narrowed to `search`.
pub const PER_TOOL_TOKEN: &str = "aud=https://lab/tools/search,https://lab/tools/fetch";
/// The narrowed refresh token of seed 000.
pub const NARROWED_TOKEN: &str = "aud=https://lab/tools/search";

/// The profile of `audience-narrowing` when none is given: seed 000's drop "after event 41" —
/// a reset between two events (never inside one, so the story is the audience, not a torn
/// event) of half the streams, then the documents' 250 ms outage.
pub const AUDIENCE_PROFILE: &str = r#"description = "seed 000: a reset between two events of half the streams, then a 250 ms outage"
[[fault]]
name = "drop-between-events"
kind = "sse_cut"
direction = "downstream"
at = "boundary"
events = [2, 6]
action = "reset"
outage_ms = 250
probability = 0.5
"#;

impl PhasePlan {
    /// The documents' phase: `policy` calling `blob`.
    pub fn blob(policy: Policy) -> PhasePlan {
        PhasePlan {
            policy,
            label: policy.as_str(),
            tool: "blob",
            args: None,
            token: None,
            resume_token: None,
            head_timeout: None,
            attempts: None,
        }
    }
}

impl Scenario {
    /// Adjusts the lab configuration for this scenario.
    pub fn apply(self, lab: &mut LabConfig) {
        match self {
            Scenario::Stateless => {
                lab.protocol = ProtocolVersion::V2026_07_28;
                lab.narrow = true;
            }
            Scenario::AudienceNarrowing => {
                lab.auth = true;
                lab.on_unauthorized = OnUnauthorized::SilentEnd;
            }
            Scenario::LlmTruncation => {
                // 24-token answers at 400 tokens/s after 20 ms: every cut position occurs, and
                // a phase of 24 requests takes a few seconds.
                lab.llm = crate::lab::llm::Knobs {
                    tokens: 24,
                    rate: 400.0,
                    ttft: std::time::Duration::from_millis(20),
                    ..crate::lab::llm::Knobs::default()
                };
            }
            Scenario::HoldHeaders => {
                // 2025-06-18 has no priming event: a stream's first DATA is its first event.
                lab.protocol = ProtocolVersion::V2025_06_18;
                lab.narrow = true;
            }
            Scenario::Reset250ms | Scenario::Goaway => {}
        }
    }

    /// True if and only if the scenario's failure exists only on HTTP/2 (it implies
    /// `--http2`).
    pub fn implies_http2(self) -> bool {
        matches!(self, Scenario::Goaway | Scenario::HoldHeaders)
    }

    /// True if and only if the scenario's clients call an LLM endpoint (not MCP).
    pub fn is_llm(self) -> bool {
        self == Scenario::LlmTruncation
    }

    /// The built-in profile of this scenario, used when the user names none (`None`: the
    /// documents' `reset-250ms` profile).
    pub fn default_profile(self) -> Option<&'static str> {
        match self {
            Scenario::AudienceNarrowing => Some(AUDIENCE_PROFILE),
            Scenario::LlmTruncation => Some(LLM_PROFILE),
            Scenario::Goaway => Some(GOAWAY_PROFILE),
            Scenario::HoldHeaders => Some(HOLD_PROFILE),
            Scenario::Reset250ms | Scenario::Stateless => None,
        }
    }

    /// The phases to run for the chosen `policies`, in order: one per policy calling `blob`
    /// (`fetch` under per-tool tokens for `audience-narrowing`). In `stateless` a `retry`
    /// policy is the `retry` phase: the client re-sending regardless of annotations, calling
    /// `append` (padded to `size` bytes, so cuts fall in its result as they fall in `blob`'s);
    /// `stateless` adds that phase last when `policies` has no `retry`.
    pub fn phases(self, policies: &[Policy], size: u64) -> Vec<PhasePlan> {
        if self == Scenario::AudienceNarrowing {
            return policies
                .iter()
                .map(|p| PhasePlan {
                    tool: "fetch",
                    args: Some(json!({"url": "https://lab/doc", "n": 8})),
                    token: Some(PER_TOOL_TOKEN),
                    resume_token: Some(NARROWED_TOKEN),
                    ..PhasePlan::blob(*p)
                })
                .collect();
        }
        if self == Scenario::LlmTruncation {
            return policies
                .iter()
                .map(|p| PhasePlan {
                    tool: "chat-completions",
                    ..PhasePlan::blob(*p)
                })
                .collect();
        }
        if self == Scenario::Goaway {
            let (n, interval) = GOAWAY_PROGRESS;
            return policies
                .iter()
                .map(|p| PhasePlan {
                    tool: "progress",
                    args: Some(json!({"n": n, "interval": interval})),
                    ..PhasePlan::blob(*p)
                })
                .collect();
        }
        if self == Scenario::HoldHeaders {
            return policies
                .iter()
                .map(|&p| {
                    let strict = p != Policy::Naive;
                    PhasePlan {
                        tool: "progress",
                        args: Some(json!({"n": 1, "interval": HOLD_FIRST_EVENT_MS})),
                        head_timeout: strict.then_some(HOLD_HEAD_TIMEOUT),
                        attempts: strict.then_some(HOLD_STRICT_ATTEMPTS),
                        ..PhasePlan::blob(p)
                    }
                })
                .collect();
        }
        let retry_phase = PhasePlan {
            tool: "append",
            args: Some(json!({"amount": 1, "pad": size})),
            ..PhasePlan::blob(Policy::Retry)
        };
        let mut out: Vec<PhasePlan> = policies
            .iter()
            .map(|&p| match (self, p) {
                (Scenario::Stateless, Policy::Retry) => retry_phase.clone(),
                _ => PhasePlan::blob(p),
            })
            .collect();
        if self == Scenario::Stateless && !policies.contains(&Policy::Retry) {
            out.push(retry_phase);
        }
        out
    }

    /// The opening of the story, as the scenario's document tells it.
    pub fn intro(self) -> &'static str {
        match self {
            Scenario::Reset250ms => {
                "scenario reset-250ms (seed 004): a 4 MB tool result is streamed, a proxy resets \
                 the connection at a random byte of half the streams for 250 ms; the client \
                 resumes with Last-Event-ID."
            }
            Scenario::AudienceNarrowing => {
                "scenario audience-narrowing (seed 000): a client calls `fetch` with a token \
                 whose audience names each tool it uses (search, fetch); the connection drops \
                 between two events; the client refreshes its token, the authorization server \
                 mints it for `search` only, and the client resumes with Last-Event-ID under \
                 it. The server ends the stream cleanly at the first `fetch` event."
            }
            Scenario::Stateless => {
                "scenario stateless (MCP 2026-07-28): the same cuts, but streams carry no event \
                 ids and cannot be resumed; a cut request is lost unless the client re-issues it \
                 with a new id — safe only for a tool declared idempotent (`blob` is; `append`, \
                 which adds to a server-side counter, is not: the `retry` phase re-issues it \
                 anyway and the audit reports `reexecuted`)."
            }
            Scenario::Goaway => {
                "scenario goaway (HTTP/2): calls stream slow progress (12 events, 20 ms apart) \
                 through a gateway that ends every connection gracefully: GOAWAY(NO_ERROR) 120 \
                 ms in, the close 60 ms later (an idle timeout, a rolling deploy). Streams at or \
                 below the GOAWAY's last stream id may finish during the drain; the close cuts \
                 those still in flight. A client must resume them on a new connection, not take \
                 the graceful GOAWAY as a normal end."
            }
            Scenario::HoldHeaders => {
                "scenario hold-headers (HTTP/2): a buffering hop forwards an SSE response's \
                 HEADERS only with its first DATA frame. The lab speaks MCP 2025-06-18 (no \
                 priming event) and its tool (`progress`) sends its first event 400 ms after \
                 the call, so for 400 ms the client sees no response at all, not even the \
                 200 the server sent at once. Later header blocks of the connection wait behind \
                 a held one (HPACK order)."
            }
            Scenario::LlmTruncation => {
                "scenario llm-truncation: streaming chat completions (24-token answers) pass \
                 through a proxy that ends half the answers with a clean end of the body — \
                 mid-token or just before the completion signal (finish_reason). The body \
                 ends as if complete; only the missing completion signal says otherwise."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scenario_runs_one_blob_phase_per_policy_and_stateless_adds_retry() {
        let both = [Policy::Strict, Policy::Naive];
        let plain = Scenario::Reset250ms.phases(&both, 10);
        assert_eq!(
            plain,
            vec![
                PhasePlan::blob(Policy::Strict),
                PhasePlan::blob(Policy::Naive)
            ]
        );
        let st = Scenario::Stateless.phases(&both, 10);
        let labels: Vec<&str> = st.iter().map(|p| p.label).collect();
        assert_eq!(labels, ["strict", "naive", "retry"]);
        assert!(st[2].policy == Policy::Retry && st[2].tool == "append");
        let chosen = Scenario::Stateless.phases(&[Policy::Retry, Policy::Naive], 10);
        let labels: Vec<&str> = chosen.iter().map(|p| p.label).collect();
        assert_eq!(labels, ["retry", "naive"]);
        let aud = Scenario::AudienceNarrowing.phases(&both, 10);
        assert!(
            aud.iter()
                .all(|p| p.tool == "fetch" && p.resume_token == Some(NARROWED_TOKEN))
        );
        let profile = crate::profile::parse(AUDIENCE_PROFILE, "audience").expect("profile parses");
        assert_eq!(profile.faults.len(), 1);
        let goaway = Scenario::Goaway.phases(&both, 10);
        assert!(
            goaway
                .iter()
                .all(|p| p.tool == "progress" && p.args.is_some())
        );
        assert!(Scenario::Goaway.implies_http2() && !Scenario::Reset250ms.implies_http2());
        let hold = Scenario::HoldHeaders.phases(&both, 10);
        assert_eq!(hold[0].head_timeout, Some(HOLD_HEAD_TIMEOUT));
        assert_eq!(
            hold[1].head_timeout, None,
            "naive waits as long as its call"
        );
        assert!(Scenario::HoldHeaders.implies_http2());
        let mut lab = LabConfig::default();
        Scenario::HoldHeaders.apply(&mut lab);
        assert!(
            !lab.protocol.primes(),
            "a priming event would release the held heads"
        );
        for text in [
            GOAWAY_PROFILE.to_owned(),
            HOLD_PROFILE.to_owned(),
            http2_profile(10),
            http2_connection_profile(10),
        ] {
            let p = crate::profile::parse(&text, "built in").expect("profile parses");
            assert_eq!(p.faults.len(), 1, "{text}");
        }
    }
}
