//! The engine: applies observations to the shared [`Ledger`] and calls the rules' hooks
//! ([`Rules`], the registry) at the points where a judgement may start, change or settle.
//!
//! Why: the ledger holds facts every judgement shares (sessions, streams, legs, calls, the
//! event-id index, findings); each judgement is a rule with its own state (`rules/`). Something
//! has to update the facts and tell the rules, in one fixed order: that is this type, spread
//! over `order` (exchange order), `exchange` (requests, resumes, answers) and `events`
//! (responses, events, cuts, leg ends), plus the forgetting and settling here.
//!
//! Invariants:
//! - A rule hook always sees the ledger as it is at that point of today's processing (the
//!   facts of the observation applied up to the hook), and hooks run in the registry's order.
//! - A stream is forgotten only through [`Engine::forget_stream`]: its deferred findings are
//!   settled, then every rule's `on_forget` runs (a lost call is reported then), then the
//!   ledger drops it.

use super::config::AuditConfig;
use super::gauges::shrink;
use super::ledger::Ledger;
use super::rules::Rules;
use super::stream::StreamKey;
use crate::wire::Observation;
use rustc_hash::FxHashMap;
use tokio::time::Instant;

/// Per-connection ordering state (see `order`).
#[derive(Debug, Default)]
pub struct ConnOrder {
    /// Requests seen (sequence numbers below this were seen).
    pub requests: u64,
    /// Observations waiting for their request: (receipt time, observation).
    pub early: Vec<(Instant, Observation)>,
    /// Observations dropped because `early` was full.
    pub dropped: u64,
    /// Exchanges whose response ended (sequence numbers below this), see `order`.
    pub answered: u64,
    /// Requests (and their LLM facts) waiting for the response before theirs to end, see
    /// `order`: (receipt time, observation).
    pub waiting: Vec<(Instant, Observation)>,
}

/// A cut held until the request of its connection's exchange in flight arrives (see `order`),
/// with the observations of other connections that arrived meanwhile.
#[derive(Debug)]
pub struct HeldCut {
    /// The cut connection.
    pub conn: u64,
    /// The cut, with its receipt time.
    pub cut: (Instant, Observation),
    /// Observations of other connections that arrived after it, in order.
    pub behind: Vec<(Instant, Observation)>,
}

/// The ledger, the ordering state and the rules, behind the auditor's mutex.
#[derive(Debug)]
pub struct Engine {
    /// The shared facts.
    pub l: Ledger,
    /// Ordering state per connection (see `order`), looked up for every observation: keyed by
    /// the proxy's connection numbers (counters, not peer input), so hashed with FxHash.
    pub order: FxHashMap<u64, ConnOrder>,
    /// `(conn, requests)` of the connection `order` last answered for: while its entry exists,
    /// `requests` here is at most the entry's (it only grows), so an observation of `conn` with
    /// a lower `seq` is known to follow its request without a lookup (an event's observations
    /// come in runs of one connection). Cleared when the entry is removed.
    pub last_order: Option<(u64, u64)>,
    /// The rules, in the order they run.
    pub rules: Rules,
    /// A cut waiting for its exchange's request (see `order`).
    pub held: Option<HeldCut>,
}

impl Engine {
    pub fn new(cfg: AuditConfig, now: Instant) -> Self {
        Engine {
            l: Ledger::new(cfg, now),
            order: FxHashMap::default(),
            last_order: None,
            rules: Rules::default(),
            held: None,
        }
    }

    /// Runs the periodic sweep if it is due: `sweep_every` has passed since the last sweep
    /// (a comparison with `next_sweep`, no subtraction: it runs for every observation).
    pub fn maybe_sweep(&mut self, now: Instant) {
        if self.l.sweep_every.is_zero() || self.l.next_sweep.is_some_and(|t| now >= t) {
            self.sweep(now);
        }
    }

    /// Runs the sweep if an armed wait's deadline passed (the worker's timer, see `deadline`).
    pub fn sweep_if_due(&mut self, now: Instant) {
        if self.l.deadlines.passed(now) {
            self.sweep(now);
        }
    }

