//! Rule `llm`, the LLM verdicts: what an LLM token stream delivered before it ended, and what
//! the client did next — judged from the wire alone (the observer's
//! [`Observation::LlmRequest`] and [`Observation::LlmEvent`], stream ends, cuts and closes,
//! all through the hooks `on_observation`, `on_conn_closed` and `on_sweep`).
//!
//! Rules (one LLM stream = the SSE response to one request whose path names an LLM API):
//! - `llm-truncated` (loss): the stream ended — cleanly, cut by the proxy, or its connection
//!   closed — before its completion signal (see `wire::llm`), and no proven re-send of its
//!   request followed within `abandon_after` (or by the end of the run). The detail says what
//!   was missing (how many text deltas arrived, each tool call's arguments: bytes and whether
//!   they parse), how the stream ended, how long the rule waited, and — only when the stream
//!   ended cleanly (the body's end, the proxy's `clean-end`) — that the wire cannot tell
//!   whether the client failed visibly or used the partial answer; a stream that broke (a
//!   reset, a FIN inside the body, the connection closed) showed the client an error, so it
//!   is a visible loss, and the summary does not count it (nor `llm-unanswered`) as silent;
//!   on HTTP/2 the client's own `RST_STREAM` (a user's cancel) ends the stream as the client
//!   giving up, as its connection's close does on HTTP/1.1, and the detail says so
//!   ([`Ledger::emit_visible_loss`]). Later requests with the same
//!   API and body but no re-send marker are named as candidates: an application may ask the
//!   same thing again, so an identical request is not proof.
//! - `llm-retried` (info): the same, but the request was re-sent: a later request with the
//!   same non-empty `Idempotency-Key`, or with the same API and body (hash) and an
//!   `X-Stainless-Retry-Count` above 0 (the OpenAI and Anthropic SDKs number their attempts).
//! - `llm-no-terminal` (info): the completion signal arrived, the terminal event
//!   (`data: [DONE]`, `message_stop`) did not: the answer is whole.
//! - `llm-stalled` (info): a stream that ended before its completion signal had been silent
//!   for at least [`STALL_AFTER`] when it ended; the detail says how long and how it ended
//!   (the proxy's cut, the connection closed, the body ended).
//! - `llm-hung` (client-bug): at the end of the run a stream is still open without its
//!   completion signal and silent for at least [`STALL_AFTER`]: nobody gave up. The end of a
//!   proxy's run is judged *before* its shutdown drain closes what is still open
//!   (`on_closing`); a stream the proxy closes there is told as closed by the proxy at
//!   shutdown, never as a close the wire cannot attribute.
//! - `observer-gave-up` (info): the observer did not read the stream's events (a
//!   `Content-Encoding` such as gzip, deflate or br; a line over its limit): the stream is not
//!   judged at all, so no verdict above rests on bytes not read.
//! - `llm-unanswered` (loss): the connection ended before any response reached the client
//!   (e.g. a reset before the first byte) and no proven re-send followed; a proven re-send
//!   makes it `llm-retried` instead (every SDK re-sends such a request, the Stainless ones with
//!   their attempt number). A response that is not an SSE stream (a JSON answer, an error
//!   status) ends the rule's interest in its request.
//!
//! Invariants: requests are matched by hash, never by content kept (no body, prompt, header
//! value or credential is stored: only the body's XXH3, its length, the idempotency key and the
//! attempt number); open streams, truncations awaiting a re-send and remembered requests are
//! each capped ([`MAX_OPEN`], [`MAX_PENDING`], [`MAX_RECENT`]); beyond the caps a stream is
//! judged at once rather than remembered.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::audit::finding::{Finding, FindingCut, FindingKind, StreamRef};
use crate::audit::ledger::Ledger;
use crate::audit::rule::Rule;
use crate::vocab::{CutAction, Direction, LlmApi};
use crate::wire::Observation;
use crate::wire::llm_args::ArgsStatus;
use crate::wire::{CutPoint, LlmEventSeen, LlmPos, LlmRequestSeen};

