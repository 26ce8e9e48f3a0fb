//! One session task's calls: issue `tools/call`, follow its stream through disconnects with the
//! configured policy, and decide how the call ended.
//!
//! Invariants:
//! - Every call ends in exactly one of ok / failed / silently lost, and is counted once.
//! - Strict: a call is ok if and only if the verified response for its current request id
//!   arrived. A stream that stops without it is resumed from the committed cursor, or the call
//!   is re-issued with a new id (no cursor, 2026-07-28 servers). A refused resume, an
//!   `event: error` or a fresh stream renegotiates the session and re-issues; nothing is ever
//!   accepted silently.
//! - Naive: resumes from the id line it saw last and accepts whatever comes; a clean stream
//!   end or an invalid response is taken as completion, which counts as silently lost.
//! - Client bug `stale-cursor` (off by default): after a resume is cut, the next resume sends
//!   the cursor the cut resume was sent with, not the newer one it reached.
//! - With truth recording on, every request of the call is recorded as one
//!   [`super::truth::ClientLeg`] once it stopped being read.
//! - A call uses at most `max_attempts` connections and ends by `call_timeout` after its start.
//! - `reissued` counts requests sent again after the previous one reached the server (a
//!   response head came back); a POST that never connected is retried, not re-issued.
//! - The counters that name a fact the audit also reports count it as the audit does:
//!   `torn-cut` (every policy: a stop with part of an undispatched event in hand),
//!   `explicit-loss` (a resume refused, or answered with `event: error`), `abandoned` (a call
//!   ended without its answer while its last request's stream or body was cut: nothing was
//!   sent for it afterwards); each finished call's share of the counters is kept, with its
//!   requests, when `keep_calls` asks (`replay` reconciles them with the audit per call).
//! - A session the client abandons (to renegotiate) is ended with a DELETE first, within
//!   [`ABANDON_BUDGET`], unless the server already said it is gone (404); a failed DELETE is
//!   only logged.
//! - Strict and retry send every call's POSTs with one `Idempotency-Key`, fresh per logical
//!   call (unique across workers and runs) and repeated on each of its re-sends; naive sends
//!   none.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use tokio::time::{Duration, Instant};

use super::config::{LoadConfig, Policy};
use super::consume::{Clock, Consumed, Stop, consume};
use super::histo::{self, Histograms};
use super::http::HttpError;
use super::policy::{Judgement, RequestStream};
use super::session::Session;
use super::stats::{CallEnd, CallFacts, CallTrace, Counters, ResumeAnswer};

/// Longest wait for the DELETE of an abandoned session.
pub const ABANDON_BUDGET: Duration = Duration::from_secs(1);
use super::truth::ClientLeg;

/// The state and records of one session task.
#[derive(Debug)]
pub struct Worker {
    cfg: Arc<LoadConfig>,
    session: Option<Session>,
    /// Counters of this task.
    pub counters: Counters,
    /// Histograms of this task.
    pub histos: Histograms,
    /// Disconnect stories of this task (at most `max_traces`).
    pub traces: Vec<CallTrace>,
    /// Failures by kind (HTTP error kinds, statuses, verification failures).
    pub errors: BTreeMap<&'static str, u64>,
    /// The first message of each failure kind that had one (the server's JSON-RPC error
    /// message, the connection error), so a run where nothing succeeded can say why.
    pub error_messages: BTreeMap<&'static str, String>,
    /// Added to every request id (see [`super::segment::Segment::request_id_base`]).
    pub id_base: u64,
    /// Calls started by this worker (the index of the next one).
    calls_started: u64,
    /// Random per worker: makes `Idempotency-Key`s and progress tokens unique across workers
    /// and runs.
    key_nonce: u64,
    /// Whether the last request of the current call that reached the server was cut (its
    /// stream or JSON body broke).
    last_leg_broken: bool,
    /// The current call's requests (POSTs that reached the server): session and id.
    requests: Vec<(Option<String>, u64)>,
    /// Finished calls as the client saw them (at most `LoadConfig::keep_calls`).
    pub calls: Vec<CallFacts>,
}

/// What to do next inside a call.
enum Step {
    Issue,
    Resume {
        cursor: String,
        from: Instant,
        retry: Option<u64>,
    },
}

