//! Which `GOAWAY` a load client's h2 connection received, read from the bytes the server sent.
//!
//! Why: hyper hides a received `GOAWAY` from the streams it lets finish. When the gateway then
//! closes the connection (a graceful `GOAWAY(NO_ERROR)`, then FIN after a drain), a stream still
//! open ends with the same I/O error as after any other close; the client cannot tell a
//! graceful shutdown that cut its stream from a broken connection. A client must know, to
//! report the cut by its cause (`h2-goaway-no_error`) and, for the naive policy, to take it
//! the way clients that treat `GOAWAY(NO_ERROR)` as a normal end do.
//!
//! Invariants: the scanner follows frame boundaries (9-byte header, then the payload) over the
//! bytes in the order read, whatever their split into reads, with no copy beyond the header and
//! the first 8 payload bytes of a `GOAWAY`; the last `GOAWAY`'s error code wins. Bytes pass to
//! hyper unchanged.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::wire::h2::frame::ErrorCode;

/// No `GOAWAY` seen yet.
const NONE: u64 = u64::MAX;

/// The error code of the last `GOAWAY` a connection received (shared by its streams).
#[derive(Debug, Clone)]
pub struct GoawaySeen(Arc<AtomicU64>);

impl Default for GoawaySeen {
    fn default() -> Self {
        GoawaySeen(Arc::new(AtomicU64::new(NONE)))
    }
}

impl GoawaySeen {
    /// The code of the last `GOAWAY` received, if any.
    pub fn code(&self) -> Option<ErrorCode> {
        let v = self.0.load(Ordering::Acquire);
        u32::try_from(v).ok().map(ErrorCode)
    }

    fn set(&self, code: u32) {
        self.0.store(u64::from(code), Ordering::Release);
    }
}

/// Follows the frames of one direction and records each `GOAWAY`'s code.
#[derive(Debug, Default)]
struct Scan {
    head: [u8; 9],
    have: usize,
    /// Payload bytes of the current frame still to pass.
    left: usize,
    /// The current frame is a `GOAWAY`: its first 8 payload bytes, as read so far.
    goaway: Option<([u8; 8], usize)>,
}

const GOAWAY: u8 = 0x7;

impl Scan {
    fn feed(&mut self, mut bytes: &[u8], seen: &GoawaySeen) {
        while !bytes.is_empty() {
            if self.left == 0 {
                let n = (9 - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have < 9 {
                    return;
                }
                self.have = 0;
                let h = self.head;
                self.left = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                self.goaway = (h[3] == GOAWAY).then_some(([0; 8], 0));
                continue;
            }
            let n = self.left.min(bytes.len());
            if let Some((buf, got)) = &mut self.goaway {
                let k = (8 - *got).min(n);
                buf[*got..*got + k].copy_from_slice(&bytes[..k]);
                *got += k;
                if *got == 8 {
                    seen.set(u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]));
                    self.goaway = None;
                }
            }
            self.left -= n;
            bytes = &bytes[n..];
        }
    }
}

/// An h2 client connection's I/O, watching the server's frames for `GOAWAY`.
pub struct Watch<S> {
    inner: S,
    scan: Scan,
    seen: GoawaySeen,
}

impl<S> Watch<S> {
    /// Wraps `inner`; `seen` learns every `GOAWAY` read through it.
    pub fn new(inner: S, seen: GoawaySeen) -> Self {
        Watch {
            inner,
            scan: Scan::default(),
            seen,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watch<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = r {
            let me = &mut *self;
            me.scan.feed(&buf.filled()[before..], &me.seen);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watch<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![
            (n >> 16) as u8,
            (n >> 8) as u8,
            n as u8,
            kind,
            0,
            0,
            0,
            0,
            0,
        ];
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_goaway_split_across_reads_is_seen_with_its_code_and_data_frames_are_not() {
        let mut wire = frame(0x4, &[]);
        wire.extend(frame(0x0, &[0x7; 40])); // DATA whose bytes look like a GOAWAY type
        wire.extend(frame(GOAWAY, &[0, 0, 0, 5, 0, 0, 0, 0, b'b', b'y', b'e']));
        for split in 1..wire.len() {
            let seen = GoawaySeen::default();
            let mut scan = Scan::default();
            scan.feed(&wire[..split], &seen);
            if split < wire.len() - 3 {
                assert_eq!(seen.code(), None, "split {split}");
            }
            scan.feed(&wire[split..], &seen);
            assert_eq!(seen.code(), Some(ErrorCode::NO_ERROR), "split {split}");
        }
        let seen = GoawaySeen::default();
        Scan::default().feed(&frame(GOAWAY, &[0, 0, 0, 1, 0, 0, 0, 2]), &seen);
        assert_eq!(seen.code(), Some(ErrorCode(2)));
        let none = GoawaySeen::default();
        Scan::default().feed(&frame(0x0, &[0, 0, 0, 1, 0, 0, 0, 2]), &none);
        assert_eq!(none.code(), None);
    }
}
