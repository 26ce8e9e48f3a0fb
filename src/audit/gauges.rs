//! How many entries each of the auditor's stores holds, for `/metrics`
//! (`tearline_audit_tracked{store=…}`).
//!
//! Why: a proxy left running for hours must hold audit state in proportion to what is live and
//! what ended less than `grace` ago, never to everything it ever relayed. These gauges make
//! that checkable from outside (the churn bench reads them after its grace wait): after the
//! traffic stops and the grace passes, every per-connection and per-stream store is back to 0,
//! so memory that stays is the allocator's, not the audit's. Invariant: reading them settles
//! only what is due anyway (the caller sweeps first, as every other query does).
//!
//! An emptied hash map keeps its table: after a burst of 70,000 streams the `streams` table
//! alone held tens of MiB with 0 entries. [`Ledger::shrink_stores`] (run at each sweep) shrinks
//! each map's table to room for twice its entries, so the memory follows the gauges.

use std::collections::HashMap;
use std::hash::Hash;

use super::ledger::Ledger;

/// Tables are never shrunk below room for this many entries.
const SHRINK_FLOOR: usize = 1024;

/// Shrinks `map`'s table to room for twice its entries (at least [`SHRINK_FLOOR`]). A no-op
/// unless the table is larger than that (`capacity()` does not count removed slots, so it is
/// not a measure of the table's size).
pub(crate) fn shrink<K: Eq + Hash, V>(map: &mut HashMap<K, V>) {
    map.shrink_to(room_for(map.len()));
}

/// The capacity a store of `len` entries is shrunk to: twice its entries, at least
/// [`SHRINK_FLOOR`] (the rule for every table and queue the sweep shrinks).
pub(crate) fn room_for(len: usize) -> usize {
    (len * 2).max(SHRINK_FLOOR)
}

impl Ledger {
    /// Gives back the table capacity of the per-connection and per-stream maps that emptied
    /// (see the module doc).
    pub fn shrink_stores(&mut self) {
        shrink(&mut self.streams);
        shrink(&mut self.sessions);
        shrink(&mut self.order);
        shrink(&mut self.opaque);
        self.shared_ids.shrink();
        self.modern.shrink();
        self.lost.shrink();
        self.resends.shrink();
        self.ended.shrink();
        for s in self.sessions.values_mut() {
            shrink(&mut s.ids);
            shrink(&mut s.calls);
        }
    }

    /// Entries per store, by store name, in a fixed order.
    pub fn store_sizes(&self) -> Vec<(&'static str, u64)> {
        let n = |v: usize| u64::try_from(v).unwrap_or(u64::MAX);
        let sessions = self.sessions.values();
        let (mut ids, mut calls, mut watches, mut truncations) = (0, 0, 0, 0);
        for s in sessions {
            ids += s.ids.len();
            calls += s.calls.len();
            watches += s.watches.len();
            truncations += s.truncations.len();
        }
        let events: usize = self.streams.values().map(|s| s.remembered()).sum();
        let (modern_calls, cancelled, hints) = self.modern.sizes();
        vec![
            ("streams", n(self.streams.len())),
            ("sessions", n(self.sessions.len())),
            ("exchanges", n(self.legs.len())),
            ("connections", n(self.order.len())),
            ("events", n(events)),
            ("event_ids", n(ids)),
            ("opaque_ids", n(self.opaque.len())),
            ("shared_ids", n(self.shared_ids.len())),
            ("calls", n(calls)),
            ("watches", n(watches)),
            ("truncations", n(truncations)),
            ("modern_calls", n(modern_calls)),
            ("cancelled_calls", n(cancelled)),
            ("tool_hints", n(hints)),
            ("lost_calls", n(self.lost.len())),
            ("idempotency_keys", n(self.resends.len())),
            ("ended_streams", n(self.ended.live())),
            ("loss_keys", n(self.loss.remembered())),
            ("findings", n(self.findings.len())),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_map_gives_its_table_back_and_a_full_one_keeps_it() {
        let mut m: HashMap<u64, [u8; 64]> = (0..100_000).map(|k| (k, [0; 64])).collect();
        shrink(&mut m);
        let full = m.capacity();
        assert!(full >= 100_000, "a full map keeps its table");
        m.retain(|k, _| *k < 10);
        shrink(&mut m);
        assert!(
            m.capacity() <= SHRINK_FLOOR * 2,
            "capacity {}",
            m.capacity()
        );
        assert_eq!(m.len(), 10);
    }
}