/// Silence before an unfinished stream's end that makes it a stall.
pub const STALL_AFTER: Duration = Duration::from_secs(2);
/// LLM streams followed at once.
pub const MAX_OPEN: usize = 100_000;
/// Truncated streams awaiting a re-send at once.
pub const MAX_PENDING: usize = 100_000;
/// Recent LLM requests remembered for matching a re-send seen before its original's verdict.
pub const MAX_RECENT: usize = 4096;
/// Tool calls described per stream.
const MAX_TOOLS: usize = 8;

/// One tool call as delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tool {
    index: u32,
    name: Option<String>,
    bytes: u64,
    status: ArgsStatus,
}

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum End {
    /// The body ended with its framing (a server's end, or the proxy's `clean-end`).
    Clean,
    /// The body stopped without its end (a cut, an error).
    Broken,
    /// The connection closed while the stream was open.
    Closed,
    /// HTTP/2: the client reset the stream (`RST_STREAM` with this code): it gave up on it, as
    /// a client that closes its connection does on HTTP/1.1.
    ClientReset(u32),
}

/// The proxy's cut of a stream's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cut {
    action: CutAction,
    position: Option<LlmPos>,
    cut: FindingCut,
    raw_offset: u64,
}

/// One LLM request and what its stream delivered.
#[derive(Debug, Clone)]
struct Exchange {
    api: LlmApi,
    conn: u64,
    seq: u64,
    body_hash: u64,
    key: Option<String>,
    requested: Instant,
    /// The stream began: its `2xx text/event-stream` head (or an event of it) reached the
    /// client. A request that ends before is unanswered, not truncated.
    began: bool,
    last: Instant,
    deltas: u64,
    tools: Vec<Tool>,
    tools_over: u64,
    completion: Option<String>,
    terminal: bool,
    error: bool,
    end: Option<(Instant, End)>,
    cut: Option<Cut>,
    /// Open when the proxy began closing every connection at shutdown: a close that follows
    /// is the proxy's.
    closed_by_proxy: bool,
}

/// A truncated stream waiting for a re-send of its request.
#[derive(Debug, Clone)]
struct Pending {
    ex: Exchange,
    candidates: Vec<(u64, u64)>,
}

/// A remembered request.
#[derive(Debug, Clone)]
struct Recent {
    api: LlmApi,
    conn: u64,
    seq: u64,
    body_hash: u64,
    key: Option<String>,
    retry: Option<u32>,
    at: Instant,
}

/// The LLM rule and its state.
#[derive(Debug, Default)]
pub struct LlmRule {
    /// By (connection, request): a connection's streams are one range (closes and cuts).
    open: BTreeMap<(u64, u64), Exchange>,
    pending: Vec<Pending>,
    /// How many waiting truncations have each key and each (API, body hash): a request that
    /// matches neither cannot prove or be a candidate for any, and skips the scan.
    pending_keys: HashMap<String, u32>,
    pending_bodies: HashMap<(LlmApi, u64), u32>,
    recent: VecDeque<Recent>,
    /// Streams judged at once because a cap was reached.
    pub over_cap: u64,
}

impl LlmRule {
    /// Adds (`add`) or removes a waiting truncation's marks from the scan's filter.
    fn mark(&mut self, ex: &Exchange, add: bool) {
        fn bump<K: std::hash::Hash + Eq>(m: &mut HashMap<K, u32>, k: K, add: bool) {
            if add {
                *m.entry(k).or_insert(0) += 1;
            } else if let Some(n) = m.get_mut(&k) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    m.remove(&k);
                }
            }
        }
        if let Some(k) = &ex.key {
            bump(&mut self.pending_keys, k.clone(), add);
        }
        bump(&mut self.pending_bodies, (ex.api, ex.body_hash), add);
    }

    /// Whether `r` may prove or be a candidate for some waiting truncation.
    fn may_match(&self, r: &Recent) -> bool {
        self.pending_bodies.contains_key(&(r.api, r.body_hash))
            || r.key
                .as_ref()
                .is_some_and(|k| self.pending_keys.contains_key(k))
    }
}

