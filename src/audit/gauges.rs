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
//! alone held tens of MiB with 0 entries. `Engine::shrink_stores` (run at each sweep) shrinks
//! each map's table to room for twice its entries, so the memory follows the gauges.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};

/// Tables are never shrunk below room for this many entries.
const SHRINK_FLOOR: usize = 1024;

/// Shrinks `map`'s table to room for twice its entries (at least [`SHRINK_FLOOR`]). A no-op
/// unless the table is larger than that (`capacity()` does not count removed slots, so it is
/// not a measure of the table's size).
pub(crate) fn shrink<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    map.shrink_to(room_for(map.len()));
}

/// The capacity a store of `len` entries is shrunk to: twice its entries, at least
/// [`SHRINK_FLOOR`] (the rule for every table and queue the sweep shrinks).
pub(crate) fn room_for(len: usize) -> usize {
    (len * 2).max(SHRINK_FLOOR)
}

/// Whether `session` has at least one item in a rule's per-session map.
pub(crate) fn holds_items<V>(
    map: &HashMap<Option<String>, Vec<V>>,
    session: &Option<String>,
) -> bool {
    map.get(session).is_some_and(|v| !v.is_empty())
}

/// The items across every session of a rule's per-session map, for its gauge.
pub(crate) fn items<V>(map: &HashMap<Option<String>, Vec<V>>) -> u64 {
    let n: usize = map.values().map(Vec::len).sum();
    u64::try_from(n).unwrap_or(u64::MAX)
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
