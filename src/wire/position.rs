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