/// How `r` proves it re-sends `ex`'s request, if it does.
fn proof(ex: &Exchange, r: &Recent) -> Option<String> {
    if (r.conn, r.seq) == (ex.conn, ex.seq) || r.at < ex.requested {
        return None;
    }
    if let (Some(a), Some(b)) = (&ex.key, &r.key)
        && a == b
    {
        return Some(format!("its Idempotency-Key '{b}'"));
    }
    if r.api == ex.api && r.body_hash == ex.body_hash && r.retry.is_some_and(|n| n > 0) {
        return Some(format!(
            "X-Stainless-Retry-Count {} with the same body",
            r.retry.unwrap_or(0)
        ));
    }
    None
}

fn is_candidate(ex: &Exchange, r: &Recent) -> bool {
    (r.conn, r.seq) != (ex.conn, ex.seq)
        && r.at >= ex.requested
        && r.api == ex.api
        && r.body_hash == ex.body_hash
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

impl Exchange {
    /// A request just seen, nothing of its stream yet.
    fn new(
        api: LlmApi,
        (conn, seq): (u64, u64),
        body_hash: u64,
        key: Option<String>,
        now: Instant,
    ) -> Self {
        Exchange {
            api,
            conn,
            seq,
            body_hash,
            key,
            requested: now,
            began: false,
            last: now,
            deltas: 0,
            tools: Vec::new(),
            tools_over: 0,
            completion: None,
            terminal: false,
            error: false,
            end: None,
            cut: None,
            closed_by_proxy: false,
        }
    }

    /// What the client had when the stream ended.
    fn delivered(&self) -> String {
        let mut parts = vec![format!(
            "{} text delta{}",
            self.deltas,
            if self.deltas == 1 { "" } else { "s" }
        )];
        for t in &self.tools {
            let parse = match t.status {
                ArgsStatus::Complete => "complete JSON",
                ArgsStatus::Empty => "none yet",
                ArgsStatus::Partial => "not parseable (partial JSON)",
                ArgsStatus::Invalid => "not parseable (invalid JSON)",
                ArgsStatus::Unknown => "nested too deep to judge",
            };
            parts.push(format!(
                "tool call {}{}: {} bytes of arguments, {parse}",
                t.index,
                t.name
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default(),
                t.bytes
            ));
        }
        if self.tools_over > 0 {
            parts.push(format!("{} more tool calls not followed", self.tools_over));
        }
        if self.error {
            parts.push("an error event".into());
        }
        parts.join("; ")
    }

    /// How the stream ended, in words.
    fn ending(&self) -> String {
        match (&self.cut, self.end.as_ref().map(|e| &e.1)) {
            (Some(c), _) => format!(
                "the proxy's {} cut{}{}",
                c.action.as_str(),
                c.position
                    .map(LlmPos::as_str)
                    .or(c.cut.class_name())
                    .map(|p| format!(" at {p}"))
                    .unwrap_or_default(),
                if c.action == CutAction::CleanEnd {
                    " (the body ended as if complete)"
                } else {
                    ""
                }
            ),
            (None, Some(End::Clean)) => {
                "the body ended normally (a clean end of the stream)".to_owned()
            }
            (None, Some(End::Broken)) => "the body stopped without its end".to_owned(),
            (None, Some(End::ClientReset(code))) => format!(
                "the client reset the stream (RST_STREAM({})): it gave up on the answer",
                crate::wire::h2::ErrorCode(*code).name().to_ascii_uppercase()
            ),
            (None, Some(End::Closed)) if self.closed_by_proxy => {
                "the proxy closed its connection at shutdown (its drain timeout ended with it \
                 open)"
                    .to_owned()
            }
            (None, Some(End::Closed)) if !self.began => {
                "its connection closed (the wire does not say which peer closed it)".to_owned()
            }
            (None, Some(End::Closed)) => {
                "its connection closed with the stream open (the wire does not say which peer closed it)"
                    .to_owned()
            }
            (None, None) => "it is still open".to_owned(),
        }
    }

    /// The stream ended as a complete one would (the body's own end, or the proxy's
    /// `clean-end`): the only ending a client can take for a whole answer without an error.
    fn ended_cleanly(&self) -> bool {
        match (&self.cut, self.end.as_ref().map(|e| &e.1)) {
            (Some(c), _) => c.action == CutAction::CleanEnd,
            (None, end) => end == Some(&End::Clean),
        }
    }

    /// The request's Idempotency-Key, as ids lead with it (empty when it had none).
    fn key_ids(&self) -> Vec<String> {
        self.key.iter().cloned().collect()
    }

    /// ` (Idempotency-Key k)`, or nothing.
    fn key_note(&self) -> String {
        self.key
            .as_deref()
            .map(|k| format!(" (Idempotency-Key {k})"))
            .unwrap_or_default()
    }

    fn reference(&self) -> StreamRef {
        StreamRef {
            request: format!("POST {}", self.api.endpoint()),
            rpc_ids: Vec::new(),
            conn: self.conn,
            seq: self.seq,
            ..StreamRef::default()
        }
    }

    fn signal(&self) -> &'static str {
        match self.api {
            LlmApi::ChatCompletions => "a finish_reason",
            LlmApi::Responses => "response.completed|incomplete|failed",
            LlmApi::Messages => "message_delta with a stop_reason",
        }
    }

    fn terminal_name(&self) -> &'static str {
        match self.api {
            LlmApi::ChatCompletions => "data: [DONE]",
            LlmApi::Responses => "response.completed",
            LlmApi::Messages => "message_stop",
        }
    }
}

