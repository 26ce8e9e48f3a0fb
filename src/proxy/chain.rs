//! One direction's fault chain on one connection, and how a live edit changes it.
//!
//! A live edit (control API, profile reload, phase step) publishes a new fault list; each live
//! connection diffs its chain against it by fault identity — the toxic's or profile fault's
//! name ([`FaultFactory::name`]), else kind + direction + rank among the unnamed of that kind —
//! and by definition ([`FaultFactory::fingerprint`]):
//!
//! - **unchanged** (same identity, same definition): the instance is kept as it is — timers,
//!   token buckets, the probability draw, an `sse_cut`'s current stream and aim;
//! - **changed** (same identity, new definition): a new instance is made with what still means
//!   the same: the connection's probability draw for that fault (never rolled again; it is
//!   compared with the new probability), the fault's start time (a `timeout` or `after_ms`
//!   counts from when the fault first applied, not from the edit), stream offsets (a
//!   `limit_data` of N still closes at byte N), and what the kind hands over
//!   ([`Fault::hand_over`]: an `sse_cut` keeps the current stream's decision and applies from
//!   the next stream, so a stream is cut at most once; an `idle` keeps its last activity);
//! - **removed**: dropped (a pending deadline of it no longer fires);
//! - **new**: starts at the edit, with a fresh draw.
//!
//! New connections build their chain from the list in force when they are accepted. The edit
//! applies to the next chunk relayed after it (the pump refreshes after each read and wakes on
//! an edit while it waits); bytes already planned keep their timing and order.
//!
//! Toxiproxy, for comparison (`link.go`): each toxic of a link runs in its own goroutine, so
//! toxics other than the edited one keep their state; an updated toxic is interrupted and run
//! again (its timers restart and its toxicity is rolled again; stateful toxics such as
//! `limit_data` keep their byte counts), and adding or removing a toxic also re-runs the toxic
//! before it in the chain. tearline keeps more: no neighbour is restarted, and start times and
//! draws survive an update.
//!
//! Invariant: `faults` holds, in list order, the instances of the members that fired (`live`).

use std::sync::Arc;

use tokio::time::Instant;

use super::stats::Stats;
use crate::fault::{ConnRng, Fault, FaultFactory};
use crate::vocab::Direction;

/// A direction's fault chain and the fault-list generation it was built from.
pub(crate) struct Chain {
    pub(crate) faults: Vec<Box<dyn Fault>>,
    pub(crate) generation: u64,
    members: Vec<Member>,
}

/// One fault of the list as this connection saw it, fired or not.
struct Member {
    id: String,
    fingerprint: String,
    /// The connection's probability draw for the fault, made once.
    draw: Option<f64>,
    /// When the fault first applied to the connection.
    started: Instant,
    /// Whether it fired (its instance is in `faults`).
    live: bool,
}

