//! What a run counts and which disconnect stories it keeps.
//!
//! Invariant: every finished call lands in exactly one of `ok`, `failed`, `silently_lost`, so
//! `calls == ok + failed + silently_lost` ([`Counters::is_balanced`]). The other counters count
//! events inside calls (a call may resume several times). Counters are plain integers owned by
//! one session task and summed at the end: recording never contends.

use serde::Serialize;

use super::config::Policy;

/// Counts over a run (or one session of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Calls finished (each lands in exactly one of the next three).
    pub calls: u64,
    /// Calls completed with their verified result (or JSON-RPC error) for their id.
    pub ok: u64,
    /// Calls that ended in a known failure (attempts or time exhausted, explicit failure).
    pub failed: u64,
    /// Calls the client took as complete although it had no valid result (naive policy).
    pub silently_lost: u64,
    /// Disconnects while a partial event was in hand (strict policy).
    pub torn_detections: u64,
    /// Resume GETs sent with `Last-Event-ID`.
    pub resumes: u64,
    /// Fresh sessions negotiated to replace one that could not continue.
    pub renegotiations: u64,
    /// Calls re-sent as a new request with a new JSON-RPC id.
    pub reissues: u64,
    /// Events whose id was already delivered in the same call.
    pub duplicates: u64,
    /// Sequence jumps forward within a stream (`<stream>-<seq>` ids).
    pub gaps: u64,
    /// Sequence steps backwards within a stream not explained as duplicates.
    pub reorders: u64,
    /// Explicit failures the server signalled: non-2xx, `event: error`, JSON-RPC error.
    pub explicit_errors: u64,
    /// Fresh streams served in answer to a resume (continuation instead of replay).
    pub fresh_streams: u64,
    /// Events dispatched to the client.
    pub events: u64,
}

impl Counters {
    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &Counters) {
        self.calls += other.calls;
        self.ok += other.ok;
        self.failed += other.failed;
        self.silently_lost += other.silently_lost;
        self.torn_detections += other.torn_detections;
        self.resumes += other.resumes;
        self.renegotiations += other.renegotiations;
        self.reissues += other.reissues;
        self.duplicates += other.duplicates;
        self.gaps += other.gaps;
        self.reorders += other.reorders;
        self.explicit_errors += other.explicit_errors;
        self.fresh_streams += other.fresh_streams;
        self.events += other.events;
    }

    /// True if and only if `calls == ok + failed + silently_lost`.
    pub fn is_balanced(&self) -> bool {
        self.calls == self.ok + self.failed + self.silently_lost
    }

    /// (name, value) pairs in a stable order, for summaries and reports.
    pub fn pairs(&self) -> [(&'static str, u64); 14] {
        [
            ("calls", self.calls),
            ("ok", self.ok),
            ("failed", self.failed),
            ("silently_lost", self.silently_lost),
            ("torn_detections", self.torn_detections),
            ("resumes", self.resumes),
            ("renegotiations", self.renegotiations),
            ("reissues", self.reissues),
            ("duplicates", self.duplicates),
            ("gaps", self.gaps),
            ("reorders", self.reorders),
            ("explicit_errors", self.explicit_errors),
            ("fresh_streams", self.fresh_streams),
            ("events", self.events),
        ]
    }
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallEnd {
    /// Verified result (or JSON-RPC error) for the call's id.
    Ok,
    /// Known failure.
    Failed,
    /// Taken as complete without a valid result.
    SilentlyLost,
}

/// What the server answered to a resume GET.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ResumeAnswer {
    /// The GET failed before a response head.
    NoResponse {
        /// [`super::http::HttpError::kind`] of the failure.
        error: &'static str,
    },
    /// A non-200 status or a non-SSE body.
    Refused {
        /// The status code.
        status: u16,
    },
    /// 200 with an SSE stream; the ids the client saw first.
    Stream {
        /// The first id committed on the resumed stream, if any.
        first_id: Option<String>,
        /// True if the strict client judged that it does not continue the broken stream
        /// (another stream, or a gap), rather than replaying it.
        discontinuous: bool,
        /// True if the stream carried `event: error`.
        error_event: bool,
    },
}

/// The story of one disconnect inside a call: what the client held and what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallTrace {
    /// The policy that handled the call.
    pub policy: Policy,
    /// The JSON-RPC id of the request whose stream broke.
    pub request_id: u64,
    /// Why the stream stopped (`clean-end` or an HTTP error kind).
    pub stop: &'static str,
    /// The committed (dispatched) last event id at the disconnect.
    pub committed_id: String,
    /// The id line of the event in progress, if one was seen (not committed).
    pub pending_id: Option<String>,
    /// True if bytes of an incomplete event were in hand.
    pub partial: bool,
    /// `data:` lines of the incomplete event seen complete before the cut.
    pub partial_data_lines: u32,
    /// True if the cut fell inside a `data:` line.
    pub mid_data_line: bool,
    /// Bytes of the incomplete event in hand.
    pub partial_bytes: u64,
    /// The `Last-Event-ID` sent on the resume, if the client resumed.
    pub last_event_id_sent: Option<String>,
    /// What the server answered to the resume.
    pub answer: Option<ResumeAnswer>,
    /// How the call ended.
    pub outcome: Option<CallEnd>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_counters_stay_balanced() {
        let a = Counters {
            calls: 3,
            ok: 2,
            failed: 1,
            ..Counters::default()
        };
        let b = Counters {
            calls: 2,
            ok: 1,
            silently_lost: 1,
            ..Counters::default()
        };
        let mut m = a;
        m.merge(&b);
        assert!(m.is_balanced());
        assert_eq!((m.calls, m.ok, m.failed, m.silently_lost), (5, 3, 1, 1));
        let bad = Counters {
            calls: 1,
            ..Counters::default()
        };
        assert!(!bad.is_balanced());
    }
}
