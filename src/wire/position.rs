//! The vocabulary of SSE cut positions (see the design note's table).
//!
//! A [`SseClass`] names where a connection stops if it stops right after a given byte. Profiles,
//! cut records, findings and reports all use the kebab-case names returned by
//! [`SseClass::as_str`]; parsing accepts exactly those names.

use std::fmt;
use std::str::FromStr;

/// Where, in the SSE event stream, a cut right after a byte falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SseClass {
    /// Right after the blank line that dispatched an event (or before any event).
    Boundary,
    /// Inside a field name (`da` of `data`), or inside a comment line.
    FieldName,
    /// After `data:` / `data: `, before the first value byte.
    AfterColon,
    /// Inside a field value.
    MidValue,
    /// Value complete, line ending not yet sent.
    BeforeEol,
    /// Between the CR and the LF of a field line.
    CrLf,
    /// All field lines complete, the dispatching blank line missing.
    BeforeDispatch,
    /// Between the CR and the LF of the blank line (the event IS dispatched).
    DispatchCrLf,
    /// After a complete `id:` line, before the event is dispatched.
    AfterId,
    /// Inside the value of an `id` field.
    MidId,
    /// Inside HTTP chunked framing (size line, extensions, chunk CRLF).
    ChunkFraming,
    /// Inside a multi-byte UTF-8 character.
    MidUtf8,
    /// Inside the leading byte-order mark.
    Bom,
    /// Before or inside the priming event (id + empty data, no cursor yet).
    Priming,
    /// After the final JSON-RPC response of the stream's call.
    AfterFinal,
    /// Inside an event replayed on a resume GET.
    DuringReplay,
}

impl SseClass {
    /// Every class, in the order of the design note.
    pub const ALL: [SseClass; 16] = [
        SseClass::Boundary,
        SseClass::FieldName,
        SseClass::AfterColon,
        SseClass::MidValue,
        SseClass::BeforeEol,
        SseClass::CrLf,
        SseClass::BeforeDispatch,
        SseClass::DispatchCrLf,
        SseClass::AfterId,
        SseClass::MidId,
        SseClass::ChunkFraming,
        SseClass::MidUtf8,
        SseClass::Bom,
        SseClass::Priming,
        SseClass::AfterFinal,
        SseClass::DuringReplay,
    ];

    /// The kebab-case name used in profiles, logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            SseClass::Boundary => "boundary",
            SseClass::FieldName => "field-name",
            SseClass::AfterColon => "after-colon",
            SseClass::MidValue => "mid-value",
            SseClass::BeforeEol => "before-eol",
            SseClass::CrLf => "cr-lf",
            SseClass::BeforeDispatch => "before-dispatch",
            SseClass::DispatchCrLf => "dispatch-cr-lf",
            SseClass::AfterId => "after-id",
            SseClass::MidId => "mid-id",
            SseClass::ChunkFraming => "chunk-framing",
            SseClass::MidUtf8 => "mid-utf8",
            SseClass::Bom => "bom",
            SseClass::Priming => "priming",
            SseClass::AfterFinal => "after-final",
            SseClass::DuringReplay => "during-replay",
        }
    }

    /// The class of this cut point when the stream is a resume: the response to a request that
    /// carried `Last-Event-ID`.
    ///
    /// The definition the proxy applies (`during-replay`): the proxy cannot tell, from the wire
    /// alone, which events of a resume response the server replays from its store and which
    /// are new, and a conformant server sends the replay first; so every event of a resume
    /// response counts as replayed. A cut point *inside* such an event — any class that tears
    /// the event — is `during-replay`: field names, values, line ends, `after-id`, `mid-id`,
    /// `before-dispatch`, `mid-utf8`. A cut point between events (`boundary`, the dispatching
    /// CR `dispatch-cr-lf`), in chunk framing, in the BOM, in a priming event (not a replayed
    /// event) or after the final response keeps its class. The cut record's
    /// `last_committed_id` is then the last fully replayed id (the client's next cursor).
    ///
    /// This is how cuts are *recorded*; faults aim at positions on every leg by the
    /// structural class ([`crate::wire::PositionRun::base`]), and `sse_cut`'s `leg` key selects
    /// first or resume legs.
    pub fn on_resume(self) -> SseClass {
        match self {
            SseClass::FieldName
            | SseClass::AfterColon
            | SseClass::MidValue
            | SseClass::BeforeEol
            | SseClass::CrLf
            | SseClass::BeforeDispatch
            | SseClass::AfterId
            | SseClass::MidId
            | SseClass::MidUtf8 => SseClass::DuringReplay,
            other => other,
        }
    }

    /// True if and only if a conformant client loses (discards) the event in progress when the
    /// connection stops here.
    pub fn tears_event(self) -> bool {
        !matches!(
            self,
            SseClass::Boundary | SseClass::DispatchCrLf | SseClass::AfterFinal
        )
    }
}

