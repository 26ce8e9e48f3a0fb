//! The auditor's state: sessions, logical streams, in-flight exchanges (legs), the event-id
//! index, the reconnect watches, and the findings produced so far.
//!
//! Invariants:
//! - Traffic without `Mcp-Session-Id` shares one anonymous session (key `None`): a resume
//!   arrives on a new connection, so a per-connection ledger could never map it. Numeric ids
//!   that collide there make the id ambiguous, and a cursor naming it is judged `unknown`.
//! - An event id maps to the streams of its session that delivered it or tore it; a cursor is
//!   mapped only when exactly one stream owns the id.
//! - A stream is forgotten `grace` after its last leg ended; a session when it has no stream, no
//!   watch, and was idle for `grace`. A leg is forgotten when it ends (or its connection does).
//! - Findings are kept in memory up to `max_findings` (counters and the log see all of them).

use super::config::AuditConfig;
use super::deadline::Deadlines;
use super::finding::{Finding, FindingClass, FindingKind};
use super::grace::Ended;
use super::histo::Histos;
use super::holes::{self, Holes};
use super::judge::Resume;
use super::leak::{self, CallNames, Named};
use super::log::FindingsLog;
use super::stream::{Stream, StreamKey};
pub use super::stream::{is_decimal, is_globally_unique};
use crate::vocab::WireProtocol;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

/// One MCP session (or the anonymous one).
#[derive(Debug)]
pub struct Session {
    pub version: Option<String>,
    /// Event id → streams that delivered or tore it.
    pub ids: HashMap<String, Vec<StreamKey>>,
    /// JSON-RPC request id → the stream whose POST carried it.
    pub calls: HashMap<String, StreamKey>,
    pub streams: u32,
    pub last_active: Instant,
}

impl Session {
    fn new(now: Instant) -> Self {
        Session {
            version: None,
            ids: HashMap::new(),
            calls: HashMap::new(),
            streams: 0,
            last_active: now,
        }
    }
}

/// The calls (or, for streams without calls, the streams) that `loss` findings affect, and
/// which of them the wire shows the client could have taken silently: every MCP loss, an LLM
/// stream that ended cleanly before its completion signal — not one that broke (a reset, a FIN
/// inside the body) or got no answer, which the client saw as an error
/// ([`Ledger::emit_visible_loss`]).
#[derive(Debug, Default)]
pub struct LossTally {
    affected: HashSet<String>,
    overflow: u64,
    /// Of `affected`, the ones only visible losses name.
    visible: HashSet<String>,
    /// Of `overflow`, the ones a visible loss named.
    visible_overflow: u64,
}

/// Affected calls remembered by name, at most; more are only counted.
const MAX_LOSS_KEYS: usize = 100_000;

impl LossTally {
    /// Notes a finding; only `loss` findings count. `silent`: the client may have taken the
    /// loss without seeing an error (a key once noted silent stays so).
    pub fn note(&mut self, f: &Finding, silent: bool) {
        if f.class != FindingClass::Loss {
            return;
        }
        let session = f.session.as_deref().unwrap_or("-");
        let calls: Vec<&String> =
            if matches!(f.kind, FindingKind::PendingCall | FindingKind::Abandoned) {
                f.ids.iter().take(1).collect()
            } else {
                f.stream.rpc_ids.iter().collect()
            };
        // The opening exchange is part of the key: session-less clients reuse ids.
        let (conn, seq) = (f.stream.conn, f.stream.seq);
        let keys: Vec<String> = if calls.is_empty() {
            vec![format!("{session} stream {conn}/{seq}")]
        } else {
            calls
                .iter()
                .map(|id| format!("{session} call {id} of {conn}/{seq}"))
                .collect()
        };
        for k in keys {
            let known = self.affected.contains(&k);
            if known {
                if silent {
                    self.visible.remove(&k);
                }
            } else if self.affected.len() < MAX_LOSS_KEYS {
                if !silent {
                    self.visible.insert(k.clone());
                }
                self.affected.insert(k);
            } else {
                self.overflow += 1;
                self.visible_overflow += u64::from(!silent);
            }
        }
    }