impl Worker {
    /// A task with an optional already-open session.
    pub fn new(cfg: Arc<LoadConfig>, session: Option<Session>) -> Worker {
        Worker {
            cfg,
            session,
            counters: Counters::default(),
            histos: Histograms::default(),
            traces: Vec::new(),
            errors: BTreeMap::new(),
            error_messages: BTreeMap::new(),
            id_base: 0,
            calls_started: 0,
            key_nonce: rand::random(),
            last_leg_broken: false,
            requests: Vec::new(),
            calls: Vec::new(),
        }
    }

    fn error(&mut self, kind: &'static str) {
        *self.errors.entry(kind).or_insert(0) += 1;
    }

    /// Counts a failure of `kind` and keeps `message` if it is the kind's first.
    fn error_said(&mut self, kind: &'static str, message: String) {
        self.error(kind);
        self.error_messages.entry(kind).or_insert(message);
    }

    /// Runs one call intended to start at `intended` and records how it ended.
    pub async fn call(&mut self, intended: Instant) -> CallEnd {
        let first_trace = self.traces.len();
        let before = self.counters;
        self.last_leg_broken = false;
        self.requests.clear();
        let end = self.drive(intended).await;
        let c = &mut self.counters;
        c.calls += 1;
        match end {
            CallEnd::Ok => c.ok += 1,
            CallEnd::Failed => c.failed += 1,
            CallEnd::SilentlyLost => c.silent_loss += 1,
        }
        if end != CallEnd::Ok && self.last_leg_broken {
            c.abandoned += 1;
        }
        for t in &mut self.traces[first_trace..] {
            t.outcome = Some(end);
        }
        if self.calls.len() < self.cfg.keep_calls {
            self.calls.push(CallFacts {
                requests: std::mem::take(&mut self.requests),
                counts: self.counters.since(&before),
                end,
            });
        }
        end
    }

    /// Drops the session (the next attempt renegotiates); with `delete`, first tells the
    /// server with a DELETE so it does not keep the abandoned session until it expires.
    async fn abandon(&mut self, delete: bool) {
        if let Some(s) = self.session.take()
            && delete
        {
            let budget = self.cfg.connect_timeout.min(ABANDON_BUDGET);
            s.delete(budget).await;
        }
    }

    async fn backoff(&self, delay: Duration, deadline: Instant) {
        let delay = delay.min(self.cfg.max_backoff);
        tokio::time::sleep_until((Instant::now() + delay).min(deadline)).await;
    }

