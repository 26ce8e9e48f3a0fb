//! The one interface every rule is fed through: [`Rule`], a set of hooks the engine calls, in
//! the registry's order, as it applies observations to the ledger.
//!
//! Why: a judgement ("what counts as a re-send", "when is a cut call lost") must be readable in
//! one file, with its own state, and must not reach into another judgement. A rule sees the
//! shared facts ([`Ledger`]: sessions, streams, legs, calls, the event-id index) and emits
//! findings through it; where one rule's conclusion matters to another (a proven re-send
//! settles the lost-call wait and starts the re-execution judgement), the deciding rule records
//! the fact in the ledger ([`super::ledger::Resent`]) and the registry hands it to every rule.
//!
//! Invariants: every hook has a no-op default, so a rule implements only what it judges; a
//! hook never calls another rule; hooks run after the ledger holds the facts named in their
//! doc and before the engine goes on.

use super::judge::{LegEnd, Resume};
use super::ledger::{HeldCall, Ledger, Resent};
use super::rpc::RpcMessage;
use super::stream::StreamKey;
use crate::vocab::CutAction;
use crate::wire::{CutPoint, Observation};
use bytes::Bytes;
use tokio::time::Instant;

/// A request head (and its JSON-RPC messages), before the engine opens or continues a stream
/// for it.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    pub now: Instant,
    pub conn: u64,
    pub seq: u64,
    /// `GET`, `POST`, …
    pub method: &'a str,
    pub path: &'a str,
    pub session: &'a Option<String>,
    pub last_event_id: Option<&'a str>,
    /// The JSON-RPC messages of a POST body (empty otherwise).
    pub msgs: &'a [RpcMessage],
    pub body: Option<&'a Bytes>,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<&'a str>,
    /// False if and only if its `Accept` names no `text/event-stream` (not an `EventSource`).
    pub accepts_event_stream: bool,
}

/// A call of a new POST whose body was seen, before the call is indexed in its session.
#[derive(Debug, Clone, Copy)]
pub struct NewCall<'a> {
    pub now: Instant,
    pub session: &'a Option<String>,
    /// Its JSON-RPC id (JSON text).
    pub id: &'a str,
    pub method: &'a str,
    /// Hash of its params without `_meta`.
    pub params_hash: u64,
    /// Its POST's `Idempotency-Key`, if any.
    pub key: Option<&'a str>,
    /// Its exchange.
    pub conn: u64,
    pub seq: u64,
}

impl<'a> From<&'a HeldCall> for NewCall<'a> {
    fn from(h: &'a HeldCall) -> Self {
        NewCall {
            now: h.now,
            session: &h.session,
            id: &h.id,
            method: &h.method,
            params_hash: h.params_hash,
            key: h.key.as_deref(),
            conn: h.conn,
            seq: h.seq,
        }
    }
}

impl NewCall<'_> {
    /// The call, owned.
    pub fn to_held(&self) -> HeldCall {
        HeldCall {
            now: self.now,
            session: self.session.clone(),
            id: self.id.to_owned(),
            method: self.method.to_owned(),
            params_hash: self.params_hash,
            key: self.key.map(str::to_owned),
            conn: self.conn,
            seq: self.seq,
        }
    }
}

/// A proxy cut that ends a leg of stream `key` (the ledger's torn event already updated).
#[derive(Debug, Clone, Copy)]
pub struct CutSeen<'a> {
    pub now: Instant,
    pub key: StreamKey,
    pub action: CutAction,
    pub point: &'a CutPoint,
    /// The leg whose downstream body was in flight (the one the cut tore).
    pub in_flight: bool,
}

/// A leg of stream `key` ended (its replay verdict already made).
#[derive(Debug, Clone, Copy)]
pub struct LegEnded {
    pub now: Instant,
    pub key: StreamKey,
    /// Ended by a proxy cut.
    pub cut: bool,
    /// Its body ended cleanly.
    pub clean: bool,
    /// It was the stream's last open leg.
    pub last: bool,
    /// The wire observer gave up on its body.
    pub blind: bool,
    /// A resume that the server refused or whose connection closed without a clean end.
    pub failed_resume: bool,
    /// The leg's response status, if its head was seen.
    pub status: Option<u16>,
    /// The leg's replay verdict signalled the loss (`silent-empty`, `explicit-loss`).
    pub signalled: bool,
}

/// A resume leg of stream `key` opened on `(conn, seq)` (its cursor mapped to the stream; the
/// leg's `Resume` is in the ledger).
#[derive(Debug, Clone, Copy)]
pub struct ResumeOpened<'a> {
    pub now: Instant,
    pub key: StreamKey,
    pub conn: u64,
    pub seq: u64,
    /// The `Last-Event-ID`.
    pub cursor: &'a str,
    /// The ordinal of the cursor's delivered event; `None`: the stream owns the id but never
    /// delivered it (the torn event's).
    pub entry: Option<u64>,
    /// The stream's last delivered ordinal when the resume opened.
    pub snapshot: Option<u64>,
    /// After a `reset` cut: the ordinals `(after, through]` the client may never have read.
    pub unread: Option<(Option<u64>, u64)>,
}

/// An answer (result or error) to call `id` of stream `key` reached the client.
#[derive(Debug, Clone, Copy)]
pub struct AnswerSeen<'a> {
    pub now: Instant,
    pub key: StreamKey,
    pub id: &'a str,
    /// Answers seen for the call, this one included.
    pub answers: u32,
    /// It came in a byte-identical copy of an event already delivered under the same id (a
    /// replay artefact).
    pub replayed_copy: bool,
}

