//! Reads one direction of an h2 connection as whole frames.
//!
//! Why not the pump's read buffer: a frame is the unit the relay decides on, so a frame must
//! be whole before it leaves. The buffer holds at most one frame (plus what one read brought
//! beyond it); a frame longer than the cap (1 MiB by default, far above the 16 KiB every peer
//! uses unless its SETTINGS raise `MAX_FRAME_SIZE`) switches the direction to a byte relay for
//! the rest of the connection, said once in the log, so memory never follows a peer's choice.
//!
//! Invariants: pieces come out in arrival order and together hold every byte read, exactly
//! once; raw offsets count bytes read from the source. No copy: a piece is split off the
//! buffer (`BytesMut::split_to`), not copied.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::wire::h2::FrameHeader;
use crate::wire::h2::frame::{HEADER_LEN, PREFACE};

/// Default cap on a frame's payload the relay buffers whole.
pub(crate) const MAX_FRAME: usize = 1 << 20;

/// What one read step yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// One whole frame (header and payload) starting at raw offset `raw`.
    Frame { frame: Bytes, raw: u64 },
    /// Bytes relayed as they are (the client preface, a direction past the frame cap, or a
    /// truncated frame at EOF).
    Raw { bytes: Bytes, raw: u64 },
}

impl Piece {
    /// Its bytes.
    pub(crate) fn len(&self) -> usize {
        match self {
            Piece::Frame { frame: b, .. } | Piece::Raw { bytes: b, .. } => b.len(),
        }
    }
}

/// One direction's frame reader.
#[derive(Debug)]
pub(crate) struct FrameReader {
    buf: BytesMut,
    /// Raw offset of `buf[0]`.
    raw: u64,
    /// Preface bytes still to pass raw (24 on the client's direction, then 0).
    preface_left: usize,
    /// Past the frame cap: everything passes raw.
    raw_mode: bool,
    cap: usize,
}

impl FrameReader {
    /// A reader of the client's direction (`client`: it starts with the preface) or the
    /// server's, buffering frames of at most `cap` payload bytes.
    pub(crate) fn new(client: bool, cap: usize) -> Self {
        FrameReader {
            buf: BytesMut::new(),
            raw: 0,
            preface_left: if client { PREFACE.len() } else { 0 },
            raw_mode: false,
            cap,
        }
    }

    /// True once the direction is relayed as bytes.
    pub(crate) fn is_raw(&self) -> bool {
        self.raw_mode
    }

    /// Bytes held.
    pub(crate) fn held(&self) -> usize {
        self.buf.len()
    }

