//! What the audit concludes, with the evidence that supports it.
//!
//! A [`Finding`] is a fact about one stream of one session, judged from the wire alone. Its
//! [`FindingKind`] names are the stable, kebab-case labels of the design note; counters,
//! JSONL logs and reports use exactly these names. Where the proxy cannot know (ids it never
//! saw, traffic from before it started, a run that ended too early) the kind is
//! [`FindingKind::Unknown`] and `detail` says which judgement was withheld and why: the audit
//! never guesses silently.

use serde::Serialize;
use std::fmt;

use crate::tls::TlsEnd;
use crate::vocab::WireProtocol;
use crate::wire::{CutPoint, SseClass};

/// The kind of a finding. `as_str` gives the name used in logs, counters and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// An event was partly delivered when the connection stopped.
    TornCut,
    /// The resume's `Last-Event-ID` is the id of an event never fully delivered (seed 004).
    CursorAhead,
    /// The resume's `Last-Event-ID` is older than the last id delivered on the stream.
    CursorBehind,
    /// After a cut of a stream with delivered ids, the client re-opened or re-issued without
    /// `Last-Event-ID`.
    CursorMissing,
    /// The replay delivered exactly the events owed after the cursor, nothing else wrong.
    ReplayExact,
    /// An event owed after the cursor (known to the proxy) never came back.
    ReplayGap,
    /// An event already delivered at or before the cursor was sent again.
    ReplayDuplicate,
    /// Owed events came back out of order, or after newer events.
    ReplayReorder,
    /// The server continued with a new stream instead of replaying (see the module doc of
    /// `judge` for the rule).
    FreshStream,
    /// The server said the replay is impossible: non-200 status or `event: error`.
    ExplicitLoss,
    /// 200 with nothing replayed while the stream's call is still unanswered.
    SilentEmpty,
    /// The replay carried events of another stream or session.
    CrossStream,
    /// A `tools/call` never got a result or error although its stream ended cleanly (seed 000).
    PendingCall,
    /// A second response for one JSON-RPC request id.
    DuplicateResponse,
    /// A later request is a *proven* re-send of an unanswered call (see `audit::reissue` for
    /// exactly what proves it: the same `Idempotency-Key`, or the same JSON-RPC id, method and
    /// params from the same client). `proof` names the evidence; the replaced call is never
    /// `pending-call` or `abandoned`. An identical later call without proof is not a re-send.
    Reissued,
    /// A call the proxy cut that got no answer, no resume still open, no proven re-send and no
    /// later identical call, `abandon_after` after its last cut or at the end of the run (both
    /// MCP eras): lost. `waited_ms` says how long it waited.
    Abandoned,
    /// A call the proxy cut that got no answer, no resume still open and no proven re-send, but
    /// was followed by an identical call (same method and params, any id, any session) that
    /// carries no proof of being its re-send (both MCP eras; judged when `abandoned` would be).
    /// The wire cannot tell a re-send from the application's next identical call: the call may
    /// have been recovered or lost. `candidates` names the later calls; the detail says how to
    /// make the wire tell (an `Idempotency-Key` header) and, when the first execution had
    /// visibly started (as for `reexecuted`), that the tool may have run twice.
    UnprovenResend,
    /// MCP 2026-07-28: a call whose first execution had visibly started (progress or result
    /// bytes delivered before the cut) was re-sent (proven, see `Reissued`) although its tool
    /// is not declared idempotent or read-only in the `tools/list` annotations seen: a likely
    /// double side effect (see `audit::stateless`).
    Reexecuted,
    /// MCP 2026-07-28: the server sent a message for a request (its response, or progress for
    /// its token) after that request's response stream was closed, which cancels it.
    SentAfterCancel,
    /// The wire observer stopped following an SSE stream (a line longer than its limit, or a
    /// `Content-Encoding` it does not decode): the bytes were still relayed, but events after
    /// the offset named are not audited. `detail` names the reason (and the encoding).
    ObserverGaveUp,
    /// The client took a TLS truncation (a cut without `close_notify`) for the end of a call:
    /// it neither resumed, re-sent nor cancelled the unanswered call and went on with another
    /// request in the session (see `truncation`).
    TruncationAccepted,
    /// An LLM stream ended before its completion signal and its request was not re-sent:
    /// the client failed visibly or used a partial answer (the wire cannot tell which; see
    /// `audit::rules::llm`).
    LlmTruncated,
    /// An LLM stream ended before its completion signal and its request was re-sent (proven
    /// by `Idempotency-Key` or `X-Stainless-Retry-Count`).
    LlmRetried,
    /// An LLM stream delivered its completion signal but not its terminal event.
    LlmNoTerminal,
    /// An LLM stream was silent for a while before it ended without its completion signal.
    LlmStalled,
    /// An LLM stream was still open, silent and unfinished, when the run ended.
    LlmHung,
    /// An LLM request's connection ended before any response reached the client and no
    /// proven re-send followed.
    LlmUnanswered,
    /// HTTP/2: an endpoint (not the proxy) reset a stream with `RST_STREAM`; `detail` names who
    /// sent it (client or server) and its error code. A fact: what it means for the stream's
    /// call is judged as for a client that closed its connection (client) or a server-side
    /// cut (server); `REFUSED_STREAM` means not processed (see `audit::h2`).
    StreamReset,
    /// A judgement the proxy cannot make; `detail` names it and the reason.
    Unknown,
}

