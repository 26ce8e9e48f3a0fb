//! The scripted cut of a 2026-07-28 run: the proxy cuts the response of exactly one
//! `tools/call` — the k-th call response the proxy relays, over all connections (real clients
//! pool and reuse connections, so a connection index names no call) — at a position drawn from
//! the connection's seeded RNG, and records where it fell (a harness fact, not the audit's).
//!
//! Which responses count: on an SSE-answering lab, every SSE response stream is a `tools/call`
//! stream (the lab answers `server/discover` and `tools/list` with JSON); on a lab answering
//! calls with JSON bodies ([`crate::lab::LabConfig::json_results`]), every body carrying the
//! `"content":[` key (only `tools/call` results carry it) is one, found by scanning the relayed
//! bytes (a key split across reads is found too).
//!
//! Invariants:
//! - At most one cut per run: the target response only, at the first position of its drawn
//!   class inside the chosen events (SSE) or inside its `"content":[` key (JSON: bytes of the
//!   body always precede the cut). The calls run one after another, so response k is call
//!   attempt k.
//! - The record says what the client could have received: the class and event of the cut,
//!   how many payload bytes of the response went out before it (`visible` iff any), and whether
//!   an event was torn (bytes of an undispatched event delivered: any class but `boundary`).
//! - A target response that ends before a matching position is not cut; the record then stays
//!   empty and the run is a harness failure, never a run without a cut scored as one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rand::RngExt;
use tokio::time::Instant;

use crate::fault::{Chunk, ConnRng, Cut, Fault, FaultFactory, Plan};
use crate::vocab::{CutAction, Direction};
use crate::wire::SseClass;

/// The JSON key only a `tools/call` result carries.
pub const CALL_RESULT_KEY: &[u8] = b"\"content\":[";

/// Where in an SSE stream a cut may fall.
#[derive(Debug, Clone)]
pub struct SseAim {
    /// The classes to draw from, with their weights.
    pub classes: Vec<(SseClass, f64)>,
    /// The event indexes (inclusive) the cut may fall in.
    pub events: (u64, u64),
}

/// What the harness asked for.
#[derive(Debug, Clone)]
pub struct CutAim {
    /// Cut the response with this index (0-based, in relay order).
    pub target: u64,
    /// `None`: a JSON body; else where in the SSE stream.
    pub sse: Option<SseAim>,
    /// How the connection ends.
    pub action: CutAction,
}

/// Where the cut fell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutFact {
    /// The index of the response cut.
    pub target: u64,
    /// The SSE class of the cut point (`None`: a JSON body).
    pub class: Option<SseClass>,
    /// The SSE event the cut fell in.
    pub event_index: Option<u64>,
    /// Whether any payload byte of the response reached the client before the cut.
    pub visible: bool,
    /// Whether bytes of an undispatched SSE event reached the client (a torn event).
    pub torn: bool,
}

/// What every connection of the run's proxy shares.
#[derive(Debug)]
struct Shared {
    aim: CutAim,
    seen: AtomicU64,
    fact: Mutex<Option<CutFact>>,
}

impl Shared {
    fn fact(&self) -> Option<CutFact> {
        self.fact.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn note(&self, fact: CutFact) {
        *self.fact.lock().unwrap_or_else(|p| p.into_inner()) = Some(fact);
    }
}

/// The factory of the run's proxy.
#[derive(Debug)]
pub struct CallCut {
    shared: Arc<Shared>,
}

impl CallCut {
    /// A cut aimed as `aim`.
    pub fn new(aim: CutAim) -> Arc<CallCut> {
        Arc::new(CallCut {
            shared: Arc::new(Shared {
                aim,
                seen: AtomicU64::new(0),
                fact: Mutex::new(None),
            }),
        })
    }

    /// Where the cut fell, if it fell.
    pub fn fact(&self) -> Option<CutFact> {
        self.shared.fact()
    }

    /// Call responses seen so far.
    pub fn responses(&self) -> u64 {
        self.shared.seen.load(Ordering::SeqCst)
    }
}

impl FaultFactory for CallCut {
    fn kind(&self) -> &'static str {
        "accuracy-call-cut"
    }

    fn direction(&self) -> Direction {
        Direction::Downstream
    }

    fn instantiate(&self, _rng: &mut ConnRng, _now: Instant) -> Option<Box<dyn Fault>> {
        Some(Box::new(ConnCut {
            shared: Arc::clone(&self.shared),
            stream: None,
            armed: None,
            carry: Vec::new(),
        }))
    }

    /// On h2 a `reset` or `clean-end` cut ends its stream alone (through the stream relay) and
    /// a `fin` ends the connection; either way the relay delivers the bytes before the cut as
    /// one whole frame (an h2 stack hands on nothing of an incomplete one), so the record of
    /// what the client could have received holds as on HTTP/1.1.
    fn h2_body_cut(&self) -> Option<crate::fault::h2::BodyCut> {
        Some(crate::fault::h2::BodyCut {
            scope: crate::fault::h2::CutScope::Stream,
            client_code: crate::wire::h2::ErrorCode::CANCEL,
        })
    }
}

/// The chosen class of the target stream, once its first bytes passed.
#[derive(Debug, Clone, Copy)]
struct Armed {
    class: SseClass,
}

