//! The names of the latency histograms a load run records and a report shows.
//!
//! Why in `report`: they are the report's vocabulary (its JSON keys, its table rows, the
//! summary's lines); the load client records under these names and imports them from here, so
//! the report never needs to know the load client.

/// Time to the first event of a call, from its intended start.
pub const FIRST_EVENT: &str = "first-event";
/// Call completion, from its intended start.
pub const CALL: &str = "call";
/// Disconnect → first replayed event on the resumed stream.
pub const RESUME: &str = "resume";
/// Gap between consecutive events on one connection.
pub const INTER_EVENT: &str = "inter-event";
/// Time to the last event of a completed call, from its intended start.
pub const LAST_EVENT: &str = "last-event";
/// The largest gap between consecutive events of one stream (one per stream with ≥ 2 events).
pub const MAX_GAP: &str = "max-gap";
/// A cut (the first of a series) → the first non-priming event after a resume or a re-issue,
/// on a stream the client keeps (one abandoned as discontinuous does not end the series).
pub const RECOVERY: &str = "recovery";
/// One stream's mean interval between events (first → last event over events − 1); its
/// inverse is the stream's events per second ([`events_per_s`]).
pub const STREAM_INTERVAL: &str = "stream-interval";
/// All histogram names, in report order.
pub const NAMES: [&str; 8] = [
    FIRST_EVENT,
    LAST_EVENT,
    CALL,
    RESUME,
    RECOVERY,
    INTER_EVENT,
    MAX_GAP,
    STREAM_INTERVAL,
];

/// LLM streams: time to first token (first text or argument delta of the kept answer), from
/// the request's intended start.
pub const LLM_TTFT: &str = "time-to-first-token";
/// LLM streams: inter-token latency, each gap between consecutive deltas.
pub const LLM_ITL: &str = "inter-token-latency";
/// LLM streams: time per output token, (last − first token) / (tokens − 1) per answer; its
/// inverse is the answer's output tokens per second ([`events_per_s`] of it).
pub const LLM_TPOT: &str = "time-per-output-token";
/// LLM streams: end to end, from the intended start to the completion signal (or the end of a
/// kept truncated answer), retries included.
pub const LLM_E2E: &str = "end-to-end";
/// The LLM histograms, in report order.
pub const LLM_NAMES: [&str; 4] = [LLM_TTFT, LLM_ITL, LLM_TPOT, LLM_E2E];

/// Events per second of a stream whose mean interval is `interval_us` microseconds.
pub fn events_per_s(interval_us: u64) -> f64 {
    1e6 / interval_us.max(1) as f64
}
