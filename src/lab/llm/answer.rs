//! The lab's answer to one LLM request, decided before any byte is written: text of a known
//! number of tokens, or one tool call whose JSON arguments are streamed in pieces.
//!
//! Invariants: the answer is a pure function of (request, knobs, request index): the same
//! request on a fresh server gives the same bytes. Token `k` of every text answer is
//! [`token`]`(k)`, so a client (or a test) knows the complete text from the token count alone
//! ([`text`]). Usage counts are exact: output tokens = text tokens or argument pieces.

use super::args;
use super::knobs::{Knobs, ToolMode};
use super::request::{LlmRequest, RequestError, ToolChoice};

/// The words text answers cycle through (the first token has no leading space).
const WORDS: [&str; 12] = [
    " Tearline",
    " lab",
    " answers",
    " one",
    " token",
    " at",
    " a",
    " time",
    ",",
    " in",
    " order",
    ".",
];

/// Token `k` of every text answer.
pub fn token(k: u32) -> &'static str {
    let w = WORDS[k as usize % WORDS.len()];
    if k == 0 { w.trim_start() } else { w }
}

/// The complete text of an answer of `n` tokens.
pub fn text(n: u32) -> String {
    (0..n).map(token).collect()
}

/// How the answer ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Natural end (`stop` / `end_turn` / `completed`).
    Stop,
    /// The request's token limit ended it (`length` / `max_tokens` / `incomplete`).
    Length,
    /// A tool call (`tool_calls` / `tool_use` / `completed`).
    ToolCall,
}

/// What the answer carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Text of this many tokens.
    Text {
        /// Tokens.
        tokens: u32,
    },
    /// One tool call.
    Tool {
        /// The tool's name.
        name: String,
        /// Its complete arguments (compact JSON).
        arguments: String,
        /// The argument pieces, one per delta, in order (their concatenation is `arguments`).
        pieces: Vec<String>,
    },
}

/// One planned answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Server-wide request index (the ids' suffix).
    pub index: u64,
    /// The model named in the answer.
    pub model: String,
    /// Text or tool call.
    pub output: Output,
    /// How it ends.
    pub finish: Finish,
    /// Usage: input tokens.
    pub input_tokens: u32,
}

impl Answer {
    /// Decides the answer to `req` under `knobs`.
    pub fn plan(req: &LlmRequest, knobs: &Knobs, index: u64) -> Result<Answer, RequestError> {
        let tool = match (&knobs.tool, &req.choice) {
            (ToolMode::None, _) | (ToolMode::Auto, ToolChoice::None) => None,
            (ToolMode::Named(n), _) => {
                if req.tools.is_empty() {
                    None
                } else {
                    Some(req.tools.iter().find(|t| &t.name == n).ok_or_else(|| {
                        RequestError(format!(
                            "x-tearline-lab asks for tool '{n}', but the request offers only: {}",
                            names(req)
                        ))
                    })?)
                }
            }
            (ToolMode::Auto, ToolChoice::Named(n)) => {
                Some(req.tools.iter().find(|t| &t.name == n).ok_or_else(|| {
                    RequestError(format!(
                        "tool_choice names '{n}', but the request offers only: {}",
                        names(req)
                    ))
                })?)
            }
            (ToolMode::Auto, ToolChoice::Required) => req.tools.first(),
            (ToolMode::Auto, ToolChoice::Auto) => {
                req.tools.first().filter(|_| !req.after_tool_result)
            }
        };
        let (output, finish) = match tool {
            Some(t) => {
                let arguments = args::arguments(&t.schema);
                let pieces = split(&arguments, knobs.args_chunk);
                let output = Output::Tool {
                    name: t.name.clone(),
                    arguments,
                    pieces,
                };
                (output, Finish::ToolCall)
            }
            None => match req.max_tokens {
                Some(max) if max < knobs.tokens => (Output::Text { tokens: max }, Finish::Length),
                _ => (
                    Output::Text {
                        tokens: knobs.tokens,
                    },
                    Finish::Stop,
                ),
            },
        };
        Ok(Answer {
            index,
            model: req.model.clone(),
            output,
            finish,
            input_tokens: req.prompt_tokens,
        })
    }

    /// Output tokens (deltas).
    pub fn output_tokens(&self) -> u32 {
        match &self.output {
            Output::Text { tokens } => *tokens,
            Output::Tool { pieces, .. } => u32::try_from(pieces.len()).unwrap_or(u32::MAX),
        }
    }

    /// The answer's id suffix (`lab` and the index, zero-padded).
    pub fn suffix(&self) -> String {
        format!("lab{:08}", self.index)
    }
}

fn names(req: &LlmRequest) -> String {
    let n: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    if n.is_empty() {
        "(no function tools)".to_owned()
    } else {
        n.join(", ")
    }
}

/// `s` in pieces of `chunk` bytes (at least 1), cut on character boundaries.
fn split(s: &str, chunk: usize) -> Vec<String> {
    let chunk = chunk.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    while start < s.len() {
        let mut end = (start + chunk).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        out.push(s[start..end].to_owned());
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::LlmApi;

    fn req(body: &str) -> LlmRequest {
        LlmRequest::parse(LlmApi::ChatCompletions, body.as_bytes()).expect("request")
    }

    #[test]
    fn text_is_the_concatenation_of_its_tokens() {
        assert_eq!(text(4), "Tearline lab answers one");
        assert_eq!(token(12), " Tearline");
        assert_eq!(
            text(14).len(),
            (0..14).map(|k| token(k).len()).sum::<usize>()
        );
    }

    #[test]
    fn max_tokens_below_the_knob_ends_with_length() {
        let a = Answer::plan(&req(r#"{"max_tokens":3}"#), &Knobs::default(), 1).expect("plan");
        assert_eq!(a.output, Output::Text { tokens: 3 });
        assert_eq!(a.finish, Finish::Length);
    }

    #[test]
    fn offered_tools_get_a_call_of_the_first_unless_a_tool_result_ends_the_turn() {
        let tools = r#""tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}},{"type":"function","function":{"name":"b"}}]"#;
        let a = Answer::plan(&req(&format!("{{{tools}}}")), &Knobs::default(), 1).expect("plan");
        let Output::Tool {
            name,
            arguments,
            pieces,
        } = &a.output
        else {
            panic!("tool call expected: {a:?}");
        };
        assert_eq!(name, "a");
        assert_eq!(arguments, r#"{"q":"lab-q"}"#);
        assert!(pieces.len() >= 2);
        assert_eq!(pieces.concat(), *arguments);
        assert_eq!(a.output_tokens() as usize, pieces.len());
        let after = format!(r#"{{{tools},"messages":[{{"role":"tool","content":"r"}}]}}"#);
        let a = Answer::plan(&req(&after), &Knobs::default(), 2).expect("plan");
        assert_eq!(a.finish, Finish::Stop);
    }

    #[test]
    fn a_named_tool_that_is_not_offered_is_an_error_listing_the_offered_ones() {
        let r = req(r#"{"tools":[{"type":"function","function":{"name":"a"}}]}"#);
        let knobs = Knobs {
            tool: ToolMode::Named("zz".into()),
            ..Knobs::default()
        };
        let e = Answer::plan(&r, &knobs, 1).expect_err("not offered");
        assert!(e.0.contains("'zz'") && e.0.contains(": a"), "{e}");
    }

    #[test]
    fn split_keeps_characters_whole() {
        assert_eq!(split("aéb", 1), ["a", "é", "b"]);
        assert_eq!(split("", 3), Vec::<String>::new());
    }
}