/// One connection's view.
struct ConnCut {
    shared: Arc<Shared>,
    /// `StreamInfo::seq` of the SSE stream seen last on this connection.
    stream: Option<u64>,
    /// Set while the current stream is the target and not yet cut.
    armed: Option<Armed>,
    /// The last bytes of the previous chunk (a JSON key split across reads).
    carry: Vec<u8>,
}

fn pick(weights: &[(SseClass, f64)], u: f64) -> SseClass {
    let total: f64 = weights.iter().map(|w| w.1).sum();
    let mut x = u * total;
    for &(c, w) in weights {
        if x < w {
            return c;
        }
        x -= w;
    }
    weights.last().map_or(SseClass::Boundary, |w| w.0)
}

impl ConnCut {
    fn cut(&self, plan: &mut Plan, at: usize, fact: CutFact) {
        self.shared.note(fact);
        plan.cut_at(Cut {
            at,
            action: self.shared.aim.action,
            outage: None,
            by: "accuracy-call-cut",
        });
    }

    fn on_sse(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        let Some(pos) = chunk.positions else { return };
        let Some(SseAim {
            classes,
            events: (lo, hi),
        }) = self.shared.aim.sse.clone()
        else {
            return;
        };
        for run in &pos.runs {
            if let Some(s) = pos.stream_at(run.start)
                && self.stream != Some(s.seq)
            {
                self.stream = Some(s.seq);
                let index = self.shared.seen.fetch_add(1, Ordering::SeqCst);
                self.armed = (index == self.shared.aim.target).then(|| Armed {
                    class: pick(&classes, rng.random::<f64>()),
                });
            }
            let Some(armed) = self.armed else { continue };
            if run.class != armed.class || run.event_index < lo || run.event_index > hi {
                continue;
            }
            let skip = rng.random_range(0..(run.end - run.start).max(1));
            let payload = run.payload_offset + skip as u64;
            self.armed = None;
            let fact = CutFact {
                target: self.shared.aim.target,
                class: Some(run.class),
                event_index: Some(run.event_index),
                visible: payload > 0,
                torn: run.class != SseClass::Boundary,
            };
            self.cut(plan, run.start + skip, fact);
            return;
        }
    }

    fn on_json(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        let keep = CALL_RESULT_KEY.len() - 1;
        let mut hay = std::mem::take(&mut self.carry);
        let carried = hay.len();
        hay.extend_from_slice(chunk.bytes);
        let mut from = 0;
        while let Some(i) = memchr::memmem::find(&hay[from..], CALL_RESULT_KEY) {
            let at = from + i;
            from = at + 1;
            let index = self.shared.seen.fetch_add(1, Ordering::SeqCst);
            if index != self.shared.aim.target {
                continue;
            }
            let inside = at + rng.random_range(0..CALL_RESULT_KEY.len());
            let fact = CutFact {
                target: index,
                class: None,
                event_index: None,
                visible: true,
                torn: false,
            };
            self.cut(plan, inside.saturating_sub(carried), fact);
            return;
        }
        let tail = hay.len().saturating_sub(keep).max(from.min(hay.len()));
        self.carry = hay[tail..].to_vec();
    }
}

impl Fault for ConnCut {
    fn kind(&self) -> &'static str {
        "accuracy-call-cut"
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng) {
        if self.shared.fact().is_some() {
            return;
        }
        match self.shared.aim.sse {
            Some(_) => self.on_sse(chunk, plan, rng),
            None => self.on_json(chunk, plan, rng),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn chunk(bytes: &[u8]) -> Chunk<'_> {
        Chunk {
            bytes,
            offset: 0,
            arrived: Instant::now(),
            direction: Direction::Downstream,
            positions: None,
        }
    }

    #[test]
    fn the_target_json_result_is_cut_inside_its_content_key_even_when_split_across_reads() {
        let shared = CallCut::new(CutAim {
            target: 1,
            sse: None,
            action: CutAction::Reset,
        });
        let mut rng = ConnRng::seed_from_u64(3);
        let mut fault = shared
            .instantiate(&mut rng, Instant::now())
            .expect("an instance");
        let first = br#"HTTP/1.1 200 OK\r\n\r\n{"result":{"content":[{"text":"a"}]}}"#;
        let mut plan = Plan::default();
        plan.reset(first.len(), Instant::now());
        fault.on_chunk(&chunk(first), &mut plan, &mut rng);
        assert!(plan.cut().is_none(), "the first result is not the target");
        let second = br#"HTTP/1.1 200 OK\r\n\r\n{"result":{"con"#;
        plan.reset(second.len(), Instant::now());
        fault.on_chunk(&chunk(second), &mut plan, &mut rng);
        assert!(plan.cut().is_none());
        let third = br#"tent":[{"text":"b"}]}}"#;
        plan.reset(third.len(), Instant::now());
        fault.on_chunk(&chunk(third), &mut plan, &mut rng);
        let at = plan.cut().map(|c| c.at).expect("the second result is cut");
        assert!(at <= b"tent\":[".len(), "cut at {at}");
        let fact = shared.fact().expect("recorded");
        assert_eq!((fact.target, fact.visible, fact.torn), (1, true, false));
    }
}
