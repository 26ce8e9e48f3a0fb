//! Ended streams in their grace: kept compact, capped, evictions counted.
//!
//! Why: a stream is remembered `grace` after its last leg ended, so a late resume can still be
//! mapped and judged; under churn (thousands of connections a second) that is hundreds of
//! thousands of streams, and each must not cost what a live one does.
//!
//! Rules (precise):
//! - When a stream's last leg ends, it is forgotten at once if no later judgement can use it:
//!   it remembers no event id and no torn id (nothing to resume from) and carried no call
//!   (nothing to answer, re-send or lose). A standalone GET that got no event stream is such a
//!   stream.
//! - Otherwise it is compacted: only its last `ended_events` delivered events are kept (ids
//!   and hashes, as before), and, after a cut, every event from the oldest cursor its client
//!   may still resume from (`Stream::hold_from`: the cut leg's own cursor — a client whose
//!   resume broke may resume with it again — or the stream's start for a first leg), up to
//!   `ids_per_stream`; a cursor older than what is kept is judged `unknown`, never guessed.
//!   Its tables give back their spare capacity. Counters, torn event, calls and cursor state
//!   stay whole.
//! - At most `max_ended_streams` ended streams are kept: beyond, the oldest ended one is
//!   forgotten early (what it deferred is reported then, as at the end of its grace) and
//!   counted in [`Ended::evicted`] (`tearline_audit_evicted_total`, and a summary line).
//!
//! The judgement part (forget, compact, evict) is `Engine::stream_ended` (the engine: forgetting
//! a stream first lets every rule settle what waits on it); this file holds the queue.
//!
//! Invariant: the queue holds each ended stream once per end; an entry whose stream reopened,
//! ended again or was forgotten is stale and skipped (stale entries are pruned so the queue
//! stays within twice the live count).

use std::collections::VecDeque;

use tokio::time::Instant;

use super::stream::StreamKey;

/// Ended streams, oldest first.
#[derive(Debug, Default)]
pub struct Ended {
    pub queue: VecDeque<(Instant, StreamKey)>,
    pub live: usize,
    /// Ended streams forgotten before their grace because of the cap.
    pub evicted: u64,
}

impl Ended {
    /// Ended streams currently remembered.
    pub fn live(&self) -> usize {
        self.live
    }

    /// A stream that was ended reopened or was forgotten.
    pub fn left(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    /// Gives back capacity once most entries are gone.
    pub fn shrink(&mut self) {
        self.queue
            .shrink_to(super::gauges::room_for(self.queue.len()));
    }
}