impl FindingKind {
    /// Every kind, in the order of the design note.
    pub const ALL: [FindingKind; 29] = [
        FindingKind::TornCut,
        FindingKind::CursorAhead,
        FindingKind::CursorBehind,
        FindingKind::CursorMissing,
        FindingKind::ReplayExact,
        FindingKind::ReplayGap,
        FindingKind::ReplayDuplicate,
        FindingKind::ReplayReorder,
        FindingKind::FreshStream,
        FindingKind::ExplicitLoss,
        FindingKind::SilentEmpty,
        FindingKind::CrossStream,
        FindingKind::PendingCall,
        FindingKind::DuplicateResponse,
        FindingKind::Reissued,
        FindingKind::Abandoned,
        FindingKind::UnprovenResend,
        FindingKind::Reexecuted,
        FindingKind::SentAfterCancel,
        FindingKind::ObserverGaveUp,
        FindingKind::TruncationAccepted,
        FindingKind::LlmTruncated,
        FindingKind::LlmRetried,
        FindingKind::LlmNoTerminal,
        FindingKind::LlmStalled,
        FindingKind::LlmHung,
        FindingKind::LlmUnanswered,
        FindingKind::StreamReset,
        FindingKind::Unknown,
    ];

    /// The kebab-case name used in logs, counters and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::TornCut => "torn-cut",
            FindingKind::CursorAhead => "cursor-ahead",
            FindingKind::CursorBehind => "cursor-behind",
            FindingKind::CursorMissing => "cursor-missing",
            FindingKind::ReplayExact => "replay-exact",
            FindingKind::ReplayGap => "replay-gap",
            FindingKind::ReplayDuplicate => "replay-duplicate",
            FindingKind::ReplayReorder => "replay-reorder",
            FindingKind::FreshStream => "fresh-stream",
            FindingKind::ExplicitLoss => "explicit-loss",
            FindingKind::SilentEmpty => "silent-empty",
            FindingKind::CrossStream => "cross-stream",
            FindingKind::PendingCall => "pending-call",
            FindingKind::DuplicateResponse => "duplicate-response",
            FindingKind::Reissued => "reissued",
            FindingKind::Abandoned => "abandoned",
            FindingKind::UnprovenResend => "unproven-resend",
            FindingKind::Reexecuted => "reexecuted",
            FindingKind::SentAfterCancel => "sent-after-cancel",
            FindingKind::ObserverGaveUp => "observer-gave-up",
            FindingKind::TruncationAccepted => "truncation-accepted",
            FindingKind::LlmTruncated => "llm-truncated",
            FindingKind::LlmRetried => "llm-retried",
            FindingKind::LlmNoTerminal => "llm-no-terminal",
            FindingKind::LlmStalled => "llm-stalled",
            FindingKind::LlmHung => "llm-hung",
            FindingKind::LlmUnanswered => "llm-unanswered",
            FindingKind::StreamReset => "stream-reset",
            FindingKind::Unknown => "unknown",
        }
    }

    /// True if and only if the kind reports correct behaviour (nothing to fix).
    pub fn is_correct_behaviour(self) -> bool {
        matches!(
            self,
            FindingKind::ReplayExact
                | FindingKind::ExplicitLoss
                | FindingKind::Reissued
                | FindingKind::LlmRetried
        )
    }
}