    /// Calls (or call-less streams) only visible losses affect: the client saw an error.
    pub fn visible(&self) -> u64 {
        self.visible.len() as u64 + self.visible_overflow
    }

    /// Affected calls remembered by name (at most `MAX_LOSS_KEYS`).
    pub fn remembered(&self) -> usize {
        self.affected.len()
    }

    /// Calls (or call-less streams) affected so far.
    pub fn affected(&self) -> u64 {
        self.affected.len() as u64 + self.overflow
    }

    /// The summary's first line: the losses the client may have taken silently, then (when
    /// any) those it saw as errors.
    pub fn headline(&self) -> String {
        let visible = self.visible();
        let n = self.affected() - visible;
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        let mut line = format!(
            "silent loss observed: {} ({n} call{} affected)",
            if n > 0 { "yes" } else { "no" },
            plural(n)
        );
        if visible > 0 {
            line.push_str(&format!(
                "; visible loss: {visible} call{} (the stream broke or no answer came: the \
                 client saw an error)",
                plural(visible)
            ));
        }
        line
    }
}

/// What proves that a later request re-sends an earlier call (decided by the re-send rule,
/// `rules::reissue`; read by the rules that a re-send settles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// The same `Idempotency-Key`.
    IdempotencyKey,
    /// The same JSON-RPC id, method and params from the same client.
    SameId,
}

impl Proof {
    /// The name in findings (`proof` field).
    pub fn as_str(self) -> &'static str {
        match self {
            Proof::IdempotencyKey => "idempotency-key",
            Proof::SameId => "same-id",
        }
    }
}

/// A ledger event: call `old_id` of stream `key` was provably re-sent as `new_id`. The re-send
/// rule marks the call replaced and queues this; the registry hands it to every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resent {
    /// When the re-send was seen.
    pub at: Instant,
    pub key: StreamKey,
    pub old_id: String,
    pub new_id: String,
    pub proof: Proof,
    /// The old call's stream is MCP 2026-07-28 (no resumption: a re-send is the only recovery).
    pub stateless: bool,
}

/// A new call, owned: one whose re-send link the re-send rule holds for a moment (a
/// `NewCall` that outlives its request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCall {
    pub now: Instant,
    pub session: Option<String>,
    pub id: String,
    pub method: String,
    pub params_hash: u64,
    pub key: Option<String>,
    pub conn: u64,
    pub seq: u64,
}

/// What the replay verdict of the leg that just ended signalled (set by rule `replay`, read by
/// the engine right after: a signalled loss is no `pending-call`, an explicit one makes the
/// resume a failed one for rule `abandoned`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySignal {
    /// `silent-empty` or `explicit-loss`.
    pub signalled: bool,
    /// `explicit-loss`.
    pub explicit: bool,
}

/// One exchange (request/response) that belongs to a stream.
#[derive(Debug)]
pub struct Leg {
    pub stream: StreamKey,
    pub requested_at: Instant,
    pub status: Option<u16>,
    pub sse: bool,
    pub first_event: bool,
    /// When its last SSE event was delivered (for `event-gap`).
    pub last_event_at: Option<Instant>,
    /// Set for a resume GET whose cursor mapped to `stream`.
    pub resume: Option<Resume>,
    /// A resume GET whose cursor could not be mapped (judged `unknown`).
    pub unmapped_resume: bool,
    /// The body ended with broken framing; the leg ends at the `Cut` or `ConnClosed` next.
    pub body_broken: bool,
    /// Its request reached the auditor after its response: no latency is measured from it.
    pub late: bool,
    /// The wire observer gave up on its body (`observer-gave-up`): events after that offset
    /// were not seen, so no replay or pending-call judgement is made on this leg.
    pub blind: bool,
}

