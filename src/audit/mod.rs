//! The resume audit: a ledger per session and stream, turned into findings.
//!
//! The proxy sees everything a client and a server exchange: what it fully delivered, where it
//! cut, the client's `Last-Event-ID` on the reconnect, and what the server sent back. The
//! [`Auditor`] consumes the wire observers' [`Observation`]s and judges, for any client and any
//! server, whether a cut stream recovered correctly. Finding kinds and their evidence are in
//! [`finding`]; the replay rules (what is owed, what is fresh, what is a gap) in [`judge`].
//!
//! Invariants:
//! - `record` never waits on the ledger or on I/O: it pushes onto a bounded queue ([`intake`];
//!   a full queue drops and counts the observation, see [`Auditor::dropped`]); a worker task
//!   (spawned on the first `record` inside a tokio runtime) applies the queue to the ledger, and
//!   every query first drains the queue itself, so a query sees everything recorded before it.
//!   Between wakes the worker sleeps until the ledger's next deadline ([`deadline`]) and sweeps
//!   then, so a time-based verdict never waits for traffic or a query.
//!   The findings log is written by its own thread ([`log`]), never on the data path.
//! - Time is the observation's receipt time (`tokio::time::Instant::now()` in `record`, once
//!   per batch in `record_all`: one delivery's observations reached the peer in one write); the
//!   histograms and `at_ms` use it, so a paused test clock drives them exactly.
//! - Memory is bounded per stream (`ids_per_stream` ids and hashes, never payloads), streams and
//!   sessions are forgotten `grace` after they end, an ended stream is kept compact (its newest
//!   `ended_events` events) and at most `max_ended_streams` of them are kept (evictions counted,
//!   see [`grace`]), and at most `max_findings` findings are kept in memory (counters and the log
//!   see every finding).
//! - Where the proxy cannot know, the finding is `unknown` with the reason in `detail`.
//! - HTTP/2 (a connection announced by `Observation::Protocol`): an exchange is keyed
//!   (connection, stream id), exactly as an HTTP/1.1 one is (connection, request number);
//!   nothing assumes ids are contiguous or that streams answer in order; a cut naming a stream
//!   ends that stream only; every finding names the protocol and, on HTTP/2, the stream id
//!   (`StreamRef::protocol`, `h2_stream`). What an endpoint's reset or `GOAWAY` means is in
//!   [`h2`] (`stream-reset`, class info; a stream not processed and never re-sent is
//!   `abandoned`).
//! - Observations may arrive out of exchange order (a response before its request); [`order`]
//!   holds them until their request, so every judgement sees request, response, events, cut in
//!   that order.
//!
//! The audit's shape: a shared [`ledger`] of facts, an [`engine`] that applies observations to
//! it, and judgements written as rules ([`rule::Rule`], one file each under `rules/`, run by
//! the registry [`rules`] in a fixed order). A rule owns its state, reads the ledger, emits
//! findings through it, and imports nothing of another rule; where one rule's conclusion
//! matters to another, it records a fact in the ledger (a proven re-send: the call is marked
//! replaced and a `Resent` event is queued, which the registry hands to every rule; a link the
//! re-send rule holds for a moment is made or dropped before anything received later is
//! applied, and a dropped one's call is handed on as unproven). The unit
//! test in `imports.rs` fails on an import circle among these files or a rule importing
//! another.
//!
//! Files:
//! - Base types (import nothing of the audit but each other, no circle): [`config`]
//!   ([`AuditConfig`]), [`finding`] (kinds and their class: loss, duplicate, order, client-bug,
//!   server-bug, info), [`stream`] (one stream's bounded ledger, call shapes, id helpers),
//!   [`sequence`] (order and gaps across all legs of a logical stream, from counter ids and MCP
//!   progress values; pure), [`judge`] (the replay rules of a resume leg; pure), [`leak`] (the
//!   index of call names and the by-name evidence for `cross-stream` between sessions),
//!   [`grace`] (the ended-stream queue), [`deadline`] (when the next wait falls due),
//!   [`gauges`] (table shrinking), [`rpc`], [`histo`],
//!   [`log`], [`intake`].
//! - [`ledger`]: the shared facts — sessions, streams, legs (exchanges), calls, the event-id
//!   index, deferred findings, findings emission (counts, log, loss tally), histograms, clock,
//!   and the ledger events rules leave for each other ([`ledger::Resent`], `ids_shared`).
//! - [`rule`]: the [`rule::Rule`] trait (hooks: request, call, re-send, stream opened, resume,
//!   delivery, answer, cut, leg end, closing, sweep, forget) and the views its hooks are given.
//! - [`engine`] (with [`order`]: exchange order; [`exchange`]: requests, streams and calls,
//!   mapping a resume's cursor to its stream and fixing what the resume owes, matching
//!   JSON-RPC answers; [`events`]: responses, SSE events (classified against the stream for
//!   a replay: owed, duplicate, reused, another stream's, priming, unseen), cuts and the torn
//!   event, leg ends; [`h2`]: a connection's protocol, an endpoint's `RST_STREAM`, `GOAWAY`):
//!   applies observations to the ledger and calls the registry's hooks;
//!   forgets streams and settles the rules. Besides facts it reports only what is about the
//!   audit itself: `unknown` (a request never seen, a cursor no single stream owns) and
//!   `observer-gave-up`.
//! - [`rules`] (the registry) and its rules, one judgement (or one family sharing one state)
//!   each: `torn` (`torn-cut`), `pending` (`pending-call`, deferred), `cursor`
//!   (`cursor-ahead`, `cursor-behind`), `replay` (the verdict of [`judge`] on a resume leg:
//!   `replay-exact|gap|duplicate|reorder`, `fresh-stream`, `cross-stream`, `explicit-loss`,
//!   `silent-empty`), `duplicate_response`, `cursor_missing` (a re-open or re-send without
//!   `Last-Event-ID` and no resume), `reissue` (`reissued`: linking a call sent again to the
//!   call it replaces, only on proof — the same `Idempotency-Key`, or the same JSON-RPC id,
//!   method and params from the same client), `abandoned` (a cut call with no answer, no
//!   resume and no proven re-send is `abandoned`, class loss, in both eras, or
//!   `unproven-resend`, class ambiguous, if an identical call followed it without proof),
//!   `stateless` (MCP 2026-07-28: `reexecuted`, `sent-after-cancel`), `truncation`
//!   (`truncation-accepted`: a client that took a TLS truncation for the end of its call),
//!   `llm` (LLM token streams: `llm-truncated`, `llm-unanswered`, `llm-retried`,
//!   `llm-no-terminal`, `llm-stalled`, `llm-hung`; it reads the wire's LLM observations
//!   through `on_observation`).
//!
//! The summary opens with "silent loss observed: yes/no (N calls affected)", counted from the
//! `loss` findings (`abandoned` included, `unproven-resend` not: a second line counts those)
//! except the LLM losses the client saw as errors (a stream that broke, a request with no
//! answer), which follow as "; visible loss: M calls (…)" when there are any; judgements still
//! awaiting a resume or a re-send are
//! listed under it, and settle `abandon_after` after the cut or stream end, or at
//! [`Auditor::finish`] (the end of a run), whatever the wait.

