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

use super::AuditConfig;
use super::finding::{Finding, FindingClass, FindingKind};
use super::histo::Histos;
use super::judge::Resume;
use super::leak::SharedIds;
use super::log::FindingsLog;
use super::order::ConnOrder;
use super::stream::{Stream, StreamKey};
use super::truncation::Truncation;
use super::watch::Watch;
use std::collections::{BTreeMap, HashMap, HashSet};
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
    pub watches: Vec<Watch>,
    /// Truncated TLS cuts waiting for what the client does next (see `truncation`).
    pub truncations: Vec<Truncation>,
    pub last_active: Instant,
}

impl Session {
    fn new(now: Instant) -> Self {
        Session {
            version: None,
            ids: HashMap::new(),
            calls: HashMap::new(),
            streams: 0,
            watches: Vec::new(),
            truncations: Vec::new(),
            last_active: now,
        }
    }
}

/// The calls (or, for streams without calls, the streams) that `loss` findings affect.
#[derive(Debug, Default)]
pub struct LossTally {
    affected: HashSet<String>,
    overflow: u64,
}

/// Affected calls remembered by name, at most; more are only counted.
const MAX_LOSS_KEYS: usize = 100_000;

impl LossTally {
    /// Notes a finding; only `loss` findings count.
    pub fn note(&mut self, f: &Finding) {
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
            if self.affected.len() < MAX_LOSS_KEYS {
                self.affected.insert(k);
            } else if !self.affected.contains(&k) {
                self.overflow += 1;
            }
        }
    }

    /// Affected calls remembered by name (at most `MAX_LOSS_KEYS`).
    pub fn remembered(&self) -> usize {
        self.affected.len()
    }

    /// Calls (or call-less streams) affected so far.
    pub fn affected(&self) -> u64 {
        self.affected.len() as u64 + self.overflow
    }

    /// The summary's first line.
    pub fn headline(&self) -> String {
        let n = self.affected();
        format!(
            "silent loss observed: {} ({n} call{} affected)",
            if n > 0 { "yes" } else { "no" },
            if n == 1 { "" } else { "s" }
        )
    }
}

/// One exchange (request/response) that belongs to a stream.
#[derive(Debug)]
pub struct Leg {
    pub stream: StreamKey,
    pub requested_at: Instant,
    pub status: Option<u16>,
    pub sse: bool,
    pub first_event: bool,
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
    pub streams: HashMap<StreamKey, Stream>,
    pub sessions: HashMap<Option<String>, Session>,
    pub legs: BTreeMap<(u64, u64), Leg>,
    /// Globally unique-looking event id ([`is_globally_unique`]) → the stream that last
    /// delivered it, across sessions.
    pub opaque: HashMap<String, StreamKey>,
    /// Events with per-session ids, by id and content, across sessions ([`super::leak`]).
    pub shared_ids: SharedIds,
    pub findings: Vec<Finding>,
    pub counts: BTreeMap<String, u64>,
    pub histos: Histos,
    pub log: Option<FindingsLog>,
    /// Calls affected by `loss` findings (the summary's first line).
    pub loss: LossTally,
    /// Ordering state per connection (see `order`).
    pub order: HashMap<u64, ConnOrder>,
    /// MCP 2026-07-28 state: tool annotations, calls, cancellations (see `stateless`).
    pub modern: super::stateless::Modern,
    /// Idempotency keys and the session-less shared-id evidence (see `reissue`).
    pub resends: super::reissue::Resends,
    /// Lost-call watches (see `unanswered`).
    pub lost: super::unanswered::Lost,
    /// Ended streams in their grace, oldest first (see `grace`).
    pub ended: super::grace::Ended,
    /// The receipt time of the latest observation or query.
    pub clock: Instant,
    /// True while `finish` closes the legs still open (a resume cut short by the end of the run
    /// is not a failed resume).
    pub finishing: bool,
    /// LLM streams and their verdicts (see `llm`).
    pub llm: super::llm::LlmRule,
    last_sweep: Instant,
}

/// True if and only if `id` looks globally unique: at least 16 characters and not a plain
/// counter (uuids, `<uuid>_<ms>_<random>`). MCP requires ids to be unique only within a session,
/// so short ids such as `<stream>-<seq>` may repeat in every session and are never compared
/// across sessions.
pub fn is_globally_unique(id: &str) -> bool {
    id.len() >= 16 && !is_decimal(id)
}