/// The whole audit state, behind the auditor's mutex.
#[derive(Debug)]
pub struct Ledger {
    pub cfg: AuditConfig,
    pub start: Instant,
    next_key: StreamKey,
    /// By key (the ledger's own counter, so hashed with FxHash: looked up several times per
    /// event).
    pub streams: FxHashMap<StreamKey, Stream>,
    pub sessions: HashMap<Option<String>, Session>,
    pub legs: BTreeMap<(u64, u64), Leg>,
    /// Connections announced as HTTP/2 (`Observation::Protocol`), until they close; absent:
    /// HTTP/1.1. Every finding about a stream of one names it (see `record`).
    pub protocols: FxHashMap<u64, WireProtocol>,
    /// HTTP/2 connection → the lowest `last_stream` of the `GOAWAY`s its client received,
    /// until it closes (see `h2`).
    pub goaways: FxHashMap<u64, u64>,
    /// Globally unique-looking event id ([`is_globally_unique`]) → the stream that last
    /// delivered it, across sessions.
    pub opaque: HashMap<String, StreamKey>,
    /// Globally unique-looking call names, across sessions ([`super::leak`]).
    pub call_names: CallNames,
    pub findings: Vec<Finding>,
    pub counts: BTreeMap<String, u64>,
    pub histos: Histos,
    pub log: Option<FindingsLog>,
    /// Calls affected by `loss` findings (the summary's first line).
    pub loss: LossTally,
    /// Streams holding deferred findings (`Stream::deferred`).
    pub deferring: FxHashSet<StreamKey>,
    /// The replay verdict's signal for the leg being ended (see [`ReplaySignal`]).
    pub replay_signal: ReplaySignal,
    /// Re-sends proven since the registry last dispatched them (see [`Resent`]).
    pub resent: Vec<Resent>,
    /// When the earliest re-send link the re-send rule holds falls due (see `rules/reissue`);
    /// `None` while it holds none.
    pub held_due: Option<Instant>,
    /// Set by the re-send rule in `on_call` when it holds the new call's link: the call is
    /// neither proven nor unproven yet (the registry skips `on_unproven`).
    pub call_held: bool,
    /// Calls whose held link was dropped since the registry last dispatched them: unproven.
    pub unproven: Vec<HeldCall>,
    /// Why session-less JSON-RPC ids prove nothing any more (the re-send rule found them shared
    /// by several clients); `None` while they still identify a client.
    pub ids_shared: Option<String>,
    /// Ended streams in their grace, oldest first (see `grace`).
    pub ended: Ended,
    /// The receipt time of the latest observation or query.
    pub clock: Instant,
    /// True while `finish` closes the legs still open (a resume cut short by the end of the run
    /// is not a failed resume).
    pub finishing: bool,
    /// How often applying observations sweeps: a quarter of the shorter of `grace` and
    /// `abandon_after`.
    pub sweep_every: Duration,
    /// When applying an observation sweeps next: the last sweep's time plus `sweep_every`
    /// (`None` past the clock's range: never).
    pub next_sweep: Option<Instant>,
    /// Connections that lost observations in the intake and the streams not judged because of
    /// it (see `holes`).
    pub holes: Holes,
    /// When the armed waits fall due (see `deadline`): the worker sleeps until the first.
    pub deadlines: Deadlines,
}

impl Ledger {
    pub fn new(cfg: AuditConfig, now: Instant) -> Self {
        let sweep_every = cfg.grace.min(cfg.abandon_after) / 4;
        Ledger {
            cfg,
            start: now,
            next_key: 0,
            streams: FxHashMap::default(),
            sessions: HashMap::new(),
            legs: BTreeMap::new(),
            protocols: FxHashMap::default(),
            goaways: FxHashMap::default(),
            opaque: HashMap::new(),
            call_names: CallNames::default(),
            findings: Vec::new(),
            counts: BTreeMap::new(),
            histos: Histos::default(),
            log: None,
            loss: LossTally::default(),
            deferring: FxHashSet::default(),
            replay_signal: ReplaySignal::default(),
            resent: Vec::new(),
            held_due: None,
            call_held: false,
            unproven: Vec::new(),
            ids_shared: None,
            ended: Default::default(),
            clock: now,
            finishing: false,
            sweep_every,
            next_sweep: now.checked_add(sweep_every),
            holes: Holes::default(),
            deadlines: Deadlines::new(now),
        }
    }

    pub fn ms(&self, now: Instant) -> u64 {
        crate::units::millis(now.saturating_duration_since(self.start))
    }

    pub fn session_mut(&mut self, key: &Option<String>, now: Instant) -> &mut Session {
        let s = self
            .sessions
            .entry(key.clone())
            .or_insert_with(|| Session::new(now));
        s.last_active = now;
        s
    }