pub mod config;
pub mod deadline;
pub mod engine;
pub mod events;
pub mod exchange;
pub mod finding;
pub mod gauges;
pub mod grace;
pub mod h2;
pub mod histo;
pub mod holes;
#[cfg(test)]
mod imports;
pub mod intake;
pub mod judge;
pub mod leak;
pub mod ledger;
pub mod log;
pub mod order;
pub mod rpc;
pub mod rule;
pub mod rules;
pub mod sequence;
pub mod stream;
pub mod unjudged;

pub use config::AuditConfig;
pub use finding::{CandidateCall, Finding, FindingClass, FindingKind, StreamRef};

use crate::wire::{Observation, ObservationSink};
use engine::Engine;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::time::Instant;

/// Errors of the audit.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The findings log could not be created.
    #[error("cannot create findings log {path}")]
    OpenLog {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The auditor: an [`ObservationSink`] that keeps the ledger and produces findings.
#[derive(Debug)]
pub struct Auditor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    engine: Mutex<Engine>,
    intake: intake::Intake,
}

impl Inner {
    fn lock_engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies everything queued, in order; returns the engine (and its ledger), locked.
    fn drain(&self) -> MutexGuard<'_, Engine> {
        let mut l = self.lock_engine();
        let mut batch = self.intake.take();
        // Drops counted by now are of observations pushed after this batch's: the batch's
        // observations of those connections are not judged as if whole either.
        let dropped = self.intake.take_holes();
        let now = batch.back().map_or(l.l.clock, |(at, _)| *at);
        l.note_dropped(dropped, now);
        for (at, obs) in batch.drain(..) {
            l.arrive_checked(at, obs);
            l.maybe_sweep(at);
        }
        self.intake.recycle(batch);
        // Whatever is received from now on has a later receipt time: the re-send links held
        // until now are settled (a query sees them made once their hold ended).
        l.settle_held(Instant::now(), false);
        l
    }
}

