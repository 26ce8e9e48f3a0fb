//! The knobs of the lab's LLM endpoints: server defaults (`tearline serve --llm-*`) and the
//! per-request override header [`KNOB_HEADER`], so one server can answer a test's requests
//! with different token counts, rates and first-token delays.
//!
//! Invariants: every knob has a default that makes a fast, complete answer (32 tokens, no
//! pacing, no first-token delay); a malformed override is an error naming the knob and what
//! is allowed, never silently ignored.

use std::time::Duration;

/// Request header overriding the server's knobs for one request, e.g.
/// `x-tearline-lab: tokens=64, rate=200, ttft=150ms, usage=always, tool=none, args-chunk=4`.
pub const KNOB_HEADER: &str = "x-tearline-lab";

/// Largest token count one answer may have (a bound on the lab's memory per request).
pub const MAX_TOKENS: u32 = 100_000;

/// Whether a Chat Completions stream carries its usage chunk (the other two APIs always carry
/// usage: their SDKs' schemas require it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum UsageMode {
    /// As OpenAI does: only when the request sets `stream_options.include_usage`.
    #[default]
    Requested,
    /// Always (as some OpenAI-compatible servers do).
    Always,
    /// Never, even when asked.
    Never,
}

/// Whether the answer is a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolMode {
    /// A tool call iff the request offers a function tool and its `tool_choice` allows one,
    /// and the conversation does not end with a tool result.
    #[default]
    Auto,
    /// Always a text answer.
    None,
    /// A call of this offered tool whenever tools are offered.
    Named(String),
}

/// The knobs of one answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Knobs {
    /// Output tokens of a text answer (before `max_tokens` of the request).
    pub tokens: u32,
    /// Tokens per second after the first (0: as fast as the connection takes them).
    pub rate: f64,
    /// Delay between the response head and the first delta (time to first token).
    pub ttft: Duration,
    /// Usage chunk of Chat Completions streams.
    pub usage: UsageMode,
    /// Text or tool call.
    pub tool: ToolMode,
    /// Bytes of tool-call arguments per delta (at least 1).
    pub args_chunk: usize,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            tokens: 32,
            rate: 0.0,
            ttft: Duration::ZERO,
            usage: UsageMode::Requested,
            tool: ToolMode::Auto,
            args_chunk: 6,
        }
    }
}

/// A malformed [`KNOB_HEADER`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{KNOB_HEADER}: {what}; expected comma-separated key=value with keys tokens (0..={MAX_TOKENS}), rate (tokens/s, 0 = unpaced), ttft (e.g. 150ms), usage (requested|always|never), tool (auto|none|<tool name>), args-chunk (bytes >= 1)"
)]
pub struct KnobError {
    what: String,
}

