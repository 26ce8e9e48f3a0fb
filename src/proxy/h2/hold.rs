//! Frames an h2 fault holds back in one direction, and the frames that must wait behind them.
//!
//! Invariants: a frame waits behind an earlier held one of the same stream (stream order) and,
//! if it is a header block (`HEADERS`, `PUSH_PROMISE`, `CONTINUATION`), behind every earlier
//! held header block (HPACK order); frames leave in arrival order among those that wait for
//! each other; the bytes held are bounded by [`HOLD_CAP`]: past it everything held is
//! released at once (said in the log), so a hold never makes memory follow the traffic.

use std::collections::VecDeque;

use bytes::Bytes;
use tokio::time::Instant;

use crate::fault::h2::Hold;
use crate::wire::h2::FrameType;

/// Bytes one direction may hold.
pub(crate) const HOLD_CAP: usize = 1 << 20;

/// True for the frames that carry header block fragments.
pub(crate) fn is_header_block(kind: FrameType) -> bool {
    matches!(
        kind,
        FrameType::Headers | FrameType::PushPromise | FrameType::Continuation
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// May leave once nothing earlier blocks it.
    Ready,
    /// Held by a fault.
    Held(Hold),
}

/// One frame held or waiting.
#[derive(Debug)]
pub(crate) struct HeldFrame {
    pub(crate) frame: Bytes,
    pub(crate) stream: u32,
    pub(crate) block: bool,
    pub(crate) raw_end: Option<u64>,
    release: Release,
}

impl HeldFrame {
    fn blocks(&self, stream: u32, block: bool) -> bool {
        (self.stream != 0 && self.stream == stream) || (self.block && block)
    }
}

/// One direction's held frames.
#[derive(Debug, Default)]
pub(crate) struct Holds {
    items: VecDeque<HeldFrame>,
    bytes: usize,
}

impl Holds {
    /// True if a frame of `stream` (`block`: a header block) must wait behind a held one.
    pub(crate) fn must_wait(&self, stream: u32, block: bool) -> bool {
        self.items.iter().any(|h| h.blocks(stream, block))
    }

    /// Holds `frame` (`hold`: a fault's hold; `None`: it only waits behind others).
    pub(crate) fn push(
        &mut self,
        frame: Bytes,
        stream: u32,
        kind: FrameType,
        raw_end: Option<u64>,
        hold: Option<Hold>,
    ) {
        self.bytes += frame.len();
        self.items.push_back(HeldFrame {
            frame,
            stream,
            block: is_header_block(kind),
            raw_end,
            release: hold.map_or(Release::Ready, Release::Held),
        });
        if self.bytes > HOLD_CAP {
            tracing::info!(
                held = self.bytes,
                cap = HOLD_CAP,
                "h2 relay: held frames over the cap; released"
            );
            self.release_all();
        }
    }

    /// `DATA` of `stream` arrived: its first-DATA holds are released.
    pub(crate) fn on_data(&mut self, stream: u32) {
        for h in &mut self.items {
            if h.stream == stream && matches!(h.release, Release::Held(Hold::FirstData { .. })) {
                h.release = Release::Ready;
            }
        }
    }

    /// Releases the holds due at `now`.
    pub(crate) fn due(&mut self, now: Instant) {
        for h in &mut self.items {
            let due = match h.release {
                Release::Held(Hold::Until(t)) => t <= now,
                Release::Held(Hold::FirstData { deadline }) => deadline.is_some_and(|t| t <= now),
                Release::Ready => false,
            };
            if due {
                h.release = Release::Ready;
            }
        }
    }

    /// Releases every hold (EOF, over the cap).
    pub(crate) fn release_all(&mut self) {
        for h in &mut self.items {
            h.release = Release::Ready;
        }
    }

    /// The earliest time a hold is due.
    pub(crate) fn next_time(&self) -> Option<Instant> {
        self.items
            .iter()
            .filter_map(|h| match h.release {
                Release::Held(Hold::Until(t)) => Some(t),
                Release::Held(Hold::FirstData { deadline }) => deadline,
                Release::Ready => None,
            })
            .min()
    }

    /// The first frame that may leave now, if any.
    pub(crate) fn take_ready(&mut self) -> Option<HeldFrame> {
        let i = (0..self.items.len()).find(|&i| {
            let h = &self.items[i];
            h.release == Release::Ready
                && !self
                    .items
                    .iter()
                    .take(i)
                    .any(|e| e.blocks(h.stream, h.block))
        })?;
        let h = self.items.remove(i)?;
        self.bytes -= h.frame.len();
        Some(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take_all(h: &mut Holds) -> Vec<u32> {
        std::iter::from_fn(|| h.take_ready())
            .map(|f| f.stream)
            .collect()
    }

    #[test]
    fn held_headers_keep_later_header_blocks_behind_them_but_not_other_streams_data() {
        let mut h = Holds::default();
        let f = || Bytes::from_static(b"x");
        h.push(
            f(),
            1,
            FrameType::Headers,
            None,
            Some(Hold::FirstData { deadline: None }),
        );
        assert!(h.must_wait(3, true), "a later HEADERS waits (HPACK order)");
        assert!(!h.must_wait(3, false), "DATA of another stream passes");
        assert!(h.must_wait(1, false), "DATA of the held stream waits");
        h.push(f(), 3, FrameType::Headers, None, None);
        assert!(take_all(&mut h).is_empty());
        h.on_data(1);
        assert_eq!(take_all(&mut h), vec![1, 3]);
    }

    #[test]
    fn a_timed_hold_is_released_when_due_and_over_the_cap_everything_goes() {
        let t = Instant::now();
        let mut h = Holds::default();
        h.push(
            Bytes::from_static(b"w"),
            0,
            FrameType::WindowUpdate,
            None,
            Some(Hold::Until(t + std::time::Duration::from_millis(5))),
        );
        assert_eq!(h.next_time(), Some(t + std::time::Duration::from_millis(5)));
        h.due(t);
        assert!(h.take_ready().is_none());
        h.due(t + std::time::Duration::from_millis(5));
        assert!(h.take_ready().is_some());
        h.push(
            Bytes::from(vec![0; HOLD_CAP + 1]),
            1,
            FrameType::Headers,
            None,
            Some(Hold::FirstData { deadline: None }),
        );
        assert!(h.take_ready().is_some(), "over the cap: released");
    }
}
