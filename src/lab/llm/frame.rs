//! The pieces an LLM answer is written in: SSE events tagged with their role in the stream
//! ([`Part`]), which the pacer times and the tests use as ground truth of where each
//! provider-level position lies.
//!
//! Invariants: each [`Frame`] is one complete SSE event (its blank line included) in the
//! server's line ending; JSON is written by hand in the providers' key order (`type` first
//! where providers put it first), compact, one `data:` line per event.

use bytes::Bytes;

/// The role of an event in an LLM stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Before the first delta (`role` chunk, `message_start`, `response.created`, `ping`, …).
    Preamble,
    /// A text delta (one token).
    Delta,
    /// A piece of tool-call arguments (one token).
    ToolArgs,
    /// Between the last delta and the completion signal (`content_block_stop`,
    /// `response.output_item.done`, …).
    Closing,
    /// The completion signal: the chunk with `finish_reason`, `message_delta` with
    /// `stop_reason`, `response.completed|incomplete|failed`.
    Completion,
    /// The Chat Completions usage chunk (after the completion signal).
    Usage,
    /// The terminal event: `data: [DONE]`, `message_stop` (a Responses stream has none: its
    /// completion signal is its last event).
    Terminal,
}

impl Part {
    /// Whether the event carries a token (text or arguments).
    pub fn is_delta(self) -> bool {
        matches!(self, Part::Delta | Part::ToolArgs)
    }
}

/// One SSE event of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Its role.
    pub part: Part,
    /// Its bytes.
    pub bytes: Bytes,
}

/// Writes SSE events in one line ending.
#[derive(Debug, Clone, Copy)]
pub struct Sse {
    eol: &'static [u8],
}

impl Sse {
    /// A writer ending lines with `eol`.
    pub fn new(eol: &'static [u8]) -> Self {
        Sse { eol }
    }

    /// `data: <data>` and the blank line.
    pub fn data(&self, part: Part, data: &str) -> Frame {
        self.frame(part, None, data)
    }

    /// `event: <name>`, `data: <data>` and the blank line.
    pub fn event(&self, part: Part, name: &str, data: &str) -> Frame {
        self.frame(part, Some(name), data)
    }

    fn frame(&self, part: Part, name: Option<&str>, data: &str) -> Frame {
        let mut out = Vec::with_capacity(data.len() + 32 + name.map_or(0, str::len));
        if let Some(name) = name {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(self.eol);
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(data.as_bytes());
        out.extend_from_slice(self.eol);
        out.extend_from_slice(self.eol);
        Frame {
            part,
            bytes: Bytes::from(out),
        }
    }
}

/// `s` as a JSON string literal.
pub fn q(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}