    /// Registers a new stream in its session and returns its key.
    pub fn add_stream(&mut self, stream: Stream, now: Instant) -> StreamKey {
        let key = self.next_key;
        self.next_key += 1;
        self.session_mut(&stream.session, now).streams += 1;
        self.call_names.add_stream(key, &stream);
        self.streams.insert(key, stream);
        key
    }

    /// A finding about stream `key` (session and reference filled in).
    pub fn finding(&self, kind: FindingKind, key: StreamKey, now: Instant) -> Finding {
        let (session, reference) = self
            .streams
            .get(&key)
            .map(|s| (s.session.clone(), s.reference.clone()))
            .unwrap_or_default();
        Finding::new(kind, self.ms(now), session, reference)
    }

    /// Counts, logs and keeps a finding — unless its stream lost observations in the intake:
    /// then it is withheld, and the first one withheld on a stream is replaced by the stream's
    /// not-judged `unknown` (see `holes`).
    pub fn emit(&mut self, f: Finding) {
        self.emit_noted(f, true);
    }

    /// As [`Ledger::emit`], for a loss the wire shows the client saw as an error (an LLM
    /// stream that broke, a request that got no answer): the summary does not call it silent.
    pub fn emit_visible_loss(&mut self, f: Finding) {
        self.emit_noted(f, false);
    }

    fn emit_noted(&mut self, f: Finding, silent: bool) {
        if !self.holes.is_empty() {
            match self.holes.check(&f, self.clock) {
                holes::Verdict::Emit => {}
                holes::Verdict::Withheld => return,
                holes::Verdict::FirstWithheld(dropped) => {
                    let mut unknown = Finding::new(
                        FindingKind::Unknown,
                        f.at_ms,
                        f.session.clone(),
                        f.stream.clone(),
                    );
                    unknown.detail = holes::stream_detail(f.stream.conn, dropped);
                    return self.record(unknown, true);
                }
            }
        }
        self.record(f, silent);
    }

    /// Counts, logs and keeps `f`.
    fn record(&mut self, mut f: Finding, silent: bool) {
        if f.stream.protocol == WireProtocol::Http1
            && let Some(p) = self.protocols.get(&f.stream.conn)
        {
            f.stream.set_protocol(*p);
        }
        *self.counts.entry(f.kind.as_str().to_string()).or_insert(0) += 1;
        self.loss.note(&f, silent);
        if let Some(log) = &mut self.log {
            log.write(&f);
        }
        if self.findings.len() < self.cfg.max_findings {
            self.findings.push(f);
        }
    }

    /// Records that stream `key` delivered (or tore) `id`.
    pub fn index_id(&mut self, key: StreamKey, id: &str) {
        let Some(session) = self.streams.get(&key).map(|s| s.session.clone()) else {
            return;
        };
        if let Some(s) = self.sessions.get_mut(&session) {
            let owners = s.ids.entry(id.to_string()).or_default();
            if !owners.contains(&key) {
                owners.push(key);
            }
        }
        if is_globally_unique(id) {
            self.opaque.insert(id.to_string(), key);
        }
    }

    /// Forgets that stream `key` owns `id`.
    pub fn unindex_id(&mut self, key: StreamKey, session: &Option<String>, id: &str) {
        if let Some(s) = self.sessions.get_mut(session)
            && let Some(owners) = s.ids.get_mut(id)
        {
            owners.retain(|k| *k != key);
            if owners.is_empty() {
                s.ids.remove(id);
            }
        }
        if self.opaque.get(id) == Some(&key) {
            self.opaque.remove(id);
        }
    }

