//! The per-request judgement of a call's event stream: which ids were delivered, whether a
//! resumed stream continues the one that broke, and whether the call's answer is valid.
//!
//! Invariants (strict policy):
//! - An event whose id was already delivered in this request is a duplicate: it is counted and
//!   never processed twice.
//! - Ids are sequence ids once they show it (a first id `<stream>-0`, a priming event, or two
//!   consecutive ids `<s>-<n>`, `<s>-<n+1>`); then an id of another stream, or a forward jump
//!   in the sequence, is a discontinuity (the server did not replay) and a step back to an
//!   undelivered id is a reorder. The discontinuity is counted as the audit names it: a
//!   `fresh-stream` when the ids belong to another stream or the resumed leg opens with a new
//!   priming event that jumps over the owed events, else a `replay-gap`. Other ids (uuids, …)
//!   stay opaque: only duplicates are judged.
//! - A call is complete if and only if a JSON-RPC response for its request id arrived; it is
//!   `Valid` only if the result passes [`verify_result`] and the progress sequence was in order.
//!
//! The naive policy runs the same bookkeeping but judges nothing about ids: it accepts every
//! event, as the documents' client did.

use std::collections::HashSet;

use serde_json::Value;

use super::config::Policy;
use super::stats::Counters;
use crate::wire::sse::SseEvent;

/// What the stream did to the request, as far as ids tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdVerdict {
    /// A new id (or no id): process the event.
    New,
    /// Already delivered: skip the event.
    Duplicate,
    /// The stream does not continue the one the call had (another stream, or a forward jump
    /// in the sequence): the server did not replay; stop reading.
    Discontinuity,
}

/// The judgement of a call's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// The result for the request id arrived and verified.
    Valid,
    /// A JSON-RPC error for the request id arrived.
    RpcError,
    /// The response arrived but failed verification.
    Invalid(&'static str),
    /// No response for the request id arrived.
    Missing,
}

/// Bookkeeping of one request (a re-issued call starts a new one).
#[derive(Debug)]
pub struct RequestStream {
    policy: Policy,
    /// The JSON-RPC id of the request.
    pub request_id: u64,
    /// The progress token sent with the request.
    pub progress_token: String,
    stream: Option<String>,
    last_seq: Option<u64>,
    /// Whether ids are `<stream>-<seq>` sequence ids (`None`: not decided yet).
    seq_mode: Option<bool>,
    delivered: HashSet<String>,
    last_observed: String,
    progress_count: u64,
    progress_last: Option<f64>,
    progress_total: Option<f64>,
    progress_out_of_order: bool,
    response: Option<Value>,
    /// True once an `event: error` arrived.
    pub error_event: bool,
    /// Every dispatched event, when the client records truth ([`super::truth`]).
    pub tape: Option<Vec<super::truth::Dispatched>>,
    /// Set by the reader at the start of a resumed leg, until its first event.
    resume_start: bool,
}

impl RequestStream {
    /// Bookkeeping for request `request_id` under `policy`.
    pub fn new(policy: Policy, request_id: u64) -> RequestStream {
        RequestStream {
            policy,
            request_id,
            progress_token: format!("tl-{request_id}"),
            stream: None,
            last_seq: None,
            seq_mode: None,
            delivered: HashSet::new(),
            last_observed: String::new(),
            progress_count: 0,
            progress_last: None,
            progress_total: None,
            progress_out_of_order: false,
            response: None,
            error_event: false,
            tape: None,
            resume_start: false,
        }
    }

    /// A resumed leg begins: its first event decides between a gap and a fresh stream.
    pub fn begin_resume(&mut self) {
        self.resume_start = true;
    }

    /// True once the response for the request id arrived.
    pub fn has_response(&self) -> bool {
        self.response.is_some()
    }

    /// Judges a committed id (a dispatched event's id, or the scanner's committed cursor after
    /// a read, which covers the priming event that is never dispatched).
    pub fn observe_id(&mut self, id: &str, counters: &mut Counters) -> IdVerdict {
        self.observe(id, false, counters)
    }

