//! `blob`'s hold: the result event is delivered up to the middle of its last data line, then
//! the stream pauses, then the rest follows. Optionally the pause waits at a server-wide gate
//! until N streams are paused at once.
//!
//! Why it exists: a memory bench of a proxy (`bench/sse_memory.sh`) must hold every stream
//! open and mid-event at the same moment, whatever the event size, so that its figure measures
//! event size and not how many calls happened to overlap.
//!
//! Invariants:
//! - A hold never changes an event's bytes: delivery splits them at one offset
//!   ([`Hold::split`], inside the last data line's value), hands the part before it to the
//!   response body, pauses, then hands the rest. Every delivery of the event pauses (a resume
//!   leg's too).
//! - A paused stream counts at the gate only once the body has taken every frame before the
//!   pause (the HTTP server has the bytes to write).
//! - With a gate of N, the gate opens when N streams of this server are paused at it at once
//!   (logged at info level: `gate opened`); then each of them waits `wait` more. The next
//!   arrivals wait for N new ones. A delivery that ends while waiting (client gone, session or
//!   server ended) leaves the count, so a count never includes a stream that is gone.
//! - Without a gate (N = 0), the pause is `wait` alone.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

/// Where and how long one event pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// Bytes of the encoded event sent after the pause (counted from its end).
    pub tail: usize,
    /// How long the pause lasts (after the gate opened, with a gate).
    pub wait: Duration,
    /// Streams that must be paused at once before `wait` starts (0: no gate).
    pub gate: usize,
}

impl Hold {
    /// The offset in an encoded event of `len` bytes where the pause falls.
    pub fn split(&self, len: usize) -> usize {
        len.saturating_sub(self.tail)
    }

    /// Pauses: waits at `gate` for this hold's count, then `wait`.
    pub async fn pause(&self, gate: &Gate) {
        gate.pass(self.gate).await;
        tokio::time::sleep(self.wait).await;
    }
}

#[derive(Debug, Default)]
struct Round {
    /// Openings so far.
    round: u64,
    /// Streams paused in the current round.
    waiting: usize,
}

/// The server-wide gate paused streams wait at (see the module doc).
#[derive(Debug)]
pub struct Gate {
    state: Mutex<Round>,
    opened: watch::Sender<u64>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            state: Mutex::default(),
            opened: watch::Sender::new(0),
        }
    }
}

/// Leaves the round on drop unless the gate opened for it.
struct Waiting<'a> {
    gate: &'a Gate,
    round: u64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut s = self.gate.state();
        if s.round == self.round {
            s.waiting = s.waiting.saturating_sub(1);
        }
    }
}

impl Gate {
    fn state(&self) -> MutexGuard<'_, Round> {
        // Every mutation is a single counter update: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Streams paused at the gate now, waiting for it to open.
    pub fn waiting(&self) -> usize {
        self.state().waiting
    }

    /// Returns once `n` streams (this one included) are paused here at once; at once for 0.
    pub async fn pass(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut opened = self.opened.subscribe();
        let round = {
            let mut s = self.state();
            s.waiting += 1;
            if s.waiting >= n {
                s.waiting = 0;
                s.round += 1;
                let round = s.round;
                drop(s);
                self.opened.send_replace(round);
                tracing::info!(
                    streams = n,
                    round,
                    "gate opened: {n} streams paused mid-event at once"
                );
                return;
            }
            s.round
        };
        let _waiting = Waiting { gate: self, round };
        // The sender lives as long as the gate: `wait_for` only returns once the round moved.
        let _ = opened.wait_for(|r| *r > round).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_gate_of_three_opens_when_the_third_stream_arrives_and_not_before() {
        let gate = Arc::new(Gate::default());
        let (a, b) = (
            tokio::spawn({
                let g = gate.clone();
                async move { g.pass(3).await }
            }),
            tokio::spawn({
                let g = gate.clone();
                async move { g.pass(3).await }
            }),
        );
        for _ in 0..100 {
            if gate.waiting() == 2 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(gate.waiting(), 2);
        assert!(!a.is_finished() && !b.is_finished());
        tokio::time::timeout(Duration::from_secs(5), gate.pass(3))
            .await
            .expect("the third arrival opens the gate");
        tokio::time::timeout(Duration::from_secs(5), async {
            a.await.unwrap();
            b.await.unwrap();
        })
        .await
        .expect("the waiting two pass once it opens");
        assert_eq!(gate.waiting(), 0, "the next round starts empty");
    }

    #[tokio::test]
    async fn a_stream_that_leaves_while_waiting_is_not_counted() {
        let gate = Gate::default();
        let left = tokio::time::timeout(Duration::from_millis(20), gate.pass(2)).await;
        assert!(
            left.is_err(),
            "one stream alone does not open a gate of two"
        );
        assert_eq!(gate.waiting(), 0);
        let alone = tokio::time::timeout(Duration::from_millis(20), gate.pass(2)).await;
        assert!(
            alone.is_err(),
            "the one that left does not count for the next"
        );
    }

    #[test]
    fn the_split_leaves_the_tail_after_the_pause() {
        let h = Hold {
            tail: 10,
            wait: Duration::ZERO,
            gate: 0,
        };
        assert_eq!(h.split(100), 90);
        assert_eq!(h.split(4), 0);
    }
}
