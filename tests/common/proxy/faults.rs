//! A test-only fault driven by a script of actions (delay, split, drop, cut, deadline, slow EOF),
//! to check that the pump carries out plans exactly.

use std::sync::Arc;
use std::time::Duration;

use tearline::fault::{Chunk, ConnRng, Cut, Deadline, Fault, FaultFactory, Plan, Slice};
use tearline::vocab::CutAction;
use tearline::vocab::Direction;
use tokio::time::Instant;

/// One scripted action.
#[derive(Debug, Clone, Copy)]
pub enum Act {
    /// Every byte leaves `d` after its chunk arrived.
    Delay(Duration),
    /// Slices of at most `n` bytes, each `gap` after the previous one.
    Split(usize, Duration),
    /// Stream bytes `from..to` are dropped.
    Drop(u64, u64),
    /// The connection is cut after exactly this many stream bytes.
    Cut(u64, CutAction),
    /// As `Cut`, and the proxy then holds new connections for the duration (an outage).
    CutOutage(u64, CutAction, Duration),
    /// The connection is cut this long after the fault was made.
    Deadline(Duration, CutAction),
    /// EOF is passed on this long after it arrived.
    SlowEof(Duration),
}

pub struct Scripted {
    acts: Vec<Act>,
    made: Instant,
    cut_done: bool,
}

impl Scripted {
    fn cut(
        &mut self,
        plan: &mut Plan,
        off: u64,
        len: usize,
        at: u64,
        action: CutAction,
        outage: Option<Duration>,
    ) {
        if !self.cut_done && at >= off && at <= off + len as u64 {
            self.cut_done = true;
            plan.cut_at(Cut {
                at: (at - off) as usize,
                action,
                outage,
                by: "scripted",
            });
        }
    }
}

impl Fault for Scripted {
    fn kind(&self) -> &'static str {
        "scripted"
    }

    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, _rng: &mut ConnRng) {
        let len = chunk.bytes.len();
        let off = chunk.offset;
        for act in self.acts.clone() {
            match act {
                Act::Delay(d) => {
                    for s in plan.slices_mut() {
                        s.at = s.at.max(chunk.arrived + d);
                    }
                }
                Act::Split(n, gap) => {
                    let old: Vec<Slice> = plan.slices().to_vec();
                    let out = plan.slices_mut();
                    out.clear();
                    let mut t = None;
                    for s in old {
                        let mut start = s.start;
                        while start < s.end {
                            let end = (start + n).min(s.end);
                            let at = t.map_or(s.at, |p: Instant| (p + gap).max(s.at));
                            out.push(Slice { start, end, at });
                            t = Some(at);
                            start = end;
                        }
                    }
                }
                Act::Drop(from, to) => {
                    let a = from.saturating_sub(off).min(len as u64) as usize;
                    let b = to.saturating_sub(off).min(len as u64) as usize;
                    if a < b {
                        let old: Vec<Slice> = plan.slices().to_vec();
                        let out = plan.slices_mut();
                        out.clear();
                        for s in old {
                            if s.start < a {
                                out.push(Slice {
                                    end: s.end.min(a),
                                    ..s
                                });
                            }
                            if s.end > b {
                                out.push(Slice {
                                    start: s.start.max(b),
                                    ..s
                                });
                            }
                        }
                    }
                }
                Act::Cut(at, action) => self.cut(plan, off, len, at, action, None),
                Act::CutOutage(at, action, d) => self.cut(plan, off, len, at, action, Some(d)),
                Act::Deadline(..) | Act::SlowEof(_) => {}
            }
        }
    }

    fn deadline(&self) -> Option<Deadline> {
        self.acts.iter().find_map(|a| match *a {
            Act::Deadline(d, action) => Some(Deadline {
                at: self.made + d,
                action,
                by: "scripted",
            }),
            _ => None,
        })
    }

    fn on_eof(&mut self, now: Instant) -> Instant {
        self.acts
            .iter()
            .find_map(|a| match *a {
                Act::SlowEof(d) => Some(now + d),
                _ => None,
            })
            .unwrap_or(now)
    }
}

/// Makes a [`Scripted`] fault for every connection.
pub struct ScriptedFactory {
    pub direction: Direction,
    pub acts: Vec<Act>,
}

impl FaultFactory for ScriptedFactory {
    fn kind(&self) -> &'static str {
        "scripted"
    }
    fn direction(&self) -> Direction {
        self.direction
    }
    fn instantiate(&self, _rng: &mut ConnRng, now: Instant) -> Option<Box<dyn Fault>> {
        Some(Box::new(Scripted {
            acts: self.acts.clone(),
            made: now,
            cut_done: false,
        }))
    }
}

/// A factory list with one scripted fault.
pub fn scripted(direction: Direction, acts: &[Act]) -> Vec<Arc<dyn FaultFactory>> {
    vec![Arc::new(ScriptedFactory {
        direction,
        acts: acts.to_vec(),
    })]
}