impl LlmRule {
    fn llm_finding(l: &Ledger, kind: FindingKind, ex: &Exchange, now: Instant) -> Finding {
        let mut f = Finding::new(kind, l.ms(now), None, ex.reference());
        if let Some(c) = &ex.cut {
            f.cut = c.cut;
            f.raw_offsets = vec![c.raw_offset];
        }
        f
    }

    /// An LLM request: a new exchange, and perhaps the proven re-send of a truncated one.
    pub fn on_llm_request(&mut self, l: &mut Ledger, now: Instant, r: LlmRequestSeen) {
        let recent = Recent {
            api: r.api,
            conn: r.conn,
            seq: r.seq,
            body_hash: r.body_hash,
            key: r.idempotency_key.clone(),
            retry: r.retry_count,
            at: now,
        };
        let mut done = Vec::new();
        if self.may_match(&recent) {
            for (i, p) in self.pending.iter_mut().enumerate() {
                if let Some(how) = proof(&p.ex, &recent) {
                    done.push((i, how));
                } else if is_candidate(&p.ex, &recent) && p.candidates.len() < 8 {
                    p.candidates.push((r.conn, r.seq));
                }
            }
        }
        for (i, how) in done.into_iter().rev() {
            let p = self.pending.remove(i);
            self.mark(&p.ex, false);
            self.llm_retried(l, now, &p.ex, &recent, &how);
        }
        if self.recent.len() >= MAX_RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(recent);
        if self.open.len() >= MAX_OPEN {
            self.over_cap += 1;
            return;
        }
        self.open.insert(
            (r.conn, r.seq),
            Exchange::new(r.api, (r.conn, r.seq), r.body_hash, r.idempotency_key, now),
        );
    }

    /// An event of an LLM stream reached the client.
    pub fn on_llm_event(&mut self, _l: &mut Ledger, now: Instant, e: &LlmEventSeen) {
        let Some(ex) = self.open.get_mut(&(e.conn, e.seq)) else {
            return;
        };
        ex.began = true;
        ex.last = now;
        let f = &e.facts;
        ex.deltas += u64::from(f.text);
        if let Some(s) = &f.tool_start {
            if ex.tools.len() < MAX_TOOLS {
                ex.tools.push(Tool {
                    index: s.index,
                    name: s.name.clone(),
                    bytes: 0,
                    status: ArgsStatus::Empty,
                });
            } else {
                ex.tools_over += 1;
            }
        }
        if let Some(a) = &f.args
            && let Some(t) = ex.tools.iter_mut().find(|t| t.index == a.index)
        {
            t.bytes = a.bytes;
            t.status = a.status;
        }
        if f.completion.is_some() {
            ex.completion.clone_from(&f.completion);
        }
        ex.terminal |= f.terminal;
        ex.error |= f.error;
    }

