//! Where the frames of one direction begin, for the pump's reads: what a client's h2 stack
//! makes of a connection cut that falls inside a frame.
//!
//! Why: an h2 endpoint acts on whole frames only. A byte relay that cuts the connection in the
//! middle of a `DATA` frame sends part of it, yet the client's h2 stack never hands a byte of
//! that frame on: as the client sees the cut, it fell before the frame (for a `DATA` frame, at
//! the start of its body, where the stream's SSE position is the one its last whole frame
//! left). Describing the cut at the byte offset instead would call events whole (or torn) that
//! the client never read.
//!
//! Invariants: marks are raw offsets in increasing order; only those of the current read and
//! the frame open when it began are kept (a cut falls in the read just observed), so memory
//! is a few entries per read, reused.

/// The frame starts of the current read, with the body start of each `DATA` frame.
#[derive(Debug, Default)]
pub(super) struct Marks {
    /// `(frame start, body start)`: body start = frame start for a frame other than `DATA`
    /// (or a `DATA` frame whose header is not complete yet).
    marks: Vec<(u64, u64)>,
}

impl Marks {
    /// A new read begins: only the frame open at its start is kept.
    pub(super) fn begin(&mut self) {
        if self.marks.len() > 1 {
            let last = self.marks[self.marks.len() - 1];
            self.marks.clear();
            self.marks.push(last);
        }
    }

    /// A frame begins at raw offset `at` (after the preface, or after the previous frame).
    pub(super) fn frame_at(&mut self, at: u64) {
        if self.marks.last().is_none_or(|m| m.0 < at) {
            self.marks.push((at, at));
        }
    }

    /// The `DATA` frame that began at `start` has its body from raw offset `body`.
    pub(super) fn body_at(&mut self, start: u64, body: u64) {
        match self.marks.last_mut() {
            Some(m) if m.0 == start => m.1 = body,
            _ => self.marks.push((start, body)),
        }
    }

    /// Where a connection cut after the bytes before raw offset `raw` leaves the client's h2
    /// stack: `raw` at a frame boundary (or outside what the marks cover), else the start of
    /// the frame it falls in — of its body, for a `DATA` frame cut in its body.
    pub(super) fn seen_at(&self, raw: u64) -> u64 {
        let Some(&(start, body)) = self.marks.iter().rev().find(|m| m.0 <= raw) else {
            return raw;
        };
        if raw == start {
            raw
        } else if body > start && raw >= body {
            body
        } else {
            start
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_inside_a_data_body_is_seen_at_that_body_start_and_a_boundary_stays() {
        let mut m = Marks::default();
        m.frame_at(0);
        m.body_at(100, 109);
        m.frame_at(100);
        m.frame_at(200);
        m.body_at(200, 210);
        assert_eq!(m.seen_at(150), 109);
        assert_eq!(m.seen_at(200), 200);
        assert_eq!(m.seen_at(205), 200, "inside a header: before the frame");
        assert_eq!(m.seen_at(260), 210);
        m.begin();
        assert_eq!(m.seen_at(260), 210, "the open frame is kept across reads");
        assert_eq!(m.seen_at(150), 150, "before the marks: as given");
    }
}