    /// [`RequestStream::observe_id`]; `fresh_priming`: the id is a priming event's (empty
    /// data) opening a resumed leg, so a forward jump there is a fresh stream (a new priming
    /// event instead of the owed events), as the audit judges it, not a gap.
    fn observe(&mut self, id: &str, fresh_priming: bool, counters: &mut Counters) -> IdVerdict {
        if id.is_empty() || id == self.last_observed {
            return IdVerdict::New;
        }
        self.last_observed.clear();
        self.last_observed.push_str(id);
        if self.policy == Policy::Naive {
            return IdVerdict::New;
        }
        if !self.delivered.insert(id.to_string()) {
            counters.replay_duplicate += 1;
            return IdVerdict::Duplicate;
        }
        let parsed = split_id(id);
        match (self.seq_mode, parsed) {
            (_, None) => {
                self.seq_mode = Some(false);
                IdVerdict::New
            }
            (Some(false), Some(_)) => IdVerdict::New,
            (None, Some((stream, seq))) => {
                match self.stream.as_deref().zip(self.last_seq) {
                    // The second id decides: same stream, next sequence number.
                    Some((s, last)) => self.seq_mode = Some(s == stream && seq == last + 1),
                    // A `<stream>-0` first id is a priming event: sequence ids from the start.
                    None if seq == 0 => self.seq_mode = Some(true),
                    None => {}
                }
                self.stream = Some(stream.to_string());
                self.last_seq = Some(seq);
                IdVerdict::New
            }
            (Some(true), Some((stream, seq))) => {
                let last = self.last_seq.unwrap_or(0);
                if self.stream.as_deref() != Some(stream) {
                    counters.fresh_stream += 1;
                    return IdVerdict::Discontinuity;
                }
                if seq > last + 1 {
                    if fresh_priming {
                        counters.fresh_stream += 1;
                    } else {
                        counters.replay_gap += 1;
                    }
                    return IdVerdict::Discontinuity;
                }
                if seq <= last {
                    counters.replay_reorder += 1;
                    return IdVerdict::New;
                }
                self.last_seq = Some(seq);
                IdVerdict::New
            }
        }
    }

    /// Processes one dispatched event; returns `Discontinuity`/`Duplicate` when the event must not be
    /// processed (the caller stops reading on `Discontinuity`).
    pub fn on_event(&mut self, ev: &SseEvent<'_>, counters: &mut Counters) -> IdVerdict {
        counters.events += 1;
        let opens_resume = std::mem::take(&mut self.resume_start);
        if let Some(id) = ev.id {
            let verdict = self.observe(id, opens_resume && ev.data.is_empty(), counters);
            if verdict != IdVerdict::New {
                return verdict;
            }
        }
        if ev.event_type == "error" {
            self.error_event = true;
            return IdVerdict::New;
        }
        if ev.event_type != "message" {
            return IdVerdict::New;
        }
        let Ok(msg) = serde_json::from_slice::<Value>(ev.data) else {
            return IdVerdict::New;
        };
        self.on_message(msg);
        IdVerdict::New
    }

    /// Processes one JSON-RPC message (from an SSE event or a JSON body).
    pub fn on_message(&mut self, msg: Value) {
        if msg.get("id").and_then(Value::as_u64) == Some(self.request_id)
            && (msg.get("result").is_some() || msg.get("error").is_some())
        {
            if self.response.is_none() {
                self.response = Some(msg);
            }
            return;
        }
        if msg.get("method").and_then(Value::as_str) != Some("notifications/progress") {
            return;
        }
        let Some(params) = msg.get("params") else {
            return;
        };
        if params.get("progressToken").and_then(Value::as_str) != Some(&self.progress_token) {
            return;
        }
        let progress = params.get("progress").and_then(Value::as_f64);
        if let (Some(p), Some(last)) = (progress, self.progress_last)
            && p <= last
        {
            self.progress_out_of_order = true;
        }
        self.progress_count += 1;
        self.progress_last = progress.or(self.progress_last);
        self.progress_total = params.get("total").and_then(Value::as_f64);
    }

    /// The JSON-RPC error of the response, as `code: message`, if the response is one.
    pub fn error_message(&self) -> Option<String> {
        let e = self.response.as_ref()?.get("error")?;
        let message = e.get("message").and_then(Value::as_str).unwrap_or("");
        Some(match e.get("code") {
            Some(code) => format!("{code}: {message}"),
            None => message.to_owned(),
        })
    }

    /// Judges the answer of the request for `args`.
    pub fn judge(&self, args: &Value) -> Judgement {
        let Some(resp) = &self.response else {
            return Judgement::Missing;
        };
        if resp.get("error").is_some() {
            return Judgement::RpcError;
        }
        if self.progress_out_of_order {
            return Judgement::Invalid("progress out of order");
        }
        if let (Some(total), Some(last)) = (self.progress_total, self.progress_last)
            && last < total
        {
            return Judgement::Invalid("progress incomplete");
        }
        if let Some(n) = args.get("n").and_then(Value::as_u64)
            && self.progress_count != n
        {
            return Judgement::Invalid("progress count differs from n");
        }
        match resp.get("result") {
            Some(result) => match verify_result(args, result) {
                Ok(()) => Judgement::Valid,
                Err(why) => Judgement::Invalid(why),
            },
            None => Judgement::Invalid("no result"),
        }
    }
}