    /// The observer gave up on the stream of `(conn, seq)` (an encoded body it does not
    /// decode, a line over its limit): its events were not read, so it is reported as not
    /// judged — never a truncation, stall or re-send verdict on bytes not read.
    pub fn on_llm_gave_up(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        (conn, seq): (u64, u64),
        raw_offset: u64,
        reason: &str,
    ) {
        let Some(ex) = self.open.remove(&(conn, seq)) else {
            return;
        };
        if l.legs.contains_key(&(conn, seq)) {
            // An MCP leg's own `observer-gave-up` (the ledger's) already says so.
            return;
        }
        let f = Self::llm_finding(l, FindingKind::ObserverGaveUp, &ex, now)
            .ids(ex.key_ids())
            .offsets(vec![raw_offset])
            .detail(format!(
                "{} stream{}: observer gave up at raw offset {raw_offset}: {reason}; its \
                 events were not read, so the stream is not judged (no llm-truncated, \
                 llm-retried, llm-stalled or llm-no-terminal from bytes not read)",
                ex.api,
                ex.key_note()
            ));
        l.emit(f);
    }

    /// A body that is not a stream answered `(conn, seq)`: nothing to follow.
    pub fn on_llm_body(&mut self, _l: &mut Ledger, conn: u64, seq: u64) {
        self.open.remove(&(conn, seq));
    }

    /// The response head of `(conn, seq)` reached the client: a `2xx text/event-stream` one
    /// begins the stream; any other answer is not a stream and ends the rule's interest.
    pub fn on_llm_response(
        &mut self,
        _l: &mut Ledger,
        now: Instant,
        conn: u64,
        seq: u64,
        status: u16,
        content_type: Option<&str>,
    ) {
        let sse = (200..300).contains(&status)
            && content_type.is_some_and(|c| {
                c.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
            });
        if !sse {
            self.open.remove(&(conn, seq));
        } else if let Some(ex) = self.open.get_mut(&(conn, seq)) {
            ex.began = true;
            ex.last = now;
        }
    }

    /// The SSE body of `(conn, seq)` ended (`clean`: with its framing).
    pub fn on_llm_stream_end(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        conn: u64,
        seq: u64,
        clean: bool,
    ) {
        let Some(mut ex) = self.open.remove(&(conn, seq)) else {
            return;
        };
        ex.began = true;
        let how = if clean { End::Clean } else { End::Broken };
        ex.end = Some((now, how));
        self.judge_llm_end(l, now, ex);
    }

    /// The proxy cut `conn`: the cut describes the stream open there (which ended just before).
    pub fn on_llm_cut(&mut self, _l: &mut Ledger, conn: u64, action: CutAction, point: &CutPoint) {
        let cut = Cut {
            action,
            position: point.llm,
            cut: FindingCut::from_point(point),
            raw_offset: point.raw_offset,
        };
        // On HTTP/2 a stream-scoped cut names its stream: only that exchange was cut.
        let only = point.h2_stream;
        let (from, to) = only.map_or((0, u64::MAX), |s| (s, s));
        if let Some(p) =
            self.pending.iter_mut().rev().find(|p| {
                p.ex.conn == conn && p.ex.cut.is_none() && only.is_none_or(|s| p.ex.seq == s)
            })
        {
            p.ex.cut = Some(cut);
        } else if let Some((_, ex)) = self.open.range_mut((conn, from)..=(conn, to)).next_back() {
            ex.cut = Some(cut);
        }
    }

    /// The client reset `(conn, seq)` (HTTP/2 `RST_STREAM`, `code`): a stream still open ends
    /// there, given up by the client; one the server's side already ended unclean (the
    /// observer may say so first) is told as the client's reset too.
    pub fn on_llm_client_reset(
        &mut self,
        l: &mut Ledger,
        now: Instant,
        conn: u64,
        seq: u64,
        code: u32,
    ) {
        if let Some(mut ex) = self.open.remove(&(conn, seq)) {
            ex.end = Some((now, End::ClientReset(code)));
            self.judge_llm_end(l, now, ex);
        } else if let Some(p) = self.pending.iter_mut().find(|p| {
            p.ex.conn == conn && p.ex.seq == seq && matches!(p.ex.end, Some((_, End::Broken)))
        }) && let Some(end) = p.ex.end.as_mut()
        {
            end.1 = End::ClientReset(code);
        }
    }