impl Knobs {
    /// These knobs with the overrides of a [`KNOB_HEADER`] value applied.
    pub fn with_overrides(&self, header: &str) -> Result<Knobs, KnobError> {
        let mut k = self.clone();
        let bad = |what: String| KnobError { what };
        for part in header
            .split([',', ';'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let (key, value) = part
                .split_once('=')
                .map(|(a, b)| (a.trim(), b.trim()))
                .ok_or_else(|| bad(format!("'{part}' has no '='")))?;
            match key {
                "tokens" => {
                    k.tokens = value
                        .parse()
                        .ok()
                        .filter(|&n| n <= MAX_TOKENS)
                        .ok_or_else(|| bad(format!("tokens '{value}' is not 0..={MAX_TOKENS}")))?;
                }
                "rate" => {
                    k.rate = value
                        .parse()
                        .ok()
                        .filter(|r: &f64| r.is_finite() && *r >= 0.0)
                        .ok_or_else(|| bad(format!("rate '{value}' is not a number >= 0")))?;
                }
                "ttft" => {
                    k.ttft = crate::units::parse_duration(value)
                        .map_err(|e| bad(format!("ttft: {e}")))?;
                }
                "usage" => {
                    k.usage = match value {
                        "requested" => UsageMode::Requested,
                        "always" => UsageMode::Always,
                        "never" => UsageMode::Never,
                        _ => return Err(bad(format!("usage '{value}' is unknown"))),
                    };
                }
                "tool" => {
                    k.tool = match value {
                        "auto" => ToolMode::Auto,
                        "none" => ToolMode::None,
                        "" => return Err(bad("tool is empty".to_owned())),
                        name => ToolMode::Named(name.to_owned()),
                    };
                }
                "args-chunk" | "args_chunk" => {
                    k.args_chunk = value
                        .parse()
                        .ok()
                        .filter(|&n: &usize| n >= 1)
                        .ok_or_else(|| bad(format!("args-chunk '{value}' is not >= 1")))?;
                }
                other => return Err(bad(format!("unknown key '{other}'"))),
            }
        }
        Ok(k)
    }

    /// The gap between two deltas at this rate (zero when unpaced).
    pub fn gap(&self) -> Duration {
        if self.rate > 0.0 {
            Duration::try_from_secs_f64(1.0 / self.rate).unwrap_or(Duration::ZERO)
        } else {
            Duration::ZERO
        }
    }
}

/// `tearline serve` flags of the LLM endpoints (the server-wide [`Knobs`]).
#[derive(Debug, Clone, clap::Args)]
pub struct LlmArgs {
    /// Output tokens of an LLM text answer (`/v1/chat/completions`, `/v1/responses`,
    /// `/v1/messages`); a request's `max_tokens` may end it sooner.
    #[arg(long, default_value_t = 32)]
    pub llm_tokens: u32,
    /// Output tokens per second of LLM answers (0 = unpaced).
    #[arg(long, default_value_t = 0.0)]
    pub llm_token_rate: f64,
    /// Time to first token of LLM answers (e.g. 200ms).
    #[arg(long, value_parser = crate::units::parse_duration, default_value = "0ms")]
    pub llm_ttft: Duration,
    /// Usage chunk of Chat Completions streams: as OpenAI (requested), always or never.
    #[arg(long, value_enum, default_value = "requested")]
    pub llm_usage: UsageMode,
}

impl LlmArgs {
    /// The server-wide knobs these flags describe.
    pub fn knobs(&self) -> Knobs {
        Knobs {
            tokens: self.llm_tokens.min(MAX_TOKENS),
            rate: if self.llm_token_rate.is_finite() {
                self.llm_token_rate.max(0.0)
            } else {
                0.0
            },
            ttft: self.llm_ttft,
            usage: self.llm_usage,
            ..Knobs::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_each_key() {
        let k = Knobs::default()
            .with_overrides(
                "tokens=7, rate=50; ttft=20ms, usage=always, tool=get_weather, args-chunk=3",
            )
            .expect("valid");
        assert_eq!(k.tokens, 7);
        assert_eq!(k.rate, 50.0);
        assert_eq!(k.ttft, Duration::from_millis(20));
        assert_eq!(k.usage, UsageMode::Always);
        assert_eq!(k.tool, ToolMode::Named("get_weather".into()));
        assert_eq!(k.args_chunk, 3);
        assert_eq!(k.gap(), Duration::from_millis(20));
    }

    #[test]
    fn a_bad_override_names_the_key_and_the_allowed_keys() {
        for (h, what) in [
            ("tokens=x", "tokens 'x'"),
            ("speed=3", "unknown key 'speed'"),
            ("ttft=5", "ttft:"),
            ("usage=sometimes", "usage 'sometimes'"),
            ("args-chunk=0", "args-chunk '0'"),
            ("tokens", "has no '='"),
        ] {
            let e = Knobs::default().with_overrides(h).expect_err(h).to_string();
            assert!(e.contains(what), "{e}");
            assert!(e.contains("expected comma-separated key=value"), "{e}");
        }
    }
}