/// A replayed event on stream `key` that the engine classified as another stream's (event
/// `id`; its data, whole or the head of a long one).
#[derive(Debug, Clone, Copy)]
pub struct CrossEvent<'a> {
    pub now: Instant,
    pub key: StreamKey,
    pub id: &'a str,
    pub data: &'a [u8],
    pub hash: u64,
    pub len: u64,
    pub whole: bool,
    /// The other session's stream the leg was proven to replay (an event of the leg named one
    /// of its calls; see `leak`), if that is the evidence.
    pub source: Option<StreamKey>,
}

/// The response head of a resume leg of stream `key` (mapped or not).
#[derive(Debug, Clone, Copy)]
pub struct ResumeAnswered<'a> {
    pub now: Instant,
    pub key: StreamKey,
    pub status: u16,
    pub content_type: Option<&'a str>,
    /// It is a `text/event-stream`.
    pub sse: bool,
}

/// A resume leg of stream `key` ended, the observer having followed it: what it owed and
/// delivered ([`Resume`]) and how it ended.
#[derive(Debug, Clone, Copy)]
pub struct ReplayEnded<'a> {
    pub now: Instant,
    pub key: StreamKey,
    pub resume: &'a Resume,
    pub end: LegEnd,
}

/// One judgement: its own state, fed through these hooks.
pub trait Rule: std::fmt::Debug + Send {
    /// The rule's name (its file under `rules/`).
    fn name(&self) -> &'static str;

    /// A request head arrived (its session exists and is marked active).
    fn on_request(&mut self, _l: &mut Ledger, _r: &RequestView<'_>) {}

    /// A new call may re-send an earlier one; a rule that proves it pushes a
    /// [`Resent`] onto `l.resent`.
    fn on_call(&mut self, _l: &mut Ledger, _c: &NewCall<'_>) {}

    /// A re-send was proven (by the rule that pushed it in `on_call`).
    fn on_resent(&mut self, _l: &mut Ledger, _r: &Resent) {}

    /// No rule proved that the new call re-sends anything.
    fn on_unproven(&mut self, _l: &mut Ledger, _c: &NewCall<'_>) {}

    /// A POST opened stream `key` (its calls are in the ledger, not yet in the session index).
    fn on_stream_opened(&mut self, _l: &mut Ledger, _key: StreamKey, _r: &RequestView<'_>) {}

    /// A resume of stream `key` (of `session`) is opening (before its leg is).
    fn on_resume(&mut self, _l: &mut Ledger, _key: StreamKey, _session: &Option<String>) {}

    /// A resume leg opened with its cursor mapped (see [`ResumeOpened`]).
    fn on_resume_leg(&mut self, _l: &mut Ledger, _r: &ResumeOpened<'_>) {}

    /// True for a rule that reads observations ([`Rule::on_observation`]): the registry calls
    /// that hook on these rules only (it runs twice per token of an LLM stream), so a rule
    /// that overrides it must return true here.
    fn reads_observations(&self) -> bool {
        false
    }

    /// Any observation, as the engine is about to apply it (in exchange order; a cut as it
    /// arrives). For rules that read observations the ledger does not keep; called only if
    /// [`Rule::reads_observations`].
    fn on_observation(&mut self, _l: &mut Ledger, _now: Instant, _obs: &Observation) {}

    /// Connection `conn` closed (after the engine ended its legs).
    fn on_conn_closed(&mut self, _l: &mut Ledger, _now: Instant, _conn: u64) {}

    /// Server messages reached the client on stream `key` (`whole`: `data` is a whole message,
    /// else the head of a long one), before they are matched to calls.
    fn on_delivery(
        &mut self,
        _l: &mut Ledger,
        _now: Instant,
        _key: StreamKey,
        _data: &[u8],
        _whole: bool,
    ) {
    }

    /// A call got an answer (result or error).
    fn on_answer(&mut self, _l: &mut Ledger, _a: &AnswerSeen<'_>) {}

    /// A replayed event belongs to another stream (see [`CrossEvent`]).
    fn on_cross_event(&mut self, _l: &mut Ledger, _c: &CrossEvent<'_>) {}

    /// A proxy cut ended a leg.
    fn on_cut(&mut self, _l: &mut Ledger, _c: &CutSeen<'_>) {}

    /// A resume leg's response head arrived.
    fn on_resume_answered(&mut self, _l: &mut Ledger, _r: &ResumeAnswered<'_>) {}

    /// A resume leg ended (before `on_leg_end`); a rule that judges the replay records what
    /// its verdict signalled in `l.replay_signal`.
    fn on_replay_end(&mut self, _l: &mut Ledger, _e: &ReplayEnded<'_>) {}

    /// A leg ended.
    fn on_leg_end(&mut self, _l: &mut Ledger, _e: &LegEnded) {}

    /// The proxy is about to close every connection still open (its shutdown drain ended):
    /// judge what is open now; the closes that follow are the proxy's.
    fn on_closing(&mut self, _l: &mut Ledger, _now: Instant) {}

    /// Settle the re-send links held until `now` (every one when `finish`); runs before any
    /// other hook at or after `now` once `l.held_due` passed, and first in every sweep.
    fn on_held_due(&mut self, _l: &mut Ledger, _now: Instant, _finish: bool) {}

    /// Settle what is due at `now` (everything when `finish`: the end of the run).
    fn on_sweep(&mut self, _l: &mut Ledger, _now: Instant, _finish: bool) {}

    /// Stream `key` is about to be forgotten (it is still in the ledger).
    fn on_forget(&mut self, _l: &mut Ledger, _now: Instant, _key: StreamKey) {}

    /// True if the rule still waits on something of `session` (it must not be forgotten).
    fn holds_session(&self, _session: &Option<String>) -> bool {
        false
    }

    /// Gives back table capacity once most entries are gone.
    fn shrink(&mut self) {}

    /// Entries held, by store name (for `/metrics`).
    fn sizes(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
