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
//! - **new**: starts at the edit, with a fresh draw: its time counts from the edit that added it
//!   (kept in the published list, so a connection that was idle, or saw several edits at once,
//!   does not restart it) and its byte counts from the first byte read after that edit
//!   ([`Fault::rebase`]).
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

use super::state::Published;
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
    /// When the fault first applied to the connection: the connection's start, or the edit
    /// that added it.
    started: Instant,
    /// The direction's stream offset where it first applied (0, or the first byte read after
    /// the edit that added it): its byte counts start there.
    offset: u64,
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

    /// Adds a fault that starts at `started`, at stream offset `offset` (a new connection's:
    /// its start and 0; or one a live edit added: the edit's time and the offset reached).
    pub(crate) fn add(
        &mut self,
        factory: &dyn FaultFactory,
        id: String,
        rng: &mut ConnRng,
        (started, offset): (Instant, u64),
        stats: &Stats,
    ) {
        let (draw, fault) = factory.instantiate_drawn(None, rng, started);
        let live = fault.is_some();
        if let Some(mut fault) = fault {
            fault.rebase(offset);
            stats.activated(fault.kind());
            self.faults.push(fault);
        }
        self.members.push(Member {
            id,
            fingerprint: factory.fingerprint(),
            draw,
            started,
            offset,
            live,
        });
    }

    /// Diffs the chain against the published list (the direction `dir`'s faults of it), as
    /// the module doc says; `now` is the time of the diff and `offset` the direction's stream
    /// offset reached (bytes read before the chunk the edit applies to).
    pub(crate) fn rebuild(
        &mut self,
        list: &Published,
        dir: Direction,
        rng: &mut ConnRng,
        (now, offset): (Instant, u64),
        stats: &Stats,
    ) {
        let factories = &list.factories[..];
        let mut instances = std::mem::take(&mut self.faults).into_iter();
        let mut old: Vec<(Member, Option<Box<dyn Fault>>)> = std::mem::take(&mut self.members)
            .into_iter()
            .map(|m| {
                let f = if m.live { instances.next() } else { None };
                (m, f)
            })
            .collect();
        let ids = identities(factories);
        for ((factory, id), since) in factories.iter().zip(ids).zip(list.since.iter()) {
            if factory.direction() != dir {
                continue;
            }
            let Some(pos) = old.iter().position(|(m, _)| m.id == id) else {
                // Added by an edit: it counts from that edit, even when this connection sees it
                // only now (idle since, or several edits later).
                self.add(&**factory, id, rng, ((*since).min(now), offset), stats);
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
                fault.rebase(member.offset);
                if let Some(state) = prev.and_then(|mut p| p.hand_over()) {
                    fault.take_over(state);
                }
                stats.activated(fault.kind());
                self.faults.push(fault);
            }
            self.members.push(member);
        }
        self.generation = list.generation;
    }
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