/// How much a finding weighs: what went wrong, and whose fault it is. Every kind has exactly
/// one class ([`FindingKind::class`]); the summary's first line counts the calls affected by
/// `loss` findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingClass {
    /// Data the client never got and nobody re-delivered: events missing from a replay, a call
    /// whose response never came.
    Loss,
    /// Something reached the client twice, or ran twice on the server (`reexecuted`).
    Duplicate,
    /// Something reached the client out of order.
    Order,
    /// The client did something wrong (its cursor, or not recovering a cut call).
    ClientBug,
    /// The server did something wrong that is not itself a loss, duplicate or reorder seen by
    /// the client (a continuation instead of a replay, events of another stream).
    ServerBug,
    /// The wire cannot decide between two outcomes that would each be in another class: a cut
    /// call followed by an identical call without proof (`unproven-resend`) was either
    /// recovered by a re-send or lost. Never counted as loss.
    Ambiguous,
    /// Correct behaviour, or a fact worth knowing (a torn cut, a signalled loss, a judgement
    /// withheld).
    Info,
}

impl FindingClass {
    /// The kebab-case name used in logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingClass::Loss => "loss",
            FindingClass::Duplicate => "duplicate",
            FindingClass::Order => "order",
            FindingClass::ClientBug => "client-bug",
            FindingClass::ServerBug => "server-bug",
            FindingClass::Ambiguous => "ambiguous",
            FindingClass::Info => "info",
        }
    }
}

impl FindingKind {
    /// The class of every finding of this kind.
    pub fn class(self) -> FindingClass {
        match self {
            FindingKind::ReplayGap
            | FindingKind::SilentEmpty
            | FindingKind::PendingCall
            | FindingKind::Abandoned
            | FindingKind::LlmTruncated
            | FindingKind::LlmUnanswered => FindingClass::Loss,
            FindingKind::ReplayDuplicate
            | FindingKind::DuplicateResponse
            | FindingKind::Reexecuted => FindingClass::Duplicate,
            FindingKind::ReplayReorder => FindingClass::Order,
            FindingKind::CursorAhead
            | FindingKind::CursorBehind
            | FindingKind::CursorMissing
            | FindingKind::TruncationAccepted
            | FindingKind::LlmHung => FindingClass::ClientBug,
            FindingKind::FreshStream | FindingKind::CrossStream | FindingKind::SentAfterCancel => {
                FindingClass::ServerBug
            }
            FindingKind::UnprovenResend => FindingClass::Ambiguous,
            FindingKind::TornCut
            | FindingKind::ReplayExact
            | FindingKind::ExplicitLoss
            | FindingKind::Reissued
            | FindingKind::ObserverGaveUp
            | FindingKind::LlmRetried
            | FindingKind::LlmNoTerminal
            | FindingKind::LlmStalled
            | FindingKind::StreamReset
            | FindingKind::Unknown => FindingClass::Info,
        }
    }
}