    /// `conn` closed: its LLM streams still open ended there.
    pub fn on_llm_conn_closed(&mut self, l: &mut Ledger, now: Instant, conn: u64) {
        let keys: Vec<(u64, u64)> = self
            .open
            .range((conn, 0)..=(conn, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            if let Some(mut ex) = self.open.remove(&k) {
                // Not begun: no response reached the client (judged as unanswered).
                ex.end = Some((now, End::Closed));
                self.judge_llm_end(l, now, ex);
            }
        }
    }

    fn judge_llm_end(&mut self, l: &mut Ledger, now: Instant, ex: Exchange) {
        let end_at = ex.end.as_ref().map_or(now, |e| e.0);
        let silent = end_at.saturating_duration_since(ex.last);
        if ex.began && ex.completion.is_some() {
            if !ex.terminal && ex.api != LlmApi::Responses {
                let f = Self::llm_finding(l, FindingKind::LlmNoTerminal, &ex, now).detail(format!(
                    "{} stream complete (completion signal '{}'; {}) but for its terminal \
                         event {}: the answer is whole; the stream ended: {}",
                    ex.api,
                    ex.completion.as_deref().unwrap_or(""),
                    ex.delivered(),
                    ex.terminal_name(),
                    ex.ending()
                ));
                l.emit(f);
            }
            return;
        }
        if ex.began && silent >= STALL_AFTER {
            let f = Self::llm_finding(l, FindingKind::LlmStalled, &ex, now).detail(format!(
                "{} stream silent for {} before it ended without its completion signal \
                     ({}); then {} — {} after the request",
                ex.api,
                secs(silent),
                ex.delivered(),
                ex.ending(),
                secs(end_at.saturating_duration_since(ex.requested))
            ));
            l.emit(f);
        }
        // A re-send already seen (before this end was judged) settles it now.
        let seen = self
            .recent
            .iter()
            .find_map(|r| proof(&ex, r).map(|how| (r.clone(), how)));
        if let Some((r, how)) = seen {
            self.llm_retried(l, now, &ex, &r, &how);
            return;
        }
        let candidates: Vec<(u64, u64)> = self
            .recent
            .iter()
            .filter(|r| is_candidate(&ex, r))
            .map(|r| (r.conn, r.seq))
            .take(8)
            .collect();
        if self.pending.len() >= MAX_PENDING {
            self.over_cap += 1;
            self.llm_truncated(l, now, Pending { ex, candidates });
            return;
        }
        self.mark(&ex, true);
        l.deadlines.arm_after(end_at, l.cfg.abandon_after);
        self.pending.push(Pending { ex, candidates });
    }

    fn llm_retried(&mut self, l: &mut Ledger, now: Instant, ex: &Exchange, r: &Recent, how: &str) {
        let mut ids = ex.key_ids();
        ids.push(format!("{}/{}", r.conn, r.seq));
        let what = if ex.began {
            format!(
                "stream{} ended before its completion signal ({}; ended: {})",
                ex.key_note(),
                ex.delivered(),
                ex.ending()
            )
        } else {
            format!(
                "request{} got no answer: {} before any response reached the client",
                ex.key_note(),
                ex.ending()
            )
        };
        let f = Self::llm_finding(l, FindingKind::LlmRetried, ex, now)
            .ids(ids)
            .detail(format!(
                "{} {what}; the request was sent again on connection {} (request {}), proven \
                 by {}: the client recovered",
                ex.api, r.conn, r.seq, how
            ));
        l.emit(f);
    }

    fn llm_truncated(&mut self, l: &mut Ledger, now: Instant, p: Pending) {
        let ex = &p.ex;
        let end_at = ex.end.as_ref().map_or(now, |e| e.0);
        let waited = now.saturating_duration_since(end_at);
        let candidates = if p.candidates.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = p
                .candidates
                .iter()
                .map(|(c, s)| format!("connection {c} request {s}"))
                .collect();
            format!(
                " Later requests with the same body and no re-send marker (the wire cannot \
                 tell a re-send from the application's next identical request): {}.",
                list.join(", ")
            )
        };
        let mut ids = ex.key_ids();
        ids.extend(p.candidates.iter().map(|(c, s)| format!("{c}/{s}")));
        if !ex.began {
            let f = Self::llm_finding(l, FindingKind::LlmUnanswered, ex, now)
                .ids(ids)
                .detail(format!(
                    "{} request{} got no answer: {} before any response reached the client. \
                     No proven re-send followed (waited {}): the client saw an error, or sent \
                     the request again without a marker.{}",
                    ex.api,
                    ex.key_note(),
                    ex.ending(),
                    secs(waited),
                    candidates
                ));
            l.emit_visible_loss(f);
            return;
        }
        let clean = ex.ended_cleanly();
        let gave_up = matches!(ex.end, Some((_, End::ClientReset(_)))) && ex.cut.is_none();
        let what_client_did = if gave_up {
            "the client gave up on the stream itself (its own RST_STREAM, as a client that \
             closes its connection), so it knows the answer is partial (a visible loss, not a \
             silent one)"
        } else if clean {
            "the client either failed visibly or used the partial answer — the wire cannot tell \
             which"
        } else {
            "the stream broke without its end, so the client saw an error (a visible loss, not \
             a silent one) unless it ignores errors"
        };
        let f = Self::llm_finding(l, FindingKind::LlmTruncated, ex, now)
            .ids(ids)
            .detail(format!(
                "{} stream{} ended before its completion signal ({}): the client received {}; \
                 ended: {}. No re-send of the request followed (waited {}): {what_client_did}.{}",
                ex.api,
                ex.key_note(),
                ex.signal(),
                ex.delivered(),
                ex.ending(),
                secs(waited),
                candidates
            ));
        if clean {
            l.emit(f);
        } else {
            l.emit_visible_loss(f);
        }
    }

