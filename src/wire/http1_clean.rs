//! Clean ends of chunked bodies after a cut: the bytes the proxy writes so that the client sees
//! a normal end of the HTTP message (a `clean-end` cut).
//!
//! It exists because a cut can fall anywhere in the chunked framing, and only some places allow
//! an honest end. Invariants:
//! - Before a size line (at a chunk boundary, or right after the head): exactly `0\r\n\r\n`.
//! - After chunk data, before its CRLF: `\r\n0\r\n\r\n`; between its CR and LF: `\n0\r\n\r\n`.
//! - Inside chunk data: the size line already promised more bytes and cannot be taken back, so
//!   the chunk is completed with SSE-inert filler, then `\r\n` and the terminator. Inside a line
//!   the filler is spaces, never a line end: it only extends the line in progress (an
//!   unfinished value, name or comment). At the start of a line (a boundary, after a complete
//!   field line, after a CR) spaces would begin a new field line, so the filler is a comment
//!   line instead — `:`, spaces, and an LF when there is room (a lone `:` otherwise). Either way
//!   the client's SSE state at the end of the body is the one at the cut: the same event in
//!   progress (or none), no field line completed. At most [`FILLER_LIMIT`] bytes, else none
//!   (FIN).
//! - The filler is never materialised: a [`CleanEnd`] is a few framing bytes around a count of
//!   spaces, and [`CleanEnd::pieces`] yields the spaces from one static buffer, so a cut costs
//!   the same memory whether its chunk had 3 or 16 MiB left.
//! - Inside a size line or trailers, in non-chunked bodies and outside bodies: empty (the
//!   pump then closes with FIN; for close-delimited bodies FIN is the normal end).

use super::http1_body::ChunkSpot;

/// `clean_end` pads an HTTP chunk with at most this many filler bytes.
pub const FILLER_LIMIT: u64 = 16 * 1024 * 1024;

const TERMINATOR: &[u8] = b"0\r\n\r\n";

/// The spaces every [`CleanEnd`] filler is written from.
static SPACES: [u8; 16 * 1024] = [b' '; 16 * 1024];

/// The bytes that end an HTTP message after a `clean-end` cut: `head`, then `spaces` filler
/// spaces, then `tail`. Empty when no clean end exists at the cut (the cut is then a FIN).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanEnd {
    /// Bytes before the filler (`:` when the filler is a comment line); at most a few bytes.
    pub head: Vec<u8>,
    /// Filler spaces after `head`.
    pub spaces: u64,
    /// Bytes after the filler (LF of a comment line, chunk CRLF, terminator); at most a few.
    pub tail: Vec<u8>,
}

impl CleanEnd {
    /// A clean end made of `bytes` only, without filler.
    pub fn bytes(bytes: Vec<u8>) -> Self {
        CleanEnd {
            head: bytes,
            ..CleanEnd::default()
        }
    }

    /// True if no clean end exists (nothing to write).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Total bytes to write.
    pub fn len(&self) -> u64 {
        self.head.len() as u64 + self.spaces + self.tail.len() as u64
    }

    /// The bytes to write, in order, in pieces of at most 16 KiB; the filler comes from one
    /// static buffer.
    pub fn pieces(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let full = (self.spaces / SPACES.len() as u64) as usize;
        let rest = (self.spaces % SPACES.len() as u64) as usize;
        std::iter::once(self.head.as_slice())
            .chain(std::iter::repeat_n(&SPACES[..], full))
            .chain(std::iter::once(&SPACES[..rest]))
            .chain(std::iter::once(self.tail.as_slice()))
            .filter(|p| !p.is_empty())
    }

    /// All bytes in one buffer (tests, small ends).
    pub fn to_vec(&self) -> Vec<u8> {
        self.pieces().flat_map(|p| p.iter().copied()).collect()
    }
}

/// Where the cut points of a chunk stand in the body framing, for `clean_end`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Spot {
    /// Payload bytes `start..end` with `left` bytes of their HTTP chunk after `end` (`None`
    /// outside chunked bodies).
    Data {
        start: usize,
        end: usize,
        left: Option<u64>,
    },
    /// Framing bytes `start..end`, with the chunk spot after `end`.
    Framing {
        start: usize,
        end: usize,
        after: Option<ChunkSpot>,
    },
}

/// The bytes that end a chunked body after a cut at chunk cut point `delivered`, given the
/// chunk's framing `spots` and the framing spot at the chunk's start; empty when none exists.
pub(super) fn clean_end_bytes(
    spots: &[Spot],
    spot_at_start: Option<ChunkSpot>,
    delivered: usize,
    line_start: bool,
) -> CleanEnd {
    let spot = if delivered == 0 {
        spot_at_start
    } else {
        spots.iter().find_map(|s| match *s {
            Spot::Data { start, end, left } if start < delivered && delivered <= end => {
                let left = left? + (end - delivered) as u64;
                Some(if left == 0 {
                    ChunkSpot::AfterData
                } else {
                    ChunkSpot::InData(left)
                })
            }
            Spot::Framing { start, end, after } if start < delivered && delivered <= end => {
                Some(if delivered == end {
                    after?
                } else {
                    ChunkSpot::Other
                })
            }
            Spot::Framing { end, after, .. } if end == delivered => after,
            _ => None,
        })
    };
    let mut end = CleanEnd::default();
    match spot {
        Some(ChunkSpot::BeforeSize) => {}
        Some(ChunkSpot::AfterData) => end.head.extend_from_slice(b"\r\n"),
        Some(ChunkSpot::AfterDataCr) => end.head.push(b'\n'),
        Some(ChunkSpot::InData(left)) if left <= FILLER_LIMIT => {
            end.spaces = left;
            if line_start {
                end.head.push(b':');
                end.spaces -= 1;
                if left >= 2 {
                    end.spaces -= 1;
                    end.tail.push(b'\n');
                }
            }
            end.tail.extend_from_slice(b"\r\n");
        }
        _ => return CleanEnd::default(),
    }
    end.tail.extend_from_slice(TERMINATOR);
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filler_pieces_come_from_the_static_buffer_and_add_up() {
        let end = CleanEnd {
            head: b":".to_vec(),
            spaces: 40_000,
            tail: b"\n\r\n0\r\n\r\n".to_vec(),
        };
        let pieces: Vec<&[u8]> = end.pieces().collect();
        assert!(pieces.iter().all(|p| p.len() <= SPACES.len()));
        let all = end.to_vec();
        assert_eq!(all.len() as u64, end.len());
        assert_eq!(all.len(), 1 + 40_000 + 8);
        assert_eq!(all[0], b':');
        assert!(all[1..40_001].iter().all(|b| *b == b' '));
        assert_eq!(&all[40_001..], b"\n\r\n0\r\n\r\n");
    }

    #[test]
    fn no_clean_end_is_empty() {
        let end = clean_end_bytes(&[], Some(ChunkSpot::Other), 0, false);
        assert!(end.is_empty());
        assert_eq!(end.pieces().count(), 0);
    }
}