/// Serialized as its kebab-case name ([`SseClass::as_str`]): the one place it becomes a string.
impl serde::Serialize for SseClass {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for SseClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing an unknown class name; lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown SSE position class '{given}'; known: {}", known_classes())]
pub struct UnknownClass {
    /// The name that was given.
    pub given: String,
}

fn known_classes() -> String {
    SseClass::ALL
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for SseClass {
    type Err = UnknownClass;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SseClass::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownClass {
                given: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_name_parses_back_to_itself() {
        for c in SseClass::ALL {
            assert_eq!(c.as_str().parse::<SseClass>(), Ok(c));
        }
    }

    #[test]
    fn unknown_class_error_lists_known_names() {
        let err = "mid-valu".parse::<SseClass>().unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("'mid-valu'"), "{msg}");
        assert!(msg.contains("mid-value"), "{msg}");
    }

    #[test]
    fn on_resume_maps_exactly_the_cut_points_inside_an_event() {
        for c in SseClass::ALL {
            let r = c.on_resume();
            if r == SseClass::DuringReplay {
                assert!(c.tears_event(), "{c} tears no event");
            } else {
                assert_eq!(r, c, "{c}");
            }
        }
        for kept in [
            SseClass::Boundary,
            SseClass::DispatchCrLf,
            SseClass::ChunkFraming,
            SseClass::Priming,
            SseClass::AfterFinal,
        ] {
            assert_eq!(kept.on_resume(), kept);
        }
        assert_eq!(SseClass::MidValue.on_resume(), SseClass::DuringReplay);
        assert_eq!(SseClass::AfterId.on_resume(), SseClass::DuringReplay);
    }
}

/// Where in an LLM answer (a stream of a known LLM API, see [`crate::vocab::LlmApi`]) a cut
/// point falls: positions with provider meaning, a second dimension beside [`SseClass`].
///
/// Each is decided from the bytes up to the cut point only (the same under every chunking),
/// so a position inside an event holds from the byte that shows what the event is:
/// - `before-first-delta`: the stream's first event was dispatched, and no delta (text or
///   tool-call arguments) was dispatched or recognised yet: the client holds the answer's
///   opening (role chunk, `message_start`, `response.created`, …) and no token.
/// - `mid-delta`: inside a text delta event, from the first byte that shows it carries text
///   (the first character of `delta.content`; the `event:` line of `content_block_delta` with
///   a `text` delta or of `response.output_text.delta`) to the byte before its dispatch: the
///   client discards a torn token and holds a partial answer.
/// - `mid-tool-args`: a tool call's arguments are begun and incomplete: inside an
///   arguments event (as for `mid-delta`), or anywhere while the dispatched arguments of some
///   tool call are a proper prefix of its JSON (between two argument pieces): the client holds
///   arguments that do not parse.
/// - `before-completion`: inside the completion-signal event (the chunk whose
///   `finish_reason` is not null from its first character, `message_delta` from its `event:`
///   line, `response.completed|incomplete|failed` from its `event:` line or `type`): the client
///   has everything before the signal, and not the signal.
/// - `after-completion`: after the completion signal's dispatch and before the terminal
///   event's (`data: [DONE]`, `message_stop`): the answer is whole, the stream's formal end
///   missing. A Responses stream has none (its completion signal is its last event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LlmPos {
    /// Opening delivered, no token.
    BeforeFirstDelta,
    /// Inside a text delta.
    MidDelta,
    /// Tool-call arguments begun and incomplete.
    MidToolArgs,
    /// Inside the completion signal.
    BeforeCompletion,
    /// Completion signal delivered, terminal event not.
    AfterCompletion,
}

impl LlmPos {
    /// Every LLM position.
    pub const ALL: [LlmPos; 5] = [
        LlmPos::BeforeFirstDelta,
        LlmPos::MidDelta,
        LlmPos::MidToolArgs,
        LlmPos::BeforeCompletion,
        LlmPos::AfterCompletion,
    ];

    /// The kebab-case name used in profiles, logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            LlmPos::BeforeFirstDelta => "before-first-delta",
            LlmPos::MidDelta => "mid-delta",
            LlmPos::MidToolArgs => "mid-tool-args",
            LlmPos::BeforeCompletion => "before-completion",
            LlmPos::AfterCompletion => "after-completion",
        }
    }
}

/// Serialized as its kebab-case name ([`LlmPos::as_str`]): the one place it becomes a string.
impl serde::Serialize for LlmPos {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl fmt::Display for LlmPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LlmPos {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        LlmPos::ALL
            .iter()
            .copied()
            .find(|p| p.as_str() == s)
            .ok_or(())
    }
}
