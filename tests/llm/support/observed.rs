//! What tearline's wire observer says reached the client in a cell, in the vocabulary of
//! [`Fact`]s: per LLM stream whether its completion signal and terminal event were delivered
//! and whether its tool call's arguments were complete, and whether the request was sent more
//! than once. Scored against the test's own [`super::truth`], this measures tearline's
//! provider-aware observation on real SDK traffic.
//!
//! Invariant: only [`Observation::Request`], [`Observation::Response`] and
//! [`Observation::LlmEvent`] are read (what was delivered, released after delivery); a response
//! that is not `200 text/event-stream` began no answer and yields no fact of its own.

use std::collections::BTreeMap;

use tearline::vocab::LlmApi;
use tearline::wire::Observation;
use tearline::wire::llm_args::ArgsStatus;

use super::truth::Fact;

#[derive(Default)]
struct Stream {
    api: Option<LlmApi>,
    /// A `200 text/event-stream` response head was delivered.
    began: bool,
    completion: bool,
    terminal: bool,
    args: Option<ArgsStatus>,
}

/// The facts tearline's observations state about one cell's traffic.
pub fn facts(observations: &[Observation], tool_mode: bool) -> Vec<Fact> {
    let mut requests = 0u64;
    let mut streams: BTreeMap<(u64, u64), Stream> = BTreeMap::new();
    for o in observations {
        match o {
            Observation::Request { method, .. } if method == "POST" => requests += 1,
            Observation::Response {
                conn,
                seq,
                status: 200,
                content_type: Some(ct),
                ..
            } if ct.starts_with("text/event-stream") => {
                streams.entry((*conn, *seq)).or_default().began = true;
            }
            Observation::LlmEvent(e) => {
                let s = streams.entry((e.conn, e.seq)).or_default();
                s.api = Some(e.api);
                s.completion |= e.facts.completion.is_some();
                s.terminal |= e.facts.terminal;
                if let Some(a) = &e.facts.args {
                    s.args = Some(a.status);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for s in streams.values().filter(|s| s.began) {
        let tool_complete = tool_mode.then(|| s.args == Some(ArgsStatus::Complete));
        if !s.completion {
            out.push(Fact::Truncated { tool_complete });
        } else if !s.terminal && s.api != Some(LlmApi::Responses) {
            out.push(Fact::TerminalMissing);
        }
    }
    if requests > 1 {
        out.push(Fact::Retried);
    }
    out.sort();
    out
}
