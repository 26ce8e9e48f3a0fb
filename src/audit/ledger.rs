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
use super::finding::{Finding, FindingKind, StreamRef};
use super::histo::Histos;
use super::judge::Resume;
use super::log::FindingsLog;
use super::stream::{Stream, StreamKey};
use std::collections::{BTreeMap, HashMap};
use tokio::time::Instant;

/// One call a watch waits for the client to re-issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchCall {
    pub id: String,
    pub method: String,
    pub params_hash: u64,
}

/// What a watch waits for after a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchKind {
    /// A resumable stream with delivered ids: a resume GET is expected; a re-open (GET) or a
    /// re-issue (POST) without `Last-Event-ID` and no resume at all is `cursor-missing`.
    Resume { get: bool },
    /// MCP 2026-07-28: a re-issue of the calls with new ids is expected, else `abandoned`.
    Reissue,
}

/// A judgement pending on what the client does after a cut.
#[derive(Debug, Clone)]
pub struct Watch {
    pub stream: StreamKey,
    pub reference: StreamRef,
    pub session: Option<String>,
    pub cursor: Option<String>,
    pub kind: WatchKind,
    pub calls: Vec<WatchCall>,
    pub cut_at: Instant,
    /// Ids of the re-open / re-issue seen without `Last-Event-ID` (Resume watches).
    pub reopened: Option<Vec<String>>,
}

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
            last_active: now,
        }
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
    /// Opaque (non-decimal) event id → the stream that last delivered it, across sessions.
    pub opaque: HashMap<String, StreamKey>,
    pub findings: Vec<Finding>,
    pub counts: BTreeMap<String, u64>,
    pub histos: Histos,
    pub log: Option<FindingsLog>,
    last_sweep: Instant,
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
            findings: Vec::new(),
            counts: BTreeMap::new(),
            histos: Histos::default(),
            log: None,
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
        if !is_decimal(id) {
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
        let gone = evicted
            .and_then(|e| e.id)
            .filter(|old| stream.entry_of(old).is_none());
        if let Some(id) = id {
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
        for key in due {
            self.forget_stream(key);
        }
        self.sessions.retain(|_, s| {
            s.streams > 0
                || !s.watches.is_empty()
                || now.saturating_duration_since(s.last_active) < grace
        });
    }

    fn forget_stream(&mut self, key: StreamKey) {
        let Some(stream) = self.streams.remove(&key) else {
            return;
        };
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

    /// Settles watches: `cursor-missing` for re-opened resume watches older than the grace
    /// period (or all of them at `finish`), `abandoned` for re-issue watches older than
    /// `abandon_after`; at `finish`, younger re-issue watches become `unknown`.
    pub fn settle_watches(&mut self, now: Instant, finish: bool) {
        let grace = self.cfg.grace;
        let abandon = self.cfg.abandon_after;
        let mut out = Vec::new();
        for s in self.sessions.values_mut() {
            s.watches.retain_mut(|w| {
                let age = now.saturating_duration_since(w.cut_at);
                match w.kind {
                    WatchKind::Resume { .. } if finish || age >= grace => {
                        if let Some(new_ids) = w.reopened.take() {
                            out.push((FindingKind::CursorMissing, w.clone(), new_ids, age));
                        }
                        false
                    }
                    WatchKind::Reissue if age >= abandon => {
                        out.push((FindingKind::Abandoned, w.clone(), Vec::new(), age));
                        false
                    }
                    WatchKind::Reissue if finish => {
                        out.push((FindingKind::Unknown, w.clone(), Vec::new(), age));
                        false
                    }
                    _ => true,
                }
            });
        }
        for (kind, w, new_ids, age) in out {
            let call_ids: Vec<String> = w.calls.iter().map(|c| c.id.clone()).collect();
            let detail = match kind {
                FindingKind::CursorMissing => format!(
                    "stream cut after id {}; the client re-opened/re-issued ({}) without \
                     Last-Event-ID and never resumed",
                    w.cursor.as_deref().unwrap_or("-"),
                    new_ids.join(", ")
                ),
                FindingKind::Abandoned => format!(
                    "calls {} neither re-issued nor cancelled within {} ms of the cut",
                    call_ids.join(", "),
                    abandon.as_millis()
                ),
                _ => format!(
                    "abandoned-or-reissued not judged: the run ended {} ms after the cut, \
                     before abandon_after ({} ms); calls {}",
                    age.as_millis(),
                    abandon.as_millis(),
                    call_ids.join(", ")
                ),
            };
            let mut ids = call_ids;
            if kind == FindingKind::CursorMissing {
                ids = w.cursor.iter().cloned().chain(new_ids).collect();
            }
            let f = Finding::new(kind, self.ms(now), w.session, w.reference)
                .ids(ids)
                .detail(detail);
            self.emit(f);
        }
    }
}