    /// Forgets ended streams and idle sessions past the grace period, and settles the rules'
    /// judgements that are due.
    pub fn sweep(&mut self, now: Instant) {
        self.l.next_sweep = now.checked_add(self.l.sweep_every);
        self.l.deadlines.pass(now);
        self.l.clock = self.l.clock.max(now);
        let grace = self.l.cfg.grace;
        let due: Vec<StreamKey> = self
            .l
            .streams
            .iter()
            .filter(|(_, s)| {
                s.open_legs == 0
                    && s.ended_at
                        .is_some_and(|t| now.saturating_duration_since(t) >= grace)
            })
            .map(|(k, _)| *k)
            .collect();
        self.settle(now, false);
        // A call whose stream ended without its response is `pending-call` once no resume and
        // no re-issue came for `abandon_after`.
        let settle = self.l.cfg.abandon_after.min(grace);
        let pending: Vec<StreamKey> = self
            .l
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
            self.l.settle_deferred(key);
        }
        for key in due {
            self.forget_stream(key);
        }
        let rules = &self.rules;
        self.l.sessions.retain(|key, s| {
            s.streams > 0
                || rules.holds_session(key)
                || now.saturating_duration_since(s.last_active) < grace
        });
        self.shrink_stores();
    }

    /// The proxy is about to close every open connection itself: the rules judge what is open.
    pub fn closing(&mut self, now: Instant) {
        self.l.clock = self.l.clock.max(now);
        self.rules.on_closing(&mut self.l, now);
    }

    /// Settles the rules' waits that are due (all of them when `finish`).
    pub fn settle(&mut self, now: Instant, finish: bool) {
        self.settle_held(now, finish);
        self.rules.on_sweep(&mut self.l, now, finish);
    }

    /// Settles the re-send links held until `now` (every one when `finish`), unless a cut
    /// is held (`order`): what waits behind it may settle them otherwise, so they wait for it.
    pub fn settle_held(&mut self, now: Instant, finish: bool) {
        if finish || self.held.is_none() {
            self.rules.settle_held(&mut self.l, now, finish);
        }
    }

    /// Forgets stream `key` now (after settling what it deferred and what waits on it).
    pub fn forget_stream(&mut self, key: StreamKey) {
        self.l.settle_deferred(key);
        let now = self.l.clock;
        self.rules.on_forget(&mut self.l, now, key);
        self.l.remove_stream(key);
    }

    /// The last leg of stream `key` ended: forget it at once if no judgement can use it, else
    /// compact it and keep it for its grace, within the cap (rules in `grace`).
    pub fn stream_ended(&mut self, now: Instant, key: StreamKey) {
        let Some(stream) = self.l.streams.get(&key) else {
            return;
        };
        if stream.open_legs > 0 {
            return;
        }
        let useless = stream.calls.is_empty()
            && stream.entries().all(|e| e.id.is_none())
            && stream.torn.as_ref().is_none_or(|t| t.id.is_none());
        if useless {
            self.forget_stream(key);
            return;
        }
        let keep = self.l.cfg.ended_events.max(1);
        while self
            .l
            .streams
            .get(&key)
            .is_some_and(|s| s.remembered() > keep && !s.front_held())
        {
            self.l.evict_oldest_event(key);
        }
        if let Some(s) = self.l.streams.get_mut(&key) {
            s.compact();
        }
        // Its deferred findings settle `abandon_after` (at most the grace) after its end, and
        // it is forgotten after the grace.
        let (grace, settle) = (
            self.l.cfg.grace,
            self.l.cfg.abandon_after.min(self.l.cfg.grace),
        );
        self.l.deadlines.arm_after(now, settle);
        self.l.deadlines.arm_after(now, grace);
        self.l.ended.queue.push_back((now, key));
        self.l.ended.live += 1;
        while self.l.ended.live > self.l.cfg.max_ended_streams {
            let Some((at, old)) = self.l.ended.queue.pop_front() else {
                break;
            };
            let still = self
                .l
                .streams
                .get(&old)
                .is_some_and(|s| s.open_legs == 0 && s.ended_at == Some(at));
            if still {
                self.l.ended.evicted += 1;
                self.forget_stream(old);
            }
        }
        if self.l.ended.queue.len() > 2 * self.l.ended.live + 1024 {
            let streams = &self.l.streams;
            self.l.ended.queue.retain(|(at, k)| {
                streams
                    .get(k)
                    .is_some_and(|s| s.open_legs == 0 && s.ended_at == Some(*at))
            });
        }
    }

    /// Gives back the table capacity of the per-connection and per-stream maps that emptied
    /// (see `gauges`).
    pub fn shrink_stores(&mut self) {
        let l = &mut self.l;
        shrink(&mut l.streams);
        shrink(&mut l.sessions);
        shrink(&mut self.order);
        shrink(&mut l.opaque);
        shrink(&mut l.protocols);
        shrink(&mut l.goaways);
        l.call_names.shrink();
        self.rules.shrink();
        l.ended.shrink();
        l.deferring
            .shrink_to(super::gauges::room_for(l.deferring.len()));
        for s in l.sessions.values_mut() {
            shrink(&mut s.ids);
            shrink(&mut s.calls);
        }
    }

    /// Entries per store, by store name, in a fixed order (the ledger's, then the rules').
    pub fn store_sizes(&self) -> Vec<(&'static str, u64)> {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let l = &self.l;
        let (mut ids, mut calls) = (0, 0);
        for s in l.sessions.values() {
            ids += s.ids.len();
            calls += s.calls.len();
        }
        let events: usize = l.streams.values().map(|s| s.remembered()).sum();
        let rule = |name: &str| self.rules.size(name);
        vec![
            ("streams", n(l.streams.len())),
            ("sessions", n(l.sessions.len())),
            ("exchanges", n(l.legs.len())),
            ("connections", n(self.order.len())),
            ("events", n(events)),
            ("event_ids", n(ids)),
            ("opaque_ids", n(l.opaque.len())),
            ("call_names", n(l.call_names.len())),
            ("calls", n(calls)),
            ("watches", rule("watches")),
            ("truncations", rule("truncations")),
            ("modern_calls", rule("modern_calls")),
            ("cancelled_calls", rule("cancelled_calls")),
            ("tool_hints", rule("tool_hints")),
            ("lost_calls", rule("lost_calls")),
            ("idempotency_keys", rule("idempotency_keys")),
            ("ended_streams", n(l.ended.live())),
            ("loss_keys", n(l.loss.remembered())),
            ("findings", n(l.findings.len())),
        ]
    }
}