impl fmt::Display for FindingClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which stream a finding is about: the exchange that opened it.
///
/// On an HTTP/2 connection `seq` is the h2 stream id (odd, not contiguous) and `h2_stream`
/// repeats it, so a reader never has to know the connection's protocol to read it right.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamRef {
    /// `METHOD path` of the request that opened the stream (`POST /mcp`, `GET /mcp`).
    pub request: String,
    /// JSON-RPC request ids carried by the opening POST (JSON text: `7`, `"a-1"`), empty for a
    /// standalone GET stream.
    pub rpc_ids: Vec<String>,
    /// Connection and request sequence number of the opening exchange.
    pub conn: u64,
    /// Request order on that connection (0-based) on HTTP/1.1; the stream id on HTTP/2.
    pub seq: u64,
    /// The connection's protocol: `http1`, `h2c` or `h2`.
    pub protocol: WireProtocol,
    /// On HTTP/2 (h2c or h2): the stream id of the opening exchange.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_stream: Option<u64>,
}

impl Default for StreamRef {
    fn default() -> Self {
        StreamRef {
            request: String::new(),
            rpc_ids: Vec::new(),
            conn: 0,
            seq: 0,
            protocol: WireProtocol::Http1,
            h2_stream: None,
        }
    }
}

impl StreamRef {
    /// Names the connection's protocol (on HTTP/2, `seq` is the stream id).
    pub fn on(mut self, protocol: WireProtocol) -> Self {
        self.set_protocol(protocol);
        self
    }

    /// As [`StreamRef::on`], in place.
    pub fn set_protocol(&mut self, protocol: WireProtocol) {
        self.protocol = protocol;
        self.h2_stream = (protocol != WireProtocol::Http1).then_some(self.seq);
    }

    /// `METHOD path ids` then where it ran: `(http1)`, or `(h2 stream 5)` on HTTP/2 — the
    /// `stream` text of report examples.
    pub fn label(&self) -> String {
        label(
            &self.request,
            &self.rpc_ids.join(","),
            self.protocol.as_str(),
            self.h2_stream,
        )
    }
}

/// The report text of a finding's stream (see [`StreamRef::label`]), from its parts (a
/// findings log read back gives them as JSON; `protocol` empty in a log written before it was
/// named: left out).
pub fn label(request: &str, rpc_ids: &str, protocol: &str, h2_stream: Option<u64>) -> String {
    let mut out = format!("{request} {rpc_ids}");
    match (protocol, h2_stream) {
        ("", _) => {}
        (p, Some(id)) => out.push_str(&format!(" ({p} stream {id})")),
        (p, None) => out.push_str(&format!(" ({p})")),
    }
    out
}

/// The cut a finding is about, typed as the pump recorded it: built from its
/// [`CutPoint`] (the one typed cut record, see `wire::observe`), so the fault that cut (`by`)
/// and the TLS end reach the finding as they left the pump; they become strings only when the
/// finding is serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct FindingCut {
    /// SSE position class of the cut.
    #[serde(rename = "cut_class", skip_serializing_if = "Option::is_none")]
    pub class: Option<SseClass>,
    /// Bytes of the torn event that were delivered, for `torn-cut` and `cursor-ahead`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn_bytes: Option<u64>,
    /// Which `data:` line (1-based) the cut fell in, when inside one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_line: Option<u32>,
    /// How the TLS session to the client ended at the cut (`truncated`: no `close_notify`;
    /// `close-notify`), on a TLS client side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_end: Option<TlsEnd>,
    /// The fault kind that decided the cut (`sse_cut`, `reset_peer`, …).
    #[serde(rename = "cut_by", skip_serializing_if = "Option::is_none")]
    pub by: Option<&'static str>,
}

impl FindingCut {
    /// Every fact of `point` a finding reports.
    pub fn from_point(point: &CutPoint) -> Self {
        FindingCut {
            class: point.class,
            torn_bytes: Some(point.torn_bytes),
            data_line: point.data_line,
            tls_end: point.tls_end,
            by: point.by,
        }
    }

    /// The class's kebab-case name, if any.
    pub fn class_name(&self) -> Option<&'static str> {
        self.class.map(SseClass::as_str)
    }
}