    /// Settles truncations that waited `abandon_after` for a re-send.
    pub fn sweep_llm(&mut self, l: &mut Ledger, now: Instant) {
        let wait = l.cfg.abandon_after;
        let (due, keep): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| {
                p.ex.end
                    .as_ref()
                    .is_some_and(|e| now.saturating_duration_since(e.0) >= wait)
            });
        self.pending = keep;
        for p in due {
            self.mark(&p.ex, false);
            self.llm_truncated(l, now, p);
        }
    }

    /// The end of the run: every truncation still waiting is judged, and every stream still
    /// open without its completion signal and silent for [`STALL_AFTER`] is `llm-hung`.
    pub fn finish_llm(&mut self, l: &mut Ledger, now: Instant) {
        self.pending_keys.clear();
        self.pending_bodies.clear();
        for p in std::mem::take(&mut self.pending) {
            self.llm_truncated(l, now, p);
        }
        let open: Vec<Exchange> = self.open.values().cloned().collect();
        for ex in open {
            let silent = now.saturating_duration_since(ex.last);
            if ex.began && ex.completion.is_none() && silent >= STALL_AFTER {
                let f = Self::llm_finding(l, FindingKind::LlmHung, &ex, now).detail(format!(
                    "{} stream still open when the run ended, silent for {} without its \
                         completion signal ({}): nobody gave up (an SDK whose timeout stops at \
                         the response headers hangs here)",
                    ex.api,
                    secs(silent),
                    ex.delivered()
                ));
                l.emit(f);
            }
        }
    }

    /// The proxy is about to close every connection at shutdown: a stream still open without
    /// its completion signal and silent for [`STALL_AFTER`] is `llm-hung` now, before the
    /// proxy's close could make it look truncated; every other open stream is marked, so the
    /// close that follows is told as the proxy's.
    pub fn closing_llm(&mut self, l: &mut Ledger, now: Instant) {
        let hung: Vec<(u64, u64)> = self
            .open
            .iter()
            .filter(|(_, ex)| {
                ex.began
                    && ex.completion.is_none()
                    && now.saturating_duration_since(ex.last) >= STALL_AFTER
            })
            .map(|(k, _)| *k)
            .collect();
        for k in hung {
            if let Some(ex) = self.open.remove(&k) {
                let f = Self::llm_finding(l, FindingKind::LlmHung, &ex, now).detail(format!(
                    "{} stream still open when the proxy shut down, silent for {} without its \
                     completion signal ({}): nobody gave up (an SDK whose timeout stops at the \
                     response headers hangs here); the proxy then closed its connection",
                    ex.api,
                    secs(now.saturating_duration_since(ex.last)),
                    ex.delivered()
                ));
                l.emit(f);
            }
        }
        for ex in self.open.values_mut() {
            ex.closed_by_proxy = true;
        }
    }

    /// Entries held by the LLM rule (open streams, waiting truncations, remembered requests).
    pub fn llm_sizes(&self) -> (usize, usize, usize) {
        (self.open.len(), self.pending.len(), self.recent.len())
    }
}