    async fn drive(&mut self, intended: Instant) -> CallEnd {
        let cfg = Arc::clone(&self.cfg);
        let policy = cfg.policy;
        let call_index = self.calls_started;
        self.calls_started += 1;
        // The re-send marker: one key per logical call, on every POST of it.
        let key = policy
            .verifies()
            .then(|| format!("tl-{:016x}-{:x}-{call_index}", self.key_nonce, self.id_base));
        let args = if cfg.distinct_args {
            let mut a = cfg.args.clone();
            if let Some(o) = a.as_object_mut() {
                o.insert("item".to_owned(), call_index.into());
            }
            a
        } else {
            cfg.args.clone()
        };
        let deadline = intended.max(Instant::now()) + cfg.call_timeout;
        let mut clock = Clock {
            intended,
            deadline,
            first_event_seen: false,
            resumed_from: None,
            recovering_from: None,
            last_event_at: None,
        };
        let mut req: Option<RequestStream> = None;
        // True once the current request reached the server (a response head came back): only
        // then does sending the call again count as a re-issue.
        let mut reached = false;
        let mut cursor = String::new();
        let mut step = Step::Issue;
        let mut open_trace: Option<usize> = None;
        let mut had_session = self.session.is_some();
        // The reconnection time persists across the call's connections (WHATWG).
        let mut retry: Option<u64> = None;
        // Seed 000: this call's resumes carry the narrowed refresh token until the strict
        // client re-authorizes (see `LoadConfig::resume_token`).
        let mut narrowed = cfg.resume_token.is_some();
        for _ in 0..cfg.max_attempts.max(1) {
            if Instant::now() >= deadline {
                break;
            }
            if self.session.is_none() {
                if had_session {
                    self.counters.renegotiations += 1;
                }
                match Session::open(&cfg, deadline).await {
                    Ok(s) => self.session = Some(s),
                    Err(e) => {
                        self.error_said(e.kind(), e.to_string());
                        self.backoff(cfg.backoff, deadline).await;
                        continue;
                    }
                }
                had_session = true;
            }
            let Some(session) = self.session.as_mut() else {
                continue;
            };
            let resuming = matches!(step, Step::Resume { .. });
            let mut leg = cfg.truth.as_ref().map(|_| ClientLeg {
                session: session.id.clone().unwrap_or_default(),
                method: if resuming { "GET" } else { "POST" }.to_owned(),
                path: cfg.target.path.clone(),
                call: call_index,
                idempotency_key: key.clone().filter(|_| !resuming),
                ..ClientLeg::default()
            });
            // True when this request's head had a budget shorter than the call's (see
            // `LoadConfig::head_timeout`): its timeout is a `head-timeout`, not the call's end.
            let mut head_cut_short = false;
            let resends = session.silent_resends;
            let sent = match std::mem::replace(&mut step, Step::Issue) {
                Step::Resume {
                    cursor: c,
                    from,
                    retry,
                } => {
                    let delay = retry.map_or(cfg.backoff, Duration::from_millis);
                    tokio::time::sleep_until(
                        (Instant::now() + delay.min(cfg.max_backoff)).min(deadline),
                    )
                    .await;
                    self.counters.resumes += 1;
                    if let Some(t) = open_trace.and_then(|i| self.traces.get_mut(i)) {
                        t.last_event_id_sent = Some(c.clone());
                    }
                    clock.resumed_from = Some(from);
                    if let Some(l) = &mut leg {
                        l.cursor = Some(c.clone());
                    }
                    session.resume_token = cfg.resume_token.clone().filter(|_| narrowed);
                    let r = session.send("GET", b"", Some(&c), deadline, true).await;
                    step = Step::Resume {
                        cursor: c,
                        from,
                        retry,
                    };
                    r
                }
                Step::Issue => {
                    if req.is_some() && reached {
                        self.counters.reissued += 1;
                    }
                    reached = false;
                    let id = self.id_base + session.next_request_id();
                    let mut r = RequestStream::new(policy, id);
                    // Unique per worker and run, as MCP asks of tokens among active requests:
                    // a token another session's stream carries then names this call alone.
                    r.progress_token = format!("tl-{:016x}-{id}", self.key_nonce);
                    r.tape = leg.as_ref().map(|_| Vec::new());
                    let body = json!({
                        "jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": {
                            "name": cfg.tool, "arguments": args,
                            "_meta": {"progressToken": r.progress_token},
                        }
                    });
                    req = Some(r);
                    cursor.clear();
                    clock.resumed_from = None;
                    let head_deadline = cfg
                        .head_timeout
                        .map_or(deadline, |h| deadline.min(Instant::now() + h));
                    let r = session
                        .send_call(body.to_string().as_bytes(), key.as_deref(), head_deadline)
                        .await;
                    head_cut_short = head_deadline < deadline;
                    r
                }
            };
            let Some(rq) = req.as_mut() else {
                continue;
            };
            if let Some(l) = &mut leg {
                l.request_id = Some(rq.request_id);
                // A sending lost with its pooled connection before this one: a leg of its own
                // (it may have reached the server), in send order.
                let resent = self.session.as_ref().map_or(0, |s| s.silent_resends) > resends;
                if resent {
                    record(&cfg, Some(l.clone()), "resent");
                }
                l.status = sent.as_ref().ok().map(|r| r.status);
            }
            let mut resp = match sent {
                Ok(resp) => {
                    step = Step::Issue;
                    reached = true;
                    self.last_leg_broken = false;
                    if !resuming {
                        let sid = self.session.as_ref().and_then(|s| s.id.clone());
                        self.requests.push((sid, rq.request_id));
                    }
                    resp
                }
                Err(e) => {
                    let kind = match e {
                        HttpError::Timeout if head_cut_short => {
                            // The POST went out on a live connection: the server may be
                            // running it, so sending it again is a re-issue.
                            reached = true;
                            let sid = self.session.as_ref().and_then(|s| s.id.clone());
                            self.requests.push((sid, rq.request_id));
                            "head-timeout"
                        }
                        _ => e.kind(),
                    };
                    record(&cfg, leg, kind);
                    self.error_said(kind, e.to_string());
                    if resuming {
                        self.answer(open_trace, ResumeAnswer::NoResponse { error: e.kind() });
                    } else {
                        step = Step::Issue;
                    }
                    self.backoff(cfg.backoff, deadline).await;
                    continue;
                }
            };
            // Resume refused or POST refused: an explicit failure.
            if resp.status != 200 || (resuming && !resp.is_event_stream()) {
                record(&cfg, leg, "refused");
                self.counters.explicit_errors += 1;
                self.error_said(status_kind(resp.status), format!("HTTP {}", resp.status));
                if resuming {
                    self.counters.explicit_loss += 1;
                    self.answer(
                        open_trace,
                        ResumeAnswer::Refused {
                            status: resp.status,
                        },
                    );
                }
                // A 404 says the session is already gone; any other refusal leaves it open.
                self.abandon(resp.status != 404).await;
                step = Step::Issue;
                if policy == Policy::Naive && (resuming || resp.status != 404) {
                    return CallEnd::Failed;
                }
                continue;
            }
            if !resp.is_event_stream() {
                let mut leg = leg;
                match resp.body.read_all(deadline).await {
                    Ok(bytes) => match serde_json::from_slice(&bytes) {
                        Ok(msg) => rq.on_message(msg),
                        Err(_) => self.error("json-body"),
                    },
                    Err(e) => {
                        self.last_leg_broken = true;
                        self.error(e.kind());
                    }
                }
                if let Some(s) = self.session.as_mut() {
                    s.recycle(resp.body);
                }
                if let Some(l) = &mut leg {
                    l.answered = rq.has_response();
                }
                record(&cfg, leg, "json");
                let judged = rq.judge(&args);
                // 2026-07-28: a JSON body cut before the response is a cut call, as a cut
                // stream is: re-send only what is safe to repeat (era.rs).
                if !rq.has_response()
                    && let Some(s) = self.session.as_ref().filter(|s| s.modern)
                    && let Some((end, why)) =
                        super::era::after_cut(policy, s.repeat_safe, judged.clone())
                {
                    if let Some(why) = why {
                        self.error(why);
                    }
                    return end;
                }
                match self.settle(policy, judged, rq.error_message(), &clock) {
                    Some(end) => return end,
                    None => continue,
                }
            }
            let got = consume(
                &mut resp,
                policy,
                &cursor,
                rq,
                &mut clock,
                &mut self.counters,
                &mut self.histos,
            )
            .await;
            if got.reusable
                && let Some(s) = self.session.as_mut()
            {
                s.recycle(resp.body);
            }
            if resuming {
                let answer = ResumeAnswer::Stream {
                    first_id: got.first_id.clone(),
                    discontinuous: matches!(got.stop, Stop::Discontinuity),
                    error_event: rq.error_event,
                };
                self.answer(open_trace, answer);
            }
            self.last_leg_broken = matches!(got.stop, Stop::Broken(_));
            if let Some(mut l) = leg {
                l.dispatched = rq.tape.replace(Vec::new()).unwrap_or_default();
                l.committed.clone_from(&got.committed);
                l.partial = got.partial;
                l.answered = rq.has_response();
                record(&cfg, Some(l), truth_stop(&got.stop));
            }
            // The stale-cursor client bug keeps the cursor its cut resume was sent with.
            if !(cfg.stale_cursor && resuming) {
                cursor.clone_from(&got.cursor);
            }
            retry = got.retry.or(retry);
            if !matches!(got.stop, Stop::Answered) {
                // Recovery is measured from the first cut of a series.
                clock.recovering_from.get_or_insert(got.at);
            }
            match got.stop {
                Stop::Answered => {
                    let judged = rq.judge(&args);
                    match self.settle(policy, judged, rq.error_message(), &clock) {
                        Some(end) => return end,
                        None => continue,
                    }
                }
                Stop::Discontinuity | Stop::ErrorEvent => {
                    if rq.error_event {
                        self.counters.explicit_errors += 1;
                        if resuming {
                            self.counters.explicit_loss += 1;
                        }
                    }
                    self.error(got.stop.label());
                    self.abandon(true).await;
                    continue;
                }
                Stop::CleanEnd | Stop::Broken(_) => {}
            }
            if got.partial {
                self.counters.torn_cut += 1;
            }
            if policy.verifies() && resuming && narrowed && matches!(got.stop, Stop::CleanEnd) {
                // Seed 000: a clean end is not completion; the narrowed audience may have hidden
                // this call's events. Re-authorize with the full token and resume again.
                narrowed = false;
                self.error("clean-end-call-pending");
            }
            open_trace = self.story(rq.request_id, &got);
            if policy == Policy::Naive && matches!(got.stop, Stop::CleanEnd) {
                // The documents' client: a clean end is completion.
                return match rq.judge(&args) {
                    Judgement::Valid => CallEnd::Ok,
                    _ => CallEnd::SilentlyLost,
                };
            }
            // 2026-07-28: nothing to resume; re-issue only what is safe to repeat (era.rs).
            if cursor.is_empty()
                && let Some(s) = self.session.as_ref().filter(|s| s.modern)
                && let Some((end, why)) =
                    super::era::after_cut(policy, s.repeat_safe, rq.judge(&args))
            {
                if let Some(why) = why {
                    self.error(why);
                }
                return end;
            }
            if !cursor.is_empty() {
                step = Step::Resume {
                    cursor: cursor.clone(),
                    from: got.at,
                    retry,
                };
            }
        }
        self.error("attempts-or-time-exhausted");
        CallEnd::Failed
    }

