//! How many entries each of the auditor's stores holds, for `/metrics`
//! (`tearline_audit_tracked{store=…}`).
//!
//! Why: a proxy left running for hours must hold audit state in proportion to what is live and
//! what ended less than `grace` ago, never to everything it ever relayed. These gauges make
//! that checkable from outside (the churn bench reads them after its grace wait): after the
//! traffic stops and the grace passes, every per-connection and per-stream store is back to 0,
//! so memory that stays is the allocator's, not the audit's. Invariant: reading them settles
//! only what is due anyway (the caller sweeps first, as every other query does).

use super::ledger::Ledger;

impl Ledger {
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
            ("loss_keys", n(self.loss.remembered())),
            ("findings", n(self.findings.len())),
        ]
    }
}