impl Rule for LlmRule {
    fn name(&self) -> &'static str {
        "llm"
    }

    fn reads_observations(&self) -> bool {
        true
    }

    /// LLM requests and events, and the response heads, bodies, stream ends and cuts of LLM
    /// exchanges (before the engine applies them).
    fn on_observation(&mut self, l: &mut Ledger, now: Instant, obs: &Observation) {
        match obs {
            Observation::Cut {
                conn,
                action,
                point,
                ..
            } => self.on_llm_cut(l, *conn, *action, point),
            Observation::Response {
                conn,
                seq,
                status,
                content_type,
                ..
            } => self.on_llm_response(l, now, *conn, *seq, *status, content_type.as_deref()),
            Observation::ResponseBody { conn, seq, .. } => self.on_llm_body(l, *conn, *seq),
            Observation::StreamEnd { conn, seq, clean } => {
                self.on_llm_stream_end(l, now, *conn, *seq, *clean)
            }
            Observation::StreamReset {
                conn,
                seq,
                direction: Direction::Upstream,
                code,
                by_proxy: false,
            } => self.on_llm_client_reset(l, now, *conn, *seq, *code),
            Observation::LlmRequest(r) => self.on_llm_request(l, now, r.clone()),
            Observation::LlmEvent(e) => self.on_llm_event(l, now, e),
            Observation::ObserverGaveUp {
                conn,
                seq,
                raw_offset,
                reason,
            } => self.on_llm_gave_up(l, now, (*conn, *seq), *raw_offset, reason),
            _ => {}
        }
    }

    fn on_conn_closed(&mut self, l: &mut Ledger, now: Instant, conn: u64) {
        self.on_llm_conn_closed(l, now, conn);
    }

    fn on_closing(&mut self, l: &mut Ledger, now: Instant) {
        self.closing_llm(l, now);
    }

    fn sizes(&self) -> Vec<(&'static str, u64)> {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let (open, pending, recent) = self.llm_sizes();
        vec![
            ("llm_streams", n(open)),
            ("llm_truncations", n(pending)),
            ("llm_requests", n(recent)),
        ]
    }

    /// Truncations that waited `abandon_after` (all of them, and hung streams, at the end).
    fn on_sweep(&mut self, l: &mut Ledger, now: Instant, finish: bool) {
        if finish {
            self.finish_llm(l, now);
        } else {
            self.sweep_llm(l, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_or_a_numbered_attempt_with_the_same_body_proves_a_re_send() {
        let t = Instant::now();
        let ex = Exchange {
            began: true,
            ..Exchange::new(LlmApi::ChatCompletions, (1, 0), 42, Some("k1".into()), t)
        };
        let later = |key: Option<&str>, retry: Option<u32>, hash: u64| Recent {
            api: LlmApi::ChatCompletions,
            conn: 2,
            seq: 0,
            body_hash: hash,
            key: key.map(str::to_owned),
            retry,
            at: t + Duration::from_millis(5),
        };
        assert!(proof(&ex, &later(Some("k1"), None, 7)).is_some());
        assert!(proof(&ex, &later(Some("k2"), None, 42)).is_none());
        assert!(proof(&ex, &later(None, Some(1), 42)).is_some());
        assert!(proof(&ex, &later(None, Some(0), 42)).is_none());
        assert!(proof(&ex, &later(None, Some(1), 43)).is_none());
        assert!(proof(&ex, &later(None, None, 42)).is_none());
        assert!(is_candidate(&ex, &later(None, None, 42)));
        assert!(!is_candidate(&ex, &later(None, None, 43)));
    }
}
