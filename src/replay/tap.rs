//! The replay's observation tap: forwards every observation to the auditor and keeps the few
//! facts the report needs that the auditor does not keep (cuts by class and action, the
//! timeline of cuts, outages and resumes, and how many `data` lines each torn event had when it
//! later came through whole), and which call each cut leg carried ([`super::legs`]), resume
//! legs included.
//!
//! Invariant: it never blocks the data path for long (one short critical section per cut or
//! request head) and keeps at most [`MAX_TIMELINE`] timeline entries.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::legs::LegCalls;
use crate::audit::Auditor;
use crate::wire::{CutPoint, Observation, ObservationSink};

/// Timeline entries kept per run; later ones are counted but not listed.
pub const MAX_TIMELINE: usize = 2_000;

/// One moment of the run, in milliseconds since the tap was made.
// A cut carries its whole point; moments are at most `MAX_TIMELINE`, so the size difference
// between the variants costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moment {
    /// The proxy cut a connection.
    Cut {
        /// Since start.
        t_ms: u64,
        /// `reset`, `fin` or `clean-end`.
        action: &'static str,
        /// Where it fell.
        point: CutPoint,
        /// The outage the cut opened, if any.
        outage: Option<Duration>,
        /// The call the cut leg carried, as JSON text of its JSON-RPC id: its `POST`'s, or for
        /// a resume leg the call whose stream it resumed; `None` when not known.
        call: Option<String>,
    },
    /// A client asked to resume a stream (`GET` with `Last-Event-ID`).
    Resume {
        /// Since start.
        t_ms: u64,
        /// The cursor sent.
        last_event_id: String,
        /// The session, if any.
        session: Option<String>,
    },
}

#[derive(Debug, Default)]
struct Facts {
    cuts_by_class: BTreeMap<String, u64>,
    cuts_by_action: BTreeMap<String, u64>,
    moments: Vec<Moment>,
    /// Data lines of events torn by a cut (by pending id), from their first whole delivery;
    /// `None` until one is seen. At most [`MAX_TIMELINE`] ids.
    torn_lines: BTreeMap<String, Option<u32>>,
    legs: LegCalls,
}

/// Forwards to an [`Auditor`] and records cuts and resumes.
pub struct Tap {
    auditor: Arc<Auditor>,
    start: Instant,
    facts: Mutex<Facts>,
}

impl Tap {
    /// A tap in front of `auditor`. Each cut's outage is the window that cut opened, as the
    /// pump recorded it (`CutPoint::outage_ms`), never a profile setting.
    pub fn new(auditor: Arc<Auditor>) -> Self {
        Tap {
            auditor,
            start: Instant::now(),
            facts: Mutex::new(Facts::default()),
        }
    }

    /// Cuts so far.
    pub fn cuts(&self) -> u64 {
        self.lock().cuts_by_action.values().sum()
    }

    /// Cuts by SSE class (`outside-sse` for cuts outside an SSE body).
    pub fn cuts_by_class(&self) -> BTreeMap<String, u64> {
        self.lock().cuts_by_class.clone()
    }

    /// Cuts by action.
    pub fn cuts_by_action(&self) -> BTreeMap<String, u64> {
        self.lock().cuts_by_action.clone()
    }

    /// How many `data` lines the event `id`, torn by a cut, had when it was later delivered
    /// whole through the proxy (`None`: never seen whole, or never torn).
    pub fn data_lines_of(&self, id: &str) -> Option<u32> {
        self.lock().torn_lines.get(id).copied().flatten()
    }

    /// The recorded moments, in time order.
    pub fn moments(&self) -> Vec<Moment> {
        self.lock().moments.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Facts> {
        self.facts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn since_start(&self) -> u64 {
        crate::units::millis(self.start.elapsed())
    }
}

impl ObservationSink for Tap {
    fn record(&self, obs: Observation) {
        match &obs {
            Observation::Cut {
                conn,
                action,
                point,
                ..
            } => {
                let t_ms = self.since_start();
                // An LLM stream's cut is filed under its LLM position (`mid-delta`, …).
                let class = point
                    .llm
                    .map(|p| p.as_str())
                    .or(point.class.map(|c| c.as_str()))
                    .unwrap_or("outside-sse")
                    .to_owned();
                let mut facts = self.lock();
                *facts.cuts_by_class.entry(class).or_default() += 1;
                *facts
                    .cuts_by_action
                    .entry(action.as_str().to_owned())
                    .or_default() += 1;
                if let Some(id) = &point.pending_id
                    && facts.torn_lines.len() < MAX_TIMELINE
                {
                    facts.torn_lines.entry(id.clone()).or_insert(None);
                }
                if facts.moments.len() < MAX_TIMELINE {
                    let call = point.rpc_id.clone().or_else(|| {
                        let seq = point.exchange?;
                        facts.legs.call_of((*conn, seq)).map(str::to_owned)
                    });
                    facts.moments.push(Moment::Cut {
                        t_ms,
                        action: action.as_str(),
                        point: point.clone(),
                        outage: point.outage_ms.map(Duration::from_millis),
                        call,
                    });
                }
            }
            Observation::Request {
                conn,
                seq,
                method,
                last_event_id,
                session,
                body,
                ..
            } => {
                let t_ms = self.since_start();
                let mut facts = self.lock();
                facts.legs.request(
                    (*conn, *seq),
                    method,
                    session.as_ref(),
                    last_event_id.as_ref(),
                    body.as_deref(),
                );
                if let Some(id) = last_event_id.as_ref().filter(|_| method == "GET")
                    && facts.moments.len() < MAX_TIMELINE
                {
                    facts.moments.push(Moment::Resume {
                        t_ms,
                        last_event_id: id.clone(),
                        session: session.clone(),
                    });
                }
            }
            Observation::SseEvent {
                conn,
                seq,
                id: Some(id),
                data_lines,
                ..
            } => {
                let mut facts = self.lock();
                facts.legs.event((*conn, *seq), id);
                if let Some(slot @ None) = facts.torn_lines.get_mut(id) {
                    *slot = Some(*data_lines);
                }
            }
            Observation::ConnClosed { conn } => self.lock().legs.closed(*conn),
            _ => {}
        }
        self.auditor.record(obs);
    }

    fn closing(&self) {
        self.auditor.closing();
    }
}
