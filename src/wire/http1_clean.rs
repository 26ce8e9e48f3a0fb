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
//! - Inside a size line or trailers, in non-chunked bodies and outside bodies: empty (the
//!   pump then closes with FIN; for close-delimited bodies FIN is the normal end).

use super::http1_body::ChunkSpot;

/// `clean_end` pads an HTTP chunk with at most this many filler bytes.
pub const FILLER_LIMIT: u64 = 16 * 1024 * 1024;

const TERMINATOR: &[u8] = b"0\r\n\r\n";

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
) -> Vec<u8> {
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
    let mut bytes = Vec::new();
    match spot {
        Some(ChunkSpot::BeforeSize) => {}
        Some(ChunkSpot::AfterData) => bytes.extend_from_slice(b"\r\n"),
        Some(ChunkSpot::AfterDataCr) => bytes.push(b'\n'),
        Some(ChunkSpot::InData(left)) if left <= FILLER_LIMIT => {
            bytes.resize(left as usize, b' ');
            if line_start {
                bytes[0] = b':';
                if left >= 2 {
                    bytes[left as usize - 1] = b'\n';
                }
            }
            bytes.extend_from_slice(b"\r\n");
        }
        _ => return Vec::new(),
    }
    bytes.extend_from_slice(TERMINATOR);
    bytes
}