    /// Ends the call on an answer, or returns None to re-issue (strict, invalid answer).
    /// `rpc_error` is the server's JSON-RPC error, if the answer was one.
    fn settle(
        &mut self,
        policy: Policy,
        judged: Judgement,
        rpc_error: Option<String>,
        clock: &Clock,
    ) -> Option<CallEnd> {
        match (judged, policy) {
            (Judgement::Valid, _) => {
                self.histos
                    .record(histo::CALL, Instant::now() - clock.intended);
                if let Some(last) = clock.last_event_at {
                    self.histos.record(histo::LAST_EVENT, last - clock.intended);
                }
                Some(CallEnd::Ok)
            }
            (Judgement::RpcError, _) => {
                self.counters.explicit_errors += 1;
                match rpc_error {
                    Some(m) => self.error_said("jsonrpc-error", m),
                    None => self.error("jsonrpc-error"),
                }
                Some(CallEnd::Failed)
            }
            (Judgement::Invalid(why), Policy::Strict | Policy::Retry) => {
                self.error(why);
                None
            }
            (Judgement::Missing, Policy::Strict | Policy::Retry) => None,
            (Judgement::Invalid(_) | Judgement::Missing, Policy::Naive) => {
                Some(CallEnd::SilentlyLost)
            }
        }
    }

