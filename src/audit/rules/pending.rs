//! Rule `pending-call` (seed 000): a response stream that ended cleanly without the answer to
//! its `tools/call`, with no resume after it.
//!
//! Rules (precise):
//! - When a leg ends with a clean body end, not by a proxy cut (the proxy's own clean-end cut
//!   reaches the audit before the body end, so it never counts), with status 200, on a leg the
//!   wire observer followed to the end, and the replay verdict of that leg signalled nothing
//!   (`silent-empty`, `explicit-loss`), every unanswered `tools/call` of the stream not yet
//!   reported or deferred gets a `pending-call`, deferred on the stream (ledger:
//!   `Ledger::defer`).
//! - Deferred findings are dropped if a resume of the stream follows (a polling server may end
//!   a response without ending the stream) or the call is answered or provably re-sent
//!   meanwhile, and reported when the stream is forgotten, `abandon_after` after its end, or
//!   at `finish` (`Ledger::settle_deferred`). A later identical call without proof is named as
//!   a candidate (rule `abandoned`).
//!
//! State: none (the deferred findings are the ledger's: other rules drop or annotate them).

use crate::audit::finding::FindingKind;
use crate::audit::ledger::Ledger;
use crate::audit::rpc::TOOLS_CALL;
use crate::audit::rule::{LegEnded, Rule};
use crate::audit::stream::StreamKey;
use tokio::time::Instant;

/// The `pending-call` rule.
#[derive(Debug, Default)]
pub struct PendingCall;

/// Defers `pending-call` for every unanswered `tools/call` of stream `key`.
fn defer_pending(l: &mut Ledger, now: Instant, key: StreamKey) {
    let Some(stream) = l.streams.get(&key) else {
        return;
    };
    let deferred: Vec<&String> = stream
        .deferred
        .iter()
        .filter(|f| f.kind == FindingKind::PendingCall)
        .flat_map(|f| f.ids.iter())
        .collect();
    let ids: Vec<String> = stream
        .unanswered()
        .filter(|c| c.method == TOOLS_CALL && !c.reported && !deferred.contains(&&c.id))
        .map(|c| c.id.clone())
        .collect();
    let last = stream.last_event_id.clone();
    for id in ids {
        let f = l
            .finding(FindingKind::PendingCall, key, now)
            .ids(vec![id.clone()])
            .detail(format!(
                "the stream ended cleanly after id {} without a result or error for \
                 tools/call {id}, and no resume followed",
                last.as_deref().unwrap_or("(none)")
            ));
        l.defer(key, f);
    }
}

impl Rule for PendingCall {
    fn name(&self) -> &'static str {
        "pending"
    }

    fn on_leg_end(&mut self, l: &mut Ledger, e: &LegEnded) {
        if e.clean && !e.cut && !e.signalled && !e.blind && e.status == Some(200) {
            defer_pending(l, e.now, e.key);
        }
    }
}