/// Splits `<stream>-<seq>` at the last `-` when seq is decimal digits.
pub fn split_id(id: &str) -> Option<(&str, u64)> {
    let (stream, seq) = id.rsplit_once('-')?;
    if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((stream, seq.parse().ok()?))
}

/// Verifies a tool result against the arguments that asked for it: an object, not
/// `isError`, and, when `args.size` is given, a payload of exactly that many bytes (the text
/// of its `content` items, or `structuredContent.size`).
pub fn verify_result(args: &Value, result: &Value) -> Result<(), &'static str> {
    if !result.is_object() {
        return Err("result is not an object");
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err("result is a tool error");
    }
    let Some(size) = args.get("size").and_then(Value::as_u64) else {
        return Ok(());
    };
    let text_len: u64 = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .map(|t| t.len() as u64)
                .sum()
        })
        .unwrap_or(0);
    let declared = result
        .get("structuredContent")
        .and_then(|s| s.get("size"))
        .and_then(Value::as_u64);
    if text_len == size || (declared == Some(size) && text_len == 0) {
        Ok(())
    } else {
        Err("result size differs from the requested size")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_id_reads_stream_and_sequence() {
        assert_eq!(split_id("s1-42"), Some(("s1", 42)));
        assert_eq!(split_id("a-b-7"), Some(("a-b", 7)));
        assert_eq!(split_id("uuid_123"), None);
        assert_eq!(split_id("s-"), None);
    }

    #[test]
    fn strict_ids_judge_duplicates_gaps_and_fresh_streams() {
        let mut c = Counters::default();
        let mut r = RequestStream::new(Policy::Strict, 1);
        assert_eq!(r.observe_id("s1-0", &mut c), IdVerdict::New);
        assert_eq!(r.observe_id("s1-1", &mut c), IdVerdict::New);
        assert_eq!(r.observe_id("s1-0", &mut c), IdVerdict::Duplicate);
        assert_eq!(r.observe_id("s1-3", &mut c), IdVerdict::Discontinuity);
        assert_eq!(r.observe_id("s2-0", &mut c), IdVerdict::Discontinuity);
        assert_eq!(
            (c.replay_duplicate, c.replay_gap, c.fresh_stream),
            (1, 1, 1)
        );
    }

    #[test]
    fn uuid_like_ids_stay_opaque() {
        let mut c = Counters::default();
        let mut r = RequestStream::new(Policy::Strict, 1);
        for id in [
            "550e8400-e29b-41d4-a716-446655440000",
            "6fa459ea-ee8a-3ca4-894e-db77e160355e",
            "16fd2706-8baf-433b-82eb-8c7fada847da",
        ] {
            assert_eq!(r.observe_id(id, &mut c), IdVerdict::New);
        }
        assert_eq!(c, Counters::default());
    }

    #[test]
    fn naive_ids_are_never_judged() {
        let mut c = Counters::default();
        let mut r = RequestStream::new(Policy::Naive, 1);
        assert_eq!(r.observe_id("s1-5", &mut c), IdVerdict::New);
        assert_eq!(r.observe_id("s2-0", &mut c), IdVerdict::New);
        assert_eq!(c, Counters::default());
    }

    #[test]
    fn response_for_another_id_is_not_the_answer() {
        let mut r = RequestStream::new(Policy::Strict, 7);
        r.on_message(json!({"jsonrpc":"2.0","id":6,"result":{}}));
        assert_eq!(r.judge(&json!({})), Judgement::Missing);
        r.on_message(json!({"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}));
        assert_eq!(r.judge(&json!({})), Judgement::RpcError);
    }

    #[test]
    fn blob_result_must_have_the_requested_size() {
        let ok = json!({"content":[{"type":"text","text":"abcd"}]});
        assert_eq!(verify_result(&json!({"size":4}), &ok), Ok(()));
        assert!(verify_result(&json!({"size":5}), &ok).is_err());
        assert!(verify_result(&json!({}), &json!({"isError":true})).is_err());
    }

    #[test]
    fn progress_must_be_in_order_and_complete() {
        let note = |p: u64| {
            json!({"jsonrpc":"2.0","method":"notifications/progress",
                   "params":{"progressToken":"tl-1","progress":p,"total":3}})
        };
        let mut r = RequestStream::new(Policy::Strict, 1);
        for p in [1, 2, 3] {
            r.on_message(note(p));
        }
        r.on_message(json!({"jsonrpc":"2.0","id":1,"result":{}}));
        assert_eq!(r.judge(&json!({"n":3})), Judgement::Valid);
        let mut r = RequestStream::new(Policy::Strict, 1);
        for p in [2, 1, 3] {
            r.on_message(note(p));
        }
        r.on_message(json!({"jsonrpc":"2.0","id":1,"result":{}}));
        assert_eq!(
            r.judge(&json!({})),
            Judgement::Invalid("progress out of order")
        );
    }
}
