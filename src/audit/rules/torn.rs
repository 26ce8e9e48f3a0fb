//! Rule `torn-cut`: an event was partly delivered when the proxy cut the connection.
//!
//! Rule (precise): a downstream cut of the leg whose body was in flight is `torn-cut` if and
//! only if its SSE class tears an event (see `SseClass::tears_event`: not a boundary, not
//! after the final response) and at least one byte of that event reached the client. The
//! evidence: the torn event's id (if its `id:` line was complete) and the last committed id,
//! the raw offset, the class, the bytes delivered, the `data:` line, the TLS end.
//!
//! The facts the cut leaves (the torn event, an id committed without dispatch) are the
//! engine's (`events`), recorded in the ledger before this rule runs; later judgements
//! (`cursor-ahead`, the replay owed the torn event) read them from there.
//!
//! State: none.

use crate::audit::finding::{FindingCut, FindingKind};
use crate::audit::ledger::Ledger;
use crate::audit::rule::{CutSeen, Rule};

/// The `torn-cut` rule.
#[derive(Debug, Default)]
pub struct TornCut;

impl Rule for TornCut {
    fn name(&self) -> &'static str {
        "torn"
    }

    fn on_cut(&mut self, l: &mut Ledger, c: &CutSeen<'_>) {
        let p = c.point;
        let tears = p.class.is_some_and(|k| k.tears_event()) && p.torn_bytes > 0;
        if !c.in_flight || !tears || !l.streams.contains_key(&c.key) {
            return;
        }
        let class = p.class.map_or("-", |k| k.as_str());
        let mut f = l
            .finding(FindingKind::TornCut, c.key, c.now)
            .ids(
                p.pending_id
                    .iter()
                    .chain(p.last_committed_id.iter())
                    .cloned()
                    .collect(),
            )
            .offsets(vec![p.raw_offset])
            .detail(format!(
                "{} cut in {class} of event #{} (id {}) after {} byte(s){}; last committed id {}",
                c.action.as_str(),
                p.event_index.map_or("-".to_string(), |i| i.to_string()),
                p.pending_id.as_deref().unwrap_or("not yet sent"),
                p.torn_bytes,
                p.data_line
                    .map_or(String::new(), |n| format!(", in data line {n}")),
                p.last_committed_id.as_deref().unwrap_or("(none)"),
            ));
        f.cut = FindingCut::from_point(p);
        l.emit(f);
    }
}