    /// Appends a delivered event to stream `key`, keeping the indexes in step with the cap.
    pub fn push_event(
        &mut self,
        key: StreamKey,
        id: Option<String>,
        hash: u64,
        len: u64,
        dispatched: bool,
        at: Instant,
    ) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let session = stream.session.clone();
        let evicted = stream.push(id.clone(), hash, len, dispatched, at);
        let gone = evicted
            .and_then(|e| e.id)
            .filter(|old| !stream.owns_id(old));
        if let Some(id) = id {
            self.index_id(key, &id);
        }
        if let Some(old) = gone {
            self.unindex_id(key, &session, &old);
        }
    }

    /// Holds finding `f` on stream `key` until the stream is forgotten or the run ends (a
    /// resume of the stream drops it).
    pub fn defer(&mut self, key: StreamKey, f: Finding) {
        if let Some(s) = self.streams.get_mut(&key) {
            s.deferred.push(f);
            self.deferring.insert(key);
        }
    }

    /// Reports the findings deferred on stream `key` that still hold (a `pending-call` whose
    /// call got an answer meanwhile is dropped).
    pub fn settle_deferred(&mut self, key: StreamKey) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let deferred = std::mem::take(&mut stream.deferred);
        self.deferring.remove(&key);
        let mut out = Vec::new();
        for f in deferred {
            if f.kind == FindingKind::PendingCall {
                let Some(call) = f
                    .ids
                    .first()
                    .and_then(|id| stream.calls.iter_mut().find(|c| &c.id == id))
                else {
                    continue;
                };
                if call.answers > 0 || call.reported || call.replaced {
                    continue;
                }
                call.reported = true;
            }
            out.push(f);
        }
        for f in out {
            self.emit(f);
        }
    }

    /// Forgets stream `key`: its indexes, its session's count and calls. The engine calls it
    /// after every rule settled what waits on the stream (`Engine::forget_stream`).
    pub fn remove_stream(&mut self, key: StreamKey) {
        self.deferring.remove(&key);
        let Some(stream) = self.streams.remove(&key) else {
            return;
        };
        if stream.open_legs == 0 && stream.ended_at.is_some() {
            self.ended.left();
        }
        self.call_names.remove_stream(key, &stream);
        let mut ids: Vec<String> = stream.remembered_ids().cloned().collect();
        if let Some(t) = stream.torn.as_ref().and_then(|t| t.id.clone()) {
            ids.push(t);
        }
        for id in &ids {
            self.unindex_id(key, &stream.session, id);
        }
        if let Some(s) = self.sessions.get_mut(&stream.session) {
            s.streams = s.streams.saturating_sub(1);
            for c in &stream.calls {
                if s.calls.get(&c.id) == Some(&key) {
                    s.calls.remove(&c.id);
                }
            }
        }
    }

    /// Forgets the oldest event stream `key` remembers (compacting an ended stream).
    pub fn evict_oldest_event(&mut self, key: StreamKey) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let session = stream.session.clone();
        let Some(old) = stream.pop_oldest() else {
            return;
        };
        let Some(id) = old.id else {
            return;
        };
        let gone = self.streams.get(&key).is_some_and(|s| !s.owns_id(&id));
        if gone {
            self.unindex_id(key, &session, &id);
        }
    }

    /// A resume from inside a reset's unread window: rolls stream `key` back to ordinal `after`
    /// (see [`Stream::roll_back`]); the rolled-back events stay indexed (owed again).
    pub fn roll_back(&mut self, key: StreamKey, after: u64) {
        if let Some(stream) = self.streams.get_mut(&key) {
            stream.roll_back(after);
        }
    }

    /// The stream of another session whose call the event naming `names` names (see
    /// [`leak::named_source`]).
    pub fn named_source(&self, key: StreamKey, names: &[String]) -> Option<Named> {
        leak::named_source(&self.streams, &self.call_names, key, names)
    }

    /// On a leg of stream `key` proven to replay stream `source`: whether the event (`id`,
    /// `hash`, `len`) is `source`'s (see [`leak::from_source`]).
    pub fn from_source(
        &self,
        key: StreamKey,
        source: StreamKey,
        id: &str,
        hash: u64,
        len: u64,
    ) -> bool {
        leak::from_source(&self.streams, (key, source), id, hash, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_long_non_counter_ids_count_as_globally_unique() {
        assert!(is_globally_unique("9b2f4c1e-7d3a-4e0b-8c55-1f2e3d4c5b6a"));
        assert!(
            !is_globally_unique("1-5"),
            "per-session <stream>-<seq> ids repeat"
        );
        assert!(!is_globally_unique("12345678901234567890"), "a counter");
    }
}