/// The worker: drains the intake whenever it is woken, until the auditor is dropped (its
/// `Drop` wakes the worker, which then finds no auditor and ends).
///
/// Woken (the queue was empty), it first yields once: the tasks already ready (other
/// connections' pumps, woken by the same poll of the sockets) run before it, and what they
/// record joins the batch, so one drain (one lock of the ledger, one pass over its tables while
/// they are in the cache) serves a burst of streams rather than each event. Receipt times are
/// taken in `record` and `record_all`, so they do not depend on when the worker runs.
///
/// Between wakes it sleeps until the ledger's next deadline ([`deadline`]; none: it only waits
/// to be woken), then sweeps: every time-based verdict comes within [`deadline::TICK`] of its
/// deadline, with no traffic and no polling. A paused auditor neither drains nor sweeps.
async fn worker(inner: Weak<Inner>, wake: Arc<tokio::sync::Notify>) {
    let mut due: Option<Instant> = None;
    loop {
        match due {
            Some(at) => {
                tokio::select! {
                    () = wake.notified() => tokio::task::yield_now().await,
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            None => {
                wake.notified().await;
                tokio::task::yield_now().await;
            }
        }
        let Some(strong) = inner.upgrade() else {
            return;
        };
        due = None;
        if !strong.intake.paused() {
            let mut e = strong.drain();
            e.sweep_if_due(Instant::now());
            due = e.l.deadlines.next();
        }
    }
}

impl Auditor {
    /// A new auditor; its clock starts now.
    pub fn new(config: AuditConfig) -> Self {
        let limit = config.queue;
        Self::with_queue_limit(config, limit)
    }

    /// A new auditor whose intake holds at most `limit` observations (not `config.queue`).
    pub fn with_queue_limit(config: AuditConfig, limit: usize) -> Self {
        Auditor {
            inner: Arc::new(Inner {
                engine: Mutex::new(Engine::new(config, Instant::now())),
                intake: intake::Intake::new(limit),
            }),
        }
    }

    /// The engine with everything recorded so far applied.
    fn lock(&self) -> MutexGuard<'_, Engine> {
        self.inner.drain()
    }

    /// Observations dropped because the intake queue was full (the relay never waits).
    pub fn dropped(&self) -> u64 {
        self.inner.intake.dropped()
    }

    /// Ended streams forgotten before their grace because of `max_ended_streams` (see
    /// [`grace`]).
    pub fn evicted(&self) -> u64 {
        self.lock().l.ended.evicted
    }

    /// Stops (`true`) or resumes the worker that applies observations to the ledger; queries
    /// still drain. A paused auditor is a slow consumer: its queue fills, then drops and counts.
    pub fn set_paused(&self, paused: bool) {
        self.inner.intake.set_paused(paused);
    }

    fn ensure_worker(&self) {
        if self.inner.intake.worker.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current()
            && !self.inner.intake.worker.swap(true, Ordering::AcqRel)
        {
            rt.spawn(worker(
                Arc::downgrade(&self.inner),
                self.inner.intake.wake.clone(),
            ));
        }
    }

    /// Writes every finding from now on as one JSON line to `path` (created or truncated).
    pub fn log_to_file(&self, path: &Path) -> Result<(), AuditError> {
        let file = std::fs::File::create(path).map_err(|source| AuditError::OpenLog {
            path: path.to_path_buf(),
            source,
        })?;
        self.log_to(Box::new(std::io::BufWriter::new(file)));
        Ok(())
    }

    /// Writes every finding from now on as one JSON line to `out`.
    pub fn log_to(&self, out: Box<dyn std::io::Write + Send>) {
        self.lock().l.log = Some(log::FindingsLog::new(out));
    }

    /// Waits until every finding reported so far is written to the findings log.
    pub fn flush_log(&self) {
        let e = self.lock();
        if let Some(log) = &e.l.log {
            log.sync();
        }
    }

    /// The findings so far (at most `max_findings`), in the order found, after settling the
    /// judgements that are due (a `pending-call` appears here once `abandon_after` passed
    /// without a resume or re-issue).
    pub fn findings(&self) -> Vec<Finding> {
        let mut e = self.lock();
        e.sweep(Instant::now());
        e.l.findings.clone()
    }

    /// Calls (or call-less streams) affected by `loss` findings so far.
    pub fn loss_affected(&self) -> u64 {
        self.lock().l.loss.affected()
    }

    /// "silent loss observed: yes/no (N calls affected)", from the `loss` findings so far.
    pub fn silent_loss(&self) -> String {
        self.lock().l.loss.headline()
    }

    /// Number of findings by kind name (every finding, also those beyond `max_findings`).
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.lock().l.counts.clone()
    }

    /// Copies of the latency histograms (µs), by name (see [`histo`]).
    pub fn histograms(&self) -> BTreeMap<&'static str, Histogram<u64>> {
        self.lock().l.histos.snapshot()
    }

    /// Streams currently remembered, after forgetting those past the grace period.
    pub fn tracked_streams(&self) -> usize {
        let mut e = self.lock();
        e.sweep(Instant::now());
        e.l.streams.len()
    }

    /// Sessions currently remembered, after forgetting those past the grace period.
    pub fn tracked_sessions(&self) -> usize {
        let mut e = self.lock();
        e.sweep(Instant::now());
        e.l.sessions.len()
    }

    /// Entries held in each store of the ledger (see [`gauges`]), after forgetting what is past
    /// the grace period.
    pub fn store_sizes(&self) -> Vec<(&'static str, u64)> {
        let mut e = self.lock();
        e.sweep(Instant::now());
        e.store_sizes()
    }

    /// Delivered events remembered over all streams (bounded by `ids_per_stream` each).
    pub fn remembered_events(&self) -> usize {
        self.lock().l.streams.values().map(|s| s.remembered()).sum()
    }

    /// Closes pending judgements: open replay legs are judged with what they delivered (as if
    /// their connection ended), deferred findings (`pending-call`, `silent-empty`) are
    /// reported, reconnect watches are settled (`cursor-missing`), and every cut call still
    /// without an answer, a resume or a proven re-send is `abandoned` whatever it waited (the
    /// finding says how long). Call it once, at the end of a run.
    pub fn finish(&self) {
        let now = Instant::now();
        let mut e = self.lock();
        e.settle_order();
        // Nothing more will come: every re-send link held is decided now.
        e.settle_held(now, true);
        let open: Vec<(u64, u64)> =
            e.l.legs
                .iter()
                .filter(|(_, leg)| leg.resume.is_some())
                .map(|(k, _)| *k)
                .collect();
        e.l.finishing = true;
        for (conn, seq) in open {
            e.end_leg(now, conn, seq, false, false);
        }
        e.l.finishing = false;
        let keys: Vec<u64> = e.l.streams.keys().copied().collect();
        for key in keys {
            e.l.settle_deferred(key);
        }
        e.settle(now, true);
        if let Some(log) = &e.l.log {
            log.sync();
        }
    }

    /// The proxy is about to close every connection still open itself (the end of its
    /// shutdown drain; [`ObservationSink::closing`]): what was recorded so far is applied,
    /// then the rules judge the streams still open while they are (an LLM stream waiting for
    /// its next token is `llm-hung`), and the closes that follow are known to be the proxy's.
    pub fn closing(&self) {
        let now = Instant::now();
        self.lock().closing(now);
    }

    /// A human-readable summary: counts by kind, histograms, ledger size.
    pub fn summary(&self) -> String {
        let now = Instant::now();
        let mut e = self.lock();
        e.sweep(now);
        let lost_calls = e.rules.size("lost_calls");
        let l = &e.l;
        let mut out = format!("{}\n", l.loss.headline());
        let unproven = l
            .counts
            .get(FindingKind::UnprovenResend.as_str())
            .copied()
            .unwrap_or(0);
        if unproven > 0 {
            out.push_str(&format!(
                "unproven re-sends (class ambiguous, not counted as loss): {unproven} cut call(s) \
                 followed by an identical call without proof; the wire cannot tell recovered \
                 from lost (send an Idempotency-Key to make it tell)\n"
            ));
        }
        out.push_str(&format!(
            "tearline audit after {} ms\n findings:\n",
            l.ms(now)
        ));
        if l.counts.is_empty() {
            out.push_str("  (none)\n");
        }
        for (kind, n) in &l.counts {
            let class = FindingKind::ALL
                .iter()
                .find(|k| k.as_str() == kind)
                .map_or("", |k| k.class().as_str());
            out.push_str(&format!("  {kind:<19} {n:>6}  {class}\n"));
        }
        let awaiting: Vec<String> = l
            .streams
            .values()
            .flat_map(|s| s.deferred.iter())
            .map(|f| {
                format!(
                    "  {} {} (session {}): {}\n",
                    f.kind,
                    f.ids.join(","),
                    f.session.as_deref().unwrap_or("-"),
                    f.detail
                )
            })
            .collect();
        if !awaiting.is_empty() {
            out.push_str(&format!(
                " awaiting judgement ({} ms for a resume or a proven re-send; reported at \
                 shutdown):\n",
                crate::units::millis(l.cfg.abandon_after.min(l.cfg.grace))
            ));
            for line in awaiting {
                out.push_str(&line);
            }
        }
        out.push_str(" latency (from observation receipt times):\n");
        for line in l.histos.summary_lines() {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str(&format!(
            " ledger: {} stream(s) ({} ended, in grace), {} session(s), {} open exchange(s), \
             {} cut call(s) awaiting an answer, a resume or a proven re-send\n",
            l.streams.len(),
            l.ended.live(),
            l.sessions.len(),
            l.legs.len(),
            lost_calls
        ));
        if l.ended.evicted > 0 {
            out.push_str(&format!(
                " ledger: {} ended stream(s) forgotten before their grace (at most {} kept); a \
                 late resume of one is judged unknown\n",
                l.ended.evicted, l.cfg.max_ended_streams
            ));
        }
        let dropped = self.dropped();
        if dropped > 0 {
            out.push_str(&format!(
                " intake: {dropped} observation(s) dropped (audit queue full; the relay never \
                 waits): {} stream(s) or connection(s) reported not judged (`unknown`), {} finding(s) on them \
                 withheld; raise --audit-queue\n",
                l.holes.reported,
                l.holes.withheld
            ));
        }
        out
    }
}

impl Drop for Auditor {
    fn drop(&mut self) {
        self.inner.intake.wake.notify_one();
    }
}

impl ObservationSink for Auditor {
    fn record(&self, obs: Observation) {
        self.ensure_worker();
        self.inner.intake.push(Instant::now(), obs);
    }

    /// One delivery's observations: one clock reading (they reached the peer in one write),
    /// one lock of the intake, at most one wake of the worker.
    fn record_all(&self, batch: &mut dyn Iterator<Item = Observation>) {
        self.ensure_worker();
        self.inner.intake.push_all(Instant::now(), batch);
    }

    fn closing(&self) {
        Auditor::closing(self);
    }
}
