//! The control API's connection slots, and which connection gives its slot up when they run out.
//!
//! The API serves at most `cap` connections at once. A connection is *waiting* while it has no
//! complete request: from its accept, or from the end of its last answer, until a request's
//! head and body are both in. It is *busy* while a handler runs. When every slot is taken and a
//! new connection arrives, the connection that has been waiting the longest is evicted (closed)
//! to make room, so hundreds of slowloris, endless-header or half-open connections cannot make
//! a well-behaved request wait: it needs a slot for the time of one request, and a waiting
//! connection always gives one up. Only while every slot is busy does a new connection wait, for
//! a handler to finish (handlers are short; a request's body is bounded by the read timeout
//! before its handler starts).
//!
//! Invariants:
//! - At most `cap` connections hold a slot; an evicted connection's slot is free at once (its
//!   task is told through its token and ends at its next poll).
//! - A busy connection is never evicted: a handler that changes proxies runs to its end
//!   ([`Slot::busy`] refuses to start one on a connection evicted first).
//! - Among waiting connections the one waiting since the earliest instant goes first; ties go
//!   to the one accepted first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The slot table of one API server.
#[derive(Debug)]
pub struct Slots {
    cap: usize,
    table: Mutex<Table>,
    /// Woken when a slot is given back or a connection starts waiting (and may be evicted).
    changed: Notify,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    conns: HashMap<u64, Entry>,
}

#[derive(Debug)]
struct Entry {
    /// `Some(since)` while the connection has no complete request; `None` while busy.
    waiting_since: Option<Instant>,
    evict: CancellationToken,
}

/// One connection's slot; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    id: u64,
    evict: CancellationToken,
}

/// What [`Slots::acquire`] did to find room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// A slot was free.
    Free,
    /// Every slot was taken: the connection waiting the longest was evicted.
    Evicted,
}

impl Slots {
    /// A table of `cap` slots (at least 1).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Slots {
            cap: cap.max(1),
            table: Mutex::new(Table::default()),
            changed: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connections holding a slot now.
    pub fn held(&self) -> usize {
        self.lock().conns.len()
    }

    /// A slot for a new connection (waiting from now): a free one, else the one of the
    /// connection waiting the longest, which is evicted. Waits only while every slot is busy.
    /// Only one task may call this at a time (the accept loop).
    pub async fn acquire(self: &Arc<Self>) -> (Slot, Acquired) {
        loop {
            if let Some(got) = self.try_acquire() {
                return got;
            }
            // `notify_one` keeps a permit when nobody waits, so a change between the check
            // above and this await is not missed.
            self.changed.notified().await;
        }
    }

    /// [`Slots::acquire`] without waiting: `None` while every slot is busy.
    pub fn try_acquire(self: &Arc<Self>) -> Option<(Slot, Acquired)> {
        let mut t = self.lock();
        let mut how = Acquired::Free;
        if t.conns.len() >= self.cap {
            let (_, victim) = t
                .conns
                .iter()
                .filter_map(|(id, e)| e.waiting_since.map(|s| (s, *id)))
                .min()?;
            if let Some(e) = t.conns.remove(&victim) {
                e.evict.cancel();
            }
            how = Acquired::Evicted;
        }
        let id = t.next;
        t.next += 1;
        let evict = CancellationToken::new();
        t.conns.insert(
            id,
            Entry {
                waiting_since: Some(Instant::now()),
                evict: evict.clone(),
            },
        );
        Some((
            Slot {
                slots: Arc::clone(self),
                id,
                evict,
            },
            how,
        ))
    }
}

impl Slot {
    /// A complete request is in: from now on the connection is not evicted. False if it was
    /// evicted already (then nothing may be done for it).
    pub fn busy(&self) -> bool {
        let mut t = self.slots.lock();
        match t.conns.get_mut(&self.id) {
            Some(e) => {
                e.waiting_since = None;
                true
            }
            None => false,
        }
    }

    /// The answer is out: the connection waits for its next request, from now.
    pub fn waiting(&self) {
        let mut t = self.slots.lock();
        if let Some(e) = t.conns.get_mut(&self.id) {
            e.waiting_since = Some(Instant::now());
        }
        drop(t);
        self.slots.changed.notify_one();
    }

    /// Cancelled when this connection is evicted.
    pub fn evicted(&self) -> &CancellationToken {
        &self.evict
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().conns.remove(&self.id);
        self.slots.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_full_table_evicts_the_connection_waiting_longest() {
        let slots = Slots::new(3);
        let (a, _) = slots.try_acquire().expect("free");
        tokio::time::advance(Duration::from_millis(10)).await;
        let (b, _) = slots.try_acquire().expect("free");
        tokio::time::advance(Duration::from_millis(10)).await;
        let (c, how) = slots.try_acquire().expect("free");
        assert_eq!(how, Acquired::Free);
        // `a` answers a request: it now waits since later than `b`.
        assert!(a.busy());
        tokio::time::advance(Duration::from_millis(10)).await;
        a.waiting();
        let (d, how) = slots.try_acquire().expect("room by eviction");
        assert_eq!(how, Acquired::Evicted);
        assert!(b.evicted().is_cancelled(), "b waited the longest");
        assert!(!a.evicted().is_cancelled() && !c.evicted().is_cancelled());
        assert!(!b.busy(), "an evicted connection may not start a handler");
        assert_eq!(slots.held(), 3);
        drop((a, b, c, d));
        assert_eq!(slots.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn busy_connections_are_never_evicted_and_a_new_one_waits_for_them() {
        let slots = Slots::new(2);
        let (a, _) = slots.try_acquire().expect("free");
        let (b, _) = slots.try_acquire().expect("free");
        assert!(a.busy() && b.busy());
        assert!(
            slots.try_acquire().is_none(),
            "every slot busy: nothing to evict"
        );
        let waiter = tokio::spawn({
            let slots = Arc::clone(&slots);
            async move { slots.acquire().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "waits while every slot is busy");
        b.waiting();
        let (_c, how) = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("acquired once a connection waits")
            .expect("task");
        assert_eq!(how, Acquired::Evicted);
        assert!(b.evicted().is_cancelled() && !a.evicted().is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_slot_is_free_again() {
        let slots = Slots::new(1);
        let (a, _) = slots.try_acquire().expect("free");
        assert!(a.busy());
        assert!(slots.try_acquire().is_none());
        drop(a);
        let (_b, how) = slots.try_acquire().expect("free again");
        assert_eq!(how, Acquired::Free);
    }
}