/// One finding and its evidence. Serialized as one JSON object per line in the findings log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What was found.
    pub kind: FindingKind,
    /// Its weight: `loss`, `duplicate`, `order`, `client-bug`, `server-bug`, `ambiguous` or
    /// `info` (always `kind.class()`).
    pub class: FindingClass,
    /// Milliseconds since the auditor was created, at the observation that decided it.
    pub at_ms: u64,
    /// `Mcp-Session-Id`, `None` for traffic without a session.
    pub session: Option<String>,
    /// The stream the finding is about.
    pub stream: StreamRef,
    /// Event ids or JSON-RPC ids involved (meaning per kind, see `detail`).
    pub ids: Vec<String>,
    /// Raw byte offsets on the downstream connection (cut offset, event starts/ends).
    pub raw_offsets: Vec<u64>,
    /// The cut the finding is about, for cut-related findings (flattened: `cut_class`,
    /// `torn_bytes`, `data_line`, `tls_end`, `cut_by`; absent facts are left out).
    #[serde(flatten)]
    pub cut: FindingCut,
    /// `abandoned` / `unproven-resend`: milliseconds the call waited after its last cut for an
    /// answer, a resume or a proven re-send before it was judged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited_ms: Option<u64>,
    /// `unproven-resend` (and a deferred `pending-call`): later calls with the same method and
    /// params that carry no proof of being a re-send (the wire cannot tell them from the
    /// application's next identical call).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateCall>,
    /// `unproven-resend`: what showed that the cut call's first execution had visibly started
    /// (as for `reexecuted`: progress or response bytes reached the client), if anything did —
    /// then the tool may have run twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visible_start: Option<&'static str>,
    /// `reissued` / `reexecuted`: what proves the re-send, `idempotency-key` or `same-id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proof: Option<String>,
    /// Human-readable evidence: what was expected and what was seen.
    pub detail: String,
}

/// A later call named as a possible, unproven re-send of a lost one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateCall {
    /// Its JSON-RPC id (JSON text).
    pub id: String,
    /// Its `Mcp-Session-Id`, if any.
    pub session: Option<String>,
    /// Connection and request sequence number of its POST.
    pub conn: u64,
    /// Request order on that connection.
    pub seq: u64,
    /// When the proxy saw it (milliseconds since the auditor was created).
    pub at_ms: u64,
}

impl Finding {
    /// A finding of `kind` about `stream` with no ids or offsets yet.
    pub fn new(kind: FindingKind, at_ms: u64, session: Option<String>, stream: StreamRef) -> Self {
        Finding {
            kind,
            class: kind.class(),
            at_ms,
            session,
            stream,
            ids: Vec::new(),
            raw_offsets: Vec::new(),
            cut: FindingCut::default(),
            waited_ms: None,
            candidates: Vec::new(),
            visible_start: None,
            proof: None,
            detail: String::new(),
        }
    }

    /// Sets the ids.
    pub fn ids(mut self, ids: Vec<String>) -> Self {
        self.ids = ids;
        self
    }

    /// Sets the raw offsets.
    pub fn offsets(mut self, offsets: Vec<u64>) -> Self {
        self.raw_offsets = offsets;
        self
    }

    /// Sets the detail text.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_label_names_its_protocol_and_on_h2_its_stream() {
        let r = StreamRef {
            request: "POST /mcp".into(),
            rpc_ids: vec!["7".into()],
            seq: 5,
            ..StreamRef::default()
        };
        assert_eq!(r.label(), "POST /mcp 7 (http1)");
        assert_eq!(
            r.clone().on(WireProtocol::H2).label(),
            "POST /mcp 7 (h2 stream 5)"
        );
        assert_eq!(r.on(WireProtocol::H2).h2_stream, Some(5));
        assert_eq!(
            label("POST /mcp", "7", "", None),
            "POST /mcp 7",
            "an old log"
        );
    }

    #[test]
    fn kind_serializes_to_its_kebab_name() {
        for k in FindingKind::ALL {
            let json = serde_json::to_string(&k).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
    }
}