    fn answer(&mut self, trace: Option<usize>, answer: ResumeAnswer) {
        if let Some(t) = trace.and_then(|i| self.traces.get_mut(i))
            && t.answer.is_none()
        {
            t.answer = Some(answer);
        }
    }

    /// Keeps the story of a disconnect if there is room; returns its index.
    fn story(&mut self, request_id: u64, got: &Consumed) -> Option<usize> {
        if self.traces.len() >= self.cfg.max_traces {
            return None;
        }
        self.traces.push(CallTrace {
            policy: self.cfg.policy,
            request_id,
            stop: got.stop.label(),
            committed_id: got.committed.clone(),
            pending_id: got.pending.clone(),
            partial: got.partial,
            partial_data_lines: got.tail.data_lines,
            mid_data_line: got.tail.mid_data_line,
            partial_bytes: got.tail.bytes,
            last_event_id_sent: None,
            answer: None,
            outcome: None,
        });
        Some(self.traces.len() - 1)
    }
}

/// The stop a truth record keeps: the stop's label, except that an I/O error other than a
/// reset is `io-closed` (on HTTP/2 hyper reports the server's orderly close in mid-body as an
/// I/O error: a broken pipe, or bytes of an incomplete frame remaining), so that `io` means a
/// reset alone — the only end that may discard what the client had not read yet.
fn truth_stop(stop: &Stop) -> &'static str {
    match stop {
        Stop::Broken(super::http::HttpError::Io(e))
            if !matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
            ) =>
        {
            "io-closed"
        }
        s => s.label(),
    }
}

/// Appends a finished leg to the client's truth record, if it keeps one.
fn record(cfg: &LoadConfig, leg: Option<ClientLeg>, stop: &str) {
    if let (Some(truth), Some(mut leg)) = (&cfg.truth, leg) {
        leg.stop = stop.to_owned();
        truth.push(leg);
    }
}

fn status_kind(status: u16) -> &'static str {
    match status {
        202 => "http-202",
        400 => "http-400",
        401 => "http-401",
        403 => "http-403",
        404 => "http-404",
        405 => "http-405",
        409 => "http-409",
        410 => "http-410",
        429 => "http-429",
        500..=599 => "http-5xx",
        _ => "http-other",
    }
}
