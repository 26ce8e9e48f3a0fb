//! What the two directions of one h2 connection share: the request facts of every live stream
//! (the downstream half pairs a response with them), the streams that were reset (both halves
//! forget them), and each direction's allowed HPACK table size (announced by the *other*
//! direction's `SETTINGS`).
//!
//! Invariants: the lock is held only to insert, look up or remove (never across parsing). At
//! most [`MAX_STREAMS`] streams are tracked at once: a stream opened past that is relayed and
//! its header blocks decoded (HPACK must stay in step) but it yields no observations, and the
//! first such stream is logged. A stream's entry lives from its request head to the end of its
//! response (or a reset), so a long connection's table holds only its concurrent streams.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::vocab::Direction;
use crate::wire::http1::ReqInfo;

/// Streams followed at once per connection (a browser or an MCP client rarely has more than
/// 100 in flight; servers commonly allow 100 to 250).
pub const MAX_STREAMS: usize = 256;

/// Resets remembered for the other half to catch up with.
const RESET_LOG: usize = 256;

#[derive(Default)]
struct Table {
    live: FxHashMap<u32, Arc<ReqInfo>>,
    /// The latest reset stream ids (newest last); `resets` counts all of them.
    reset_log: VecDeque<u32>,
    over_cap_logged: bool,
    /// Largest `SETTINGS_HEADER_TABLE_SIZE` announced by the receiver of [upstream, downstream]
    /// bytes (the server, the client).
    allow: [u32; 2],
}

/// The shared state of one connection's two halves.
#[derive(Default)]
pub(super) struct Shared {
    table: Mutex<Table>,
    /// Resets so far (read without the lock on every frame).
    resets: AtomicU64,
    /// The connection went opaque (an error in either direction).
    opaque: AtomicBool,
}

fn slot(dir: Direction) -> usize {
    match dir {
        Direction::Upstream => 0,
        Direction::Downstream => 1,
    }
}

impl Shared {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tracks stream `id` with its request facts; false (and logged once) past the cap.
    pub(super) fn open(&self, conn: u64, id: u32, info: Arc<ReqInfo>) -> bool {
        let mut t = self.table();
        if t.live.len() >= MAX_STREAMS && !t.live.contains_key(&id) {
            if !std::mem::replace(&mut t.over_cap_logged, true) {
                tracing::warn!(
                    conn,
                    stream = id,
                    "more than {MAX_STREAMS} concurrent h2 streams: the observer follows no new \
                     stream until some end (bytes are still relayed)"
                );
            }
            return false;
        }
        t.live.insert(id, info);
        true
    }

    /// The request facts of live stream `id`.
    pub(super) fn get(&self, id: u32) -> Option<Arc<ReqInfo>> {
        self.table().live.get(&id).cloned()
    }

    /// Stream `id`'s response ended: it is no longer tracked.
    pub(super) fn close(&self, id: u32) {
        self.table().live.remove(&id);
    }

    /// Stream `id` was reset (by an endpoint or the proxy): both halves forget it.
    pub(super) fn reset(&self, id: u32) {
        let mut t = self.table();
        t.live.remove(&id);
        if t.reset_log.len() == RESET_LOG {
            t.reset_log.pop_front();
        }
        t.reset_log.push_back(id);
        self.resets.fetch_add(1, Ordering::Release);
    }

    /// The resets since `seen` (updated): their ids, or `None` when more happened than are
    /// remembered (the caller then keeps only streams still live or its own).
    pub(super) fn resets_since(&self, seen: &mut u64) -> Option<Vec<u32>> {
        let now = self.resets.load(Ordering::Acquire);
        if now == *seen {
            return Some(Vec::new());
        }
        let t = self.table();
        let now = self.resets.load(Ordering::Acquire);
        let new = (now - *seen) as usize;
        *seen = now;
        (new <= t.reset_log.len()).then(|| t.reset_log.iter().rev().take(new).copied().collect())
    }

    /// True if stream `id` is tracked.
    pub(super) fn is_live(&self, id: u32) -> bool {
        self.table().live.contains_key(&id)
    }

    /// The receiver of `dir` bytes announced `SETTINGS_HEADER_TABLE_SIZE = size`.
    pub(super) fn allow_table(&self, dir: Direction, size: u32) {
        let mut t = self.table();
        let s = &mut t.allow[slot(dir)];
        *s = (*s).max(size);
    }

    /// The largest table size the receiver of `dir` bytes announced (0: none yet).
    pub(super) fn allowed_table(&self, dir: Direction) -> u32 {
        self.table().allow[slot(dir)]
    }

    /// True once either half failed: nothing more is observed on the connection.
    pub(super) fn is_opaque(&self) -> bool {
        self.opaque.load(Ordering::Relaxed)
    }

    /// Makes the connection opaque; true if this call did (the caller logs why).
    pub(super) fn make_opaque(&self) -> bool {
        !self.opaque.swap(true, Ordering::Relaxed)
    }

    /// Live streams.
    #[cfg(test)]
    pub(super) fn live(&self) -> usize {
        self.table().live.len()
    }
}