/// True if and only if `id` is made of ASCII digits only (a per-stream or per-session counter
/// that may collide across sessions).
pub fn is_decimal(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
}

impl Ledger {
    pub fn new(cfg: AuditConfig, now: Instant) -> Self {
        Ledger {
            cfg,
            start: now,
            next_key: 0,
            streams: HashMap::new(),
            sessions: HashMap::new(),
            legs: BTreeMap::new(),
            opaque: HashMap::new(),
            shared_ids: SharedIds::default(),
            findings: Vec::new(),
            counts: BTreeMap::new(),
            histos: Histos::default(),
            log: None,
            loss: LossTally::default(),
            order: HashMap::new(),
            modern: Default::default(),
            resends: Default::default(),
            lost: Default::default(),
            ended: Default::default(),
            clock: now,
            finishing: false,
            llm: Default::default(),
            last_sweep: now,
        }
    }

    pub fn ms(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.start).as_millis()).unwrap_or(u64::MAX)
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

    /// Counts, logs and keeps a finding.
    pub fn emit(&mut self, f: Finding) {
        *self.counts.entry(f.kind.as_str().to_string()).or_insert(0) += 1;
        self.loss.note(&f);
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
    ) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let session = stream.session.clone();
        let evicted = stream.push(id.clone(), hash, len, dispatched);
        if let Some(old) = &evicted
            && let Some(old_id) = &old.id
        {
            self.shared_ids.remove(old_id, old.hash, key);
        }
        let gone = evicted
            .and_then(|e| e.id)
            .filter(|old| stream.entry_of(old).is_none());
        if let Some(id) = id {
            if dispatched && len > 0 {
                self.shared_ids.add(&id, hash, key);
            }
            self.index_id(key, &id);
        }
        if let Some(old) = gone {
            self.unindex_id(key, &session, &old);
        }
    }

    /// Runs the periodic sweep if it is due.
    pub fn maybe_sweep(&mut self, now: Instant) {
        let every = self.cfg.grace.min(self.cfg.abandon_after) / 4;
        if now.saturating_duration_since(self.last_sweep) >= every {
            self.sweep(now);
        }
    }

    /// Forgets ended streams and idle sessions past the grace period, and settles watches that
    /// are due.
    pub fn sweep(&mut self, now: Instant) {
        self.last_sweep = now;
        self.clock = self.clock.max(now);
        let grace = self.cfg.grace;
        let due: Vec<StreamKey> = self
            .streams
            .iter()
            .filter(|(_, s)| {
                s.open_legs == 0
                    && s.ended_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= grace)
            })
            .map(|(k, _)| *k)
            .collect();
        self.settle_watches(now, false);
        self.sweep_llm(now);
        // A call whose stream ended without its response is `pending-call` once no resume and
        // no re-issue came for `abandon_after`.
        let settle = self.cfg.abandon_after.min(grace);
        let pending: Vec<StreamKey> = self
            .streams
            .iter()
            .filter(|(_, s)| {
                s.open_legs == 0
                    && !s.deferred.is_empty()
                    && s.ended_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= settle)
            })
            .map(|(k, _)| *k)
            .collect();
        for key in pending {
            self.settle_deferred(key);
        }
        for key in due {
            self.forget_stream(key);
        }
        self.sessions.retain(|_, s| {
            s.streams > 0
                || !s.watches.is_empty()
                || !s.truncations.is_empty()
                || now.saturating_duration_since(s.last_active) < grace
        });
        self.shrink_stores();
    }

    /// Forgets stream `key` now (after settling what it deferred and what waits on it).
    pub fn forget_stream(&mut self, key: StreamKey) {
        self.settle_deferred(key);
        let now = self.clock;
        self.report_lost(now, key, "its stream was forgotten");
        self.lost.forget(key);
        let Some(stream) = self.streams.remove(&key) else {
            return;
        };
        if stream.open_legs == 0 && stream.ended_at.is_some() {
            self.ended.left();
        }
        self.resends
            .forget(key, stream.calls.iter().filter_map(|c| c.key.clone()));
        self.shared_ids.remove_stream(key, &stream);
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
