//! The relay's write batch: the frames a writer has due at one wake-up, written with one
//! vectored write and one flush instead of one `write` + `flush` per frame.
//!
//! Why: many small streams (HEADERS, DATA, END_STREAM of each, plus credits) made the writer
//! issue one `sendto` per frame — three per request — and the relay served 5–6× fewer requests
//! per second than the byte pumps (bench/RESULTS.md, 5 Dec). Gathering what is already queued
//! costs no latency: the batch is written as soon as the queue has nothing more due now.
//!
//! Invariants: the bytes go out in queue order, whole (partial vectored writes resume where they
//! stopped); no frame is copied (the batch holds the queue's `Bytes`); what the relay counts as
//! delivered — stats, queue room, the observer's release offsets — is applied only after the
//! batch is written and flushed, in queue order, so a cut never releases bytes still in a buffer.

use std::collections::VecDeque;
use std::io::{self, IoSlice};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::vocab::Direction;

/// Frames gathered past this many bytes are written before more are taken.
pub(crate) const BATCH_BYTES: usize = 256 * 1024;
/// At most this many slices go into one vectored write (below every platform's `IOV_MAX`).
const MAX_SLICES: usize = 64;

/// What a written batch settles, in queue order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Bytes written (frames and credits).
    pub(crate) bytes: usize,
    /// Of them, bytes that took room in the queue.
    pub(crate) counted: usize,
    /// The observer's release offsets, in the order they were queued.
    pub(crate) releases: Vec<(Direction, u64)>,
}

/// Frames due, not yet written.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    frames: VecDeque<Bytes>,
    len: usize,
    settled: Settled,
}

impl Batch {
    /// Adds `bytes` (taking queue room if `counted`), with the release to apply once written.
    pub(crate) fn push(&mut self, bytes: Bytes, counted: bool, release: Option<(Direction, u64)>) {
        let n = bytes.len();
        self.len += n;
        self.settled.bytes += n;
        if counted {
            self.settled.counted += n;
        }
        if let Some(r) = release {
            self.settled.releases.push(r);
        }
        if n > 0 {
            self.frames.push_back(bytes);
        }
    }

    /// True when the batch should be written before more is taken.
    pub(crate) fn full(&self) -> bool {
        self.len >= BATCH_BYTES || self.frames.len() >= MAX_SLICES
    }

    /// Writes every frame, flushes `dst`, and hands back what that settled (then empty again).
    /// On an error the batch's frames are dropped: the connection is over.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin>(
        &mut self,
        dst: &mut W,
    ) -> io::Result<Settled> {
        let result = self.write_all(dst).await;
        self.frames.clear();
        self.len = 0;
        result?;
        dst.flush().await?;
        let releases = std::mem::take(&mut self.settled.releases);
        let settled = Settled {
            bytes: std::mem::take(&mut self.settled.bytes),
            counted: std::mem::take(&mut self.settled.counted),
            releases,
        };
        Ok(settled)
    }

    /// Whether there is anything to settle (bytes, or a release of nothing new).
    pub(crate) fn is_empty(&self) -> bool {
        self.settled.bytes == 0 && self.settled.releases.is_empty()
    }

    async fn write_all<W: AsyncWrite + Unpin>(&mut self, dst: &mut W) -> io::Result<()> {
        while !self.frames.is_empty() {
            let n = {
                let mut slices = [IoSlice::new(&[]); MAX_SLICES];
                let mut k = 0;
                for (slot, frame) in slices.iter_mut().zip(&self.frames) {
                    *slot = IoSlice::new(frame);
                    k += 1;
                }
                dst.write_vectored(&slices[..k]).await?
            };
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.advance(n);
        }
        Ok(())
    }

    /// Drops the first `n` written bytes.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.frames.front_mut() else {
                return;
            };
            if front.len() <= n {
                n -= front.len();
                self.frames.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::*;

    /// A destination that takes at most `step` bytes per write and counts its calls.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
        writes: usize,
        flushes: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            self.writes += 1;
            Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut left = self.step;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(left);
                self.got.extend_from_slice(&b[..take]);
                left -= take;
                n += take;
                if left == 0 {
                    break;
                }
            }
            self.writes += 1;
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.flushes += 1;
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn trickle(step: usize) -> Trickle {
        Trickle {
            got: Vec::new(),
            step,
            writes: 0,
            flushes: 0,
        }
    }

    #[tokio::test]
    async fn a_batch_of_frames_goes_out_in_one_write_and_one_flush() {
        let mut b = Batch::default();
        for i in 0..10u8 {
            b.push(Bytes::from(vec![i; 9]), true, None);
        }
        let mut dst = trickle(usize::MAX);
        let s = b.write_to(&mut dst).await.unwrap();
        assert_eq!((dst.writes, dst.flushes), (1, 1));
        assert_eq!(s.bytes, 90);
        assert_eq!(dst.got.len(), 90);
    }

    #[tokio::test]
    async fn partial_vectored_writes_resume_mid_frame_and_keep_queue_order() {
        let mut b = Batch::default();
        let mut want = Vec::new();
        for i in 0..7u8 {
            let f = vec![i; 5 + usize::from(i)];
            want.extend_from_slice(&f);
            b.push(
                Bytes::from(f),
                i % 2 == 0,
                Some((Direction::Downstream, u64::from(i))),
            );
        }
        let mut dst = trickle(3);
        let s = b.write_to(&mut dst).await.unwrap();
        assert_eq!(dst.got, want);
        assert_eq!(s.bytes, want.len());
        assert_eq!(s.counted, 5 + 7 + 9 + 11);
        let offsets: Vec<u64> = s.releases.iter().map(|r| r.1).collect();
        assert_eq!(offsets, vec![0, 1, 2, 3, 4, 5, 6]);
        assert!(b.is_empty());
    }

    #[tokio::test]
    async fn nothing_is_settled_before_the_batch_is_written() {
        let mut b = Batch::default();
        b.push(
            Bytes::from_static(b"abc"),
            true,
            Some((Direction::Upstream, 3)),
        );
        assert!(!b.is_empty());
        let mut dst = trickle(usize::MAX);
        let s = b.write_to(&mut dst).await.unwrap();
        assert_eq!(s.releases, vec![(Direction::Upstream, 3)]);
        let again = b.write_to(&mut dst).await.unwrap();
        assert_eq!(again, Settled::default());
    }

    #[test]
    fn a_batch_is_full_at_its_byte_or_slice_bound() {
        let mut b = Batch::default();
        for _ in 0..MAX_SLICES - 1 {
            b.push(Bytes::from_static(b"x"), false, None);
        }
        assert!(!b.full());
        b.push(Bytes::from_static(b"x"), false, None);
        assert!(b.full());
        let mut big = Batch::default();
        big.push(Bytes::from(vec![0; BATCH_BYTES]), true, None);
        assert!(big.full());
    }
}