    /// Appends bytes read (the pure half of [`FrameReader::next`]).
    #[cfg(test)]
    pub(crate) fn push(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    fn split(&mut self, n: usize, frame: bool) -> Piece {
        let raw = self.raw;
        self.raw += n as u64;
        let bytes = self.buf.split_to(n).freeze();
        if frame {
            Piece::Frame { frame: bytes, raw }
        } else {
            Piece::Raw { bytes, raw }
        }
    }

    /// The next whole piece in the buffer, if any.
    pub(crate) fn take(&mut self) -> Option<Piece> {
        if self.buf.is_empty() {
            return None;
        }
        if self.preface_left > 0 {
            let n = self.preface_left.min(self.buf.len());
            self.preface_left -= n;
            return Some(self.split(n, false));
        }
        if self.raw_mode {
            return Some(self.split(self.buf.len(), false));
        }
        let h = FrameHeader::parse(&self.buf)?;
        if h.len as usize > self.cap {
            self.raw_mode = true;
            tracing::info!(
                len = h.len,
                cap = self.cap,
                "h2 frame longer than the relay's cap: the rest of this direction is relayed as bytes, unobserved and without stream faults"
            );
            return Some(self.split(self.buf.len(), false));
        }
        let n = h.frame_len();
        if self.buf.len() >= n {
            return Some(self.split(n, true));
        }
        self.buf.reserve(n - self.buf.len());
        None
    }

    /// Reads until a piece is whole; `None` at EOF with nothing left (a frame cut short by EOF
    /// comes out raw first).
    pub(crate) async fn next<R: AsyncRead + Unpin>(
        &mut self,
        src: &mut R,
    ) -> std::io::Result<Option<Piece>> {
        loop {
            if let Some(p) = self.take() {
                return Ok(Some(p));
            }
            if self.buf.capacity() - self.buf.len() < HEADER_LEN {
                self.buf.reserve(16 * 1024);
            }
            if src.read_buf(&mut self.buf).await? == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(self.split(self.buf.len(), false)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::h2::frame::{data_header, rst_stream};
    use crate::wire::h2::{ErrorCode, FrameType};

    fn conversation() -> Vec<u8> {
        let mut b = PREFACE.to_vec();
        b.extend_from_slice(&data_header(1, 5, false));
        b.extend_from_slice(b"hello");
        b.extend_from_slice(&rst_stream(1, ErrorCode::CANCEL));
        b.extend_from_slice(&data_header(3, 0, true));
        b
    }

    fn pieces(input: &[u8], step: usize, cap: usize) -> Vec<Piece> {
        let mut r = FrameReader::new(true, cap);
        let mut out = Vec::new();
        for c in input.chunks(step) {
            r.push(c);
            while let Some(p) = r.take() {
                out.push(p);
            }
        }
        out
    }

    fn kinds(p: &[Piece]) -> Vec<Option<FrameType>> {
        p.iter()
            .map(|p| match p {
                Piece::Frame { frame, .. } => FrameHeader::parse(frame).map(|h| h.kind),
                Piece::Raw { .. } => None,
            })
            .collect()
    }

    #[test]
    fn every_chunking_yields_the_same_whole_frames_after_the_preface() {
        let input = conversation();
        for step in 1..=input.len() {
            let p = pieces(&input, step, MAX_FRAME);
            let frames: Vec<_> = p
                .iter()
                .filter(|p| matches!(p, Piece::Frame { .. }))
                .cloned()
                .collect();
            assert_eq!(
                kinds(&frames),
                vec![
                    Some(FrameType::Data),
                    Some(FrameType::RstStream),
                    Some(FrameType::Data)
                ],
                "step {step}"
            );
            let joined: Vec<u8> = p
                .iter()
                .flat_map(|p| match p {
                    Piece::Frame { frame, .. } => frame.to_vec(),
                    Piece::Raw { bytes, .. } => bytes.to_vec(),
                })
                .collect();
            assert_eq!(joined, input, "step {step}: every byte once, in order");
            let Piece::Frame { raw, .. } = &frames[1] else {
                unreachable!()
            };
            assert_eq!(
                *raw,
                24 + 9 + 5,
                "step {step}: raw offset of the RST_STREAM"
            );
        }
    }

    #[test]
    fn a_frame_over_the_cap_turns_the_direction_into_a_byte_relay() {
        let input = conversation();
        let p = pieces(&input, 7, 4);
        assert!(p.iter().all(|p| matches!(p, Piece::Raw { .. })));
        let total: usize = p
            .iter()
            .map(|p| match p {
                Piece::Raw { bytes, .. } => bytes.len(),
                Piece::Frame { .. } => 0,
            })
            .sum();
        assert_eq!(total, input.len());
    }

    #[tokio::test]
    async fn a_frame_cut_short_by_eof_comes_out_raw_then_none() {
        let mut input: &[u8] = &data_header(1, 5, false)[..];
        let mut r = FrameReader::new(false, MAX_FRAME);
        let p = r.next(&mut input).await.unwrap();
        assert!(matches!(p, Some(Piece::Raw { ref bytes, raw: 0 }) if bytes.len() == 9));
        assert_eq!(r.next(&mut input).await.unwrap(), None);
    }
}