/// The identity of each factory of `factories` (see the module doc), in list order.
pub(crate) fn identities(factories: &[Arc<dyn FaultFactory>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(factories.len());
    for (i, f) in factories.iter().enumerate() {
        let id = match f.name() {
            Some(n) => format!("name:{n}"),
            None => {
                let rank = factories[..i]
                    .iter()
                    .filter(|g| {
                        g.name().is_none() && g.kind() == f.kind() && g.direction() == f.direction()
                    })
                    .count();
                format!("{}:{}#{rank}", f.direction(), f.kind())
            }
        };
        out.push(id);
    }
    out
}

impl Chain {
    /// An empty chain of list `generation`.
    pub(crate) fn new(generation: u64) -> Self {
        Chain {
            faults: Vec::new(),
            generation,
            members: Vec::new(),
        }
    }

    /// Adds a fault that starts at `now` (a new connection's, or one a live edit added).
    pub(crate) fn add(
        &mut self,
        factory: &dyn FaultFactory,
        id: String,
        rng: &mut ConnRng,
        now: Instant,
        stats: &Stats,
    ) {
        let (draw, fault) = factory.instantiate_drawn(None, rng, now);
        let live = fault.is_some();
        if let Some(fault) = fault {
            stats.activated(fault.kind());
            self.faults.push(fault);
        }
        self.members.push(Member {
            id,
            fingerprint: factory.fingerprint(),
            draw,
            started: now,
            live,
        });
    }

    /// Diffs the chain against the list `factories` of `generation` (the direction `dir`'s
    /// faults of it), as the module doc says.
    pub(crate) fn rebuild(
        &mut self,
        generation: u64,
        factories: &[Arc<dyn FaultFactory>],
        dir: Direction,
        rng: &mut ConnRng,
        now: Instant,
        stats: &Stats,
    ) {
        let mut instances = std::mem::take(&mut self.faults).into_iter();
        let mut old: Vec<(Member, Option<Box<dyn Fault>>)> = std::mem::take(&mut self.members)
            .into_iter()
            .map(|m| {
                let f = if m.live { instances.next() } else { None };
                (m, f)
            })
            .collect();
        let ids = identities(factories);
        for (factory, id) in factories.iter().zip(ids) {
            if factory.direction() != dir {
                continue;
            }
            let Some(pos) = old.iter().position(|(m, _)| m.id == id) else {
                self.add(&**factory, id, rng, now, stats);
                continue;
            };
            let (mut member, prev) = old.remove(pos);
            let fingerprint = factory.fingerprint();
            if member.fingerprint == fingerprint {
                member.live = prev.is_some();
                self.faults.extend(prev);
                self.members.push(member);
                continue;
            }
            let (draw, fault) = factory.instantiate_drawn(member.draw, rng, member.started);
            member.draw = draw;
            member.fingerprint = fingerprint;
            member.live = fault.is_some();
            if let Some(mut fault) = fault {
                if let Some(state) = prev.and_then(|mut p| p.hand_over()) {
                    fault.take_over(state);
                }
                stats.activated(fault.kind());
                self.faults.push(fault);
            }
            self.members.push(member);
        }
        self.generation = generation;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::common::{Common, Factory};
    use crate::fault::conn_rng;
    use crate::fault::latency::LatencyConfig;
    use crate::fault::timeout::TimeoutConfig;
    use std::time::Duration;

    fn timeout(ms: u64, probability: f64) -> Arc<dyn FaultFactory> {
        let common = Common {
            direction: Direction::Downstream,
            probability,
        };
        Factory::shared(
            common,
            TimeoutConfig {
                timeout: Duration::from_millis(ms),
            },
        )
    }

    fn latency(ms: u64) -> Arc<dyn FaultFactory> {
        Factory::shared(
            Common::default(),
            LatencyConfig {
                latency: Duration::from_millis(ms),
                jitter: Duration::ZERO,
            },
        )
    }

    fn build(list: &[Arc<dyn FaultFactory>], rng: &mut ConnRng, now: Instant) -> Chain {
        let stats = Stats::new();
        let mut c = Chain::new(0);
        c.rebuild(0, list, Direction::Downstream, rng, now, &stats);
        c
    }

    #[test]
    fn an_unrelated_addition_keeps_a_timeout_deadline_and_a_changed_one_keeps_its_start() {
        let stats = Stats::new();
        let mut rng = conn_rng(1, "p", 0);
        let t0 = Instant::now();
        let mut c = build(
            &[crate::fault::named("t", timeout(2000, 1.0))],
            &mut rng,
            t0,
        );
        let later = t0 + Duration::from_millis(1500);
        let list = [
            crate::fault::named("t", timeout(2000, 1.0)),
            crate::fault::named("l", latency(5)),
        ];
        c.rebuild(1, &list, Direction::Downstream, &mut rng, later, &stats);
        assert_eq!(c.faults.len(), 2);
        let at = c.faults[0].deadline().map(|d| d.at);
        assert_eq!(at, Some(t0 + Duration::from_millis(2000)));
        let list = [crate::fault::named("t", timeout(3000, 1.0))];
        c.rebuild(2, &list, Direction::Downstream, &mut rng, later, &stats);
        assert_eq!(c.faults.len(), 1);
        let at = c.faults[0].deadline().map(|d| d.at);
        assert_eq!(at, Some(t0 + Duration::from_millis(3000)));
    }

    #[test]
    fn the_probability_draw_is_kept_when_the_probability_changes() {
        let stats = Stats::new();
        let t0 = Instant::now();
        // Find a connection whose draw lies between 0.3 and 0.7.
        let (mut rng, mut c) = (0..1000)
            .map(|i| {
                let mut rng = conn_rng(9, "p", i);
                let c = build(&[crate::fault::named("t", timeout(50, 0.5))], &mut rng, t0);
                (rng, c)
            })
            .find(|(_, c)| c.members[0].draw.is_some_and(|d| (0.3..0.5).contains(&d)))
            .expect("a draw in [0.3, 0.5) among 1000 connections");
        let draw = c.members[0].draw;
        assert_eq!(c.faults.len(), 1, "0.5 > draw fires");
        for (g, p) in [(1, 0.29), (2, 0.6), (3, 0.31), (4, 0.2)] {
            let list = [crate::fault::named("t", timeout(50, p))];
            c.rebuild(g, &list, Direction::Downstream, &mut rng, t0, &stats);
            assert_eq!(c.members[0].draw, draw, "never rolled again");
            let fires = draw.is_some_and(|d| d < p);
            assert_eq!(c.faults.len(), usize::from(fires), "probability {p}");
        }
    }

    #[test]
    fn removed_faults_drop_and_unnamed_ones_match_by_kind_and_rank() {
        let stats = Stats::new();
        let mut rng = conn_rng(1, "p", 0);
        let t0 = Instant::now();
        let a = timeout(100, 1.0);
        let mut c = build(&[Arc::clone(&a), latency(1)], &mut rng, t0);
        let ids: Vec<String> = c.members.iter().map(|m| m.id.clone()).collect();
        assert_eq!(ids, ["downstream:timeout#0", "downstream:latency#0"]);
        let later = t0 + Duration::from_millis(50);
        c.rebuild(1, &[a], Direction::Downstream, &mut rng, later, &stats);
        assert_eq!(c.faults.len(), 1);
        assert_eq!(c.faults[0].kind(), "timeout");
        let at = c.faults[0].deadline().map(|d| d.at);
        assert_eq!(at, Some(t0 + Duration::from_millis(100)));
    }
}
