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
//!   and hashes, as before; a cursor older than that is then judged `unknown`, never guessed),
//!   and its tables give back their spare capacity. Counters, torn event, calls and cursor
//!   state stay whole.
//! - At most `max_ended_streams` ended streams are kept: beyond, the oldest ended one is
//!   forgotten early (what it deferred is reported then, as at the end of its grace) and
//!   counted in [`Ended::evicted`] (`tearline_audit_evicted_total`, and a summary line).
//!
//! Invariant: the queue holds each ended stream once per end; an entry whose stream reopened,
//! ended again or was forgotten is stale and skipped (stale entries are pruned so the queue
//! stays within twice the live count).

use std::collections::VecDeque;

use tokio::time::Instant;

use super::ledger::Ledger;
use super::stream::StreamKey;

/// Ended streams, oldest first.
#[derive(Debug, Default)]
pub struct Ended {
    queue: VecDeque<(Instant, StreamKey)>,
    live: usize,
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

impl Ledger {
    /// The last leg of stream `key` ended at `now`: forget it, or compact it and enforce the cap
    /// (rules in the module doc).
    pub fn stream_ended(&mut self, now: Instant, key: StreamKey) {
        let Some(stream) = self.streams.get(&key) else {
            return;
        };
        if stream.open_legs > 0 {
            return;
        }
        let useless = stream.calls.is_empty()
            && stream.entries().all(|e| e.id.is_none())
            && stream.torn.as_ref().is_none_or(|t| t.id.is_none());
        if useless {
            self.forget_stream(key);
            return;
        }
        let keep = self.cfg.ended_events.max(1);
        while self
            .streams
            .get(&key)
            .is_some_and(|s| s.remembered() > keep)
        {
            self.evict_oldest_event(key);
        }
        if let Some(s) = self.streams.get_mut(&key) {
            s.compact();
        }
        self.ended.queue.push_back((now, key));
        self.ended.live += 1;
        while self.ended.live > self.cfg.max_ended_streams {
            let Some((at, old)) = self.ended.queue.pop_front() else {
                break;
            };
            let still = self
                .streams
                .get(&old)
                .is_some_and(|s| s.open_legs == 0 && s.ended_at == Some(at));
            if still {
                self.ended.evicted += 1;
                self.forget_stream(old);
            }
        }
        if self.ended.queue.len() > 2 * self.ended.live + 1024 {
            let streams = &self.streams;
            self.ended.queue.retain(|(at, k)| {
                streams
                    .get(k)
                    .is_some_and(|s| s.open_legs == 0 && s.ended_at == Some(*at))
            });
        }
    }

    /// Forgets the oldest remembered event of stream `key`, keeping the indexes in step.
    fn evict_oldest_event(&mut self, key: StreamKey) {
        let Some(stream) = self.streams.get_mut(&key) else {
            return;
        };
        let session = stream.session.clone();
        let Some(old) = stream.pop_oldest() else {
            return;
        };
        let Some(id) = old.id else {
            return;
        };
        self.shared_ids.remove(&id, old.hash, key);
        let gone = self
            .streams
            .get(&key)
            .is_some_and(|s| s.entry_of(&id).is_none());
        if gone {
            self.unindex_id(key, &session, &id);
        }
    }
}
