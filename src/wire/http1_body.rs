//! HTTP/1.1 message body framing, decoded incrementally: which bytes are payload, which are
//! framing, and where the body ends.
//!
//! It exists so that both observers, and the load client reading its answers
//! (`load::http`), follow Content-Length, chunked (with extensions and trailers) and
//! close-delimited bodies the same way across arbitrary reads, without copying payload: one
//! decoder, so the client and the proxy never disagree on where a body ends.
//!
//! Invariants: [`BodyDecoder::step`] consumes at least one byte of a non-empty input (or reports
//! the end), never looks at payload bytes, and is a pure function of the bytes so far, so any
//! split of the input gives the same sequence of payload/framing bytes. A malformed chunk size
//! line, a missing chunk CRLF or a size line longer than [`SIZE_LINE_LIMIT`] is `Invalid` (the
//! direction becomes opaque). Line ends in framing accept CRLF and bare LF.

/// Chunk size lines (with extensions) longer than this are invalid.
pub const SIZE_LINE_LIMIT: usize = 4096;

/// One step of decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece {
    /// This many payload bytes.
    Data(usize),
    /// This many framing bytes (size line, extensions, chunk CRLF, trailers).
    Framing(usize),
    /// The body ended after this many framing bytes (0 for length-delimited bodies).
    End(usize),
    /// Malformed framing.
    Invalid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunked {
    /// In the size line: hex digits read so far, value, in extensions, line length.
    Size {
        digits: u32,
        value: u64,
        ext: bool,
        len: usize,
    },
    Data {
        left: u64,
    },
    /// Expecting the CR (or LF) after chunk data.
    DataEnd,
    /// Expecting the LF after the CR after chunk data.
    DataLf,
    /// In the trailer section: bytes of the current line so far (CR excluded).
    Trailer {
        len: usize,
    },
}

/// Where a chunked body stands, for clean ends after a cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChunkSpot {
    /// Before a size line (nothing of it read): `0\r\n\r\n` ends the body.
    BeforeSize,
    /// Inside chunk data with this many bytes left.
    InData(u64),
    /// After chunk data, before its CR.
    AfterData,
    /// After chunk data and its CR.
    AfterDataCr,
    /// Elsewhere (inside a size line or the trailers).
    Other,
}

/// The body framing state of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyDecoder {
    /// Content-Length: this many bytes left.
    Length {
        /// Bytes of the body not yet decoded.
        left: u64,
    },
    /// Chunked transfer coding.
    Chunked(ChunkedState),
    /// Until the connection closes.
    Close,
}

/// Opaque chunked state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkedState(Chunked);

impl BodyDecoder {
    /// A body of exactly `n` bytes.
    pub fn length(n: u64) -> Self {
        BodyDecoder::Length { left: n }
    }

    /// A chunked body.
    pub fn chunked() -> Self {
        BodyDecoder::Chunked(ChunkedState(Self::size_start()))
    }

    fn size_start() -> Chunked {
        Chunked::Size {
            digits: 0,
            value: 0,
            ext: false,
            len: 0,
        }
    }

    /// Where a chunked body stands; `None` for other framings.
    pub(super) fn chunk_spot(&self) -> Option<ChunkSpot> {
        let BodyDecoder::Chunked(ChunkedState(c)) = self else {
            return None;
        };
        Some(match *c {
            Chunked::Size { len: 0, .. } => ChunkSpot::BeforeSize,
            Chunked::Data { left } => ChunkSpot::InData(left),
            Chunked::DataEnd => ChunkSpot::AfterData,
            Chunked::DataLf => ChunkSpot::AfterDataCr,
            _ => ChunkSpot::Other,
        })
    }

    /// Decodes the next piece of `buf` (non-empty, except that a finished length body reports
    /// its end on an empty input too).
    pub fn step(&mut self, buf: &[u8]) -> Piece {
        match self {
            BodyDecoder::Length { left } => {
                if *left == 0 {
                    return Piece::End(0);
                }
                let n = (*left).min(buf.len() as u64);
                *left -= n;
                Piece::Data(n as usize)
            }
            BodyDecoder::Close => Piece::Data(buf.len()),
            BodyDecoder::Chunked(ChunkedState(c)) => step_chunked(c, buf),
        }
    }
}

fn step_chunked(c: &mut Chunked, buf: &[u8]) -> Piece {
    if let Chunked::Data { left } = c {
        let n = (*left).min(buf.len() as u64);
        *left -= n;
        if *left == 0 {
            *c = Chunked::DataEnd;
        }
        return Piece::Data(n as usize);
    }
    let mut i = 0;
    while i < buf.len() {
        let b = buf[i];
        i += 1;
        let before = *c;
        match c {
            Chunked::Size {
                digits,
                value,
                ext,
                len,
            } => {
                *len += 1;
                if *len > SIZE_LINE_LIMIT {
                    return invalid_after(c, before, i);
                }
                if b == b'\n' {
                    if *digits == 0 {
                        return invalid_after(c, before, i);
                    }
                    if *value == 0 {
                        *c = Chunked::Trailer { len: 0 };
                    } else {
                        *c = Chunked::Data { left: *value };
                        return Piece::Framing(i);
                    }
                } else if *ext || b == b'\r' {
                    // Extensions (and the CR) are skipped until the LF.
                } else if let Some(d) = (b as char)
                    .to_digit(16)
                    .filter(|_| *len == *digits as usize + 1)
                {
                    *digits += 1;
                    *value = match value.checked_mul(16) {
                        Some(v) => v + u64::from(d),
                        None => return invalid_after(c, before, i),
                    };
                } else if (b == b';' || b == b' ' || b == b'\t') && *digits > 0 {
                    *ext = true;
                } else {
                    return invalid_after(c, before, i);
                }
            }
            // Each byte after chunk data is its own piece, so that clean ends can tell where a
            // cut falls.
            Chunked::DataEnd => {
                *c = match b {
                    b'\r' => Chunked::DataLf,
                    b'\n' => BodyDecoder::size_start(),
                    _ => return Piece::Invalid,
                };
                return Piece::Framing(i);
            }
            Chunked::DataLf => {
                if b != b'\n' {
                    return Piece::Invalid;
                }
                *c = BodyDecoder::size_start();
                return Piece::Framing(i);
            }
            Chunked::Trailer { len } => match b {
                b'\n' if *len == 0 => return Piece::End(i),
                b'\n' => *len = 0,
                b'\r' => {}
                _ => *len += 1,
            },
            Chunked::Data { .. } => return Piece::Framing(i - 1),
        }
    }
    Piece::Framing(i)
}

/// Byte `i - 1` of this step makes the size line malformed. Bytes before it in the same step
/// were valid framing: report them first (and leave the state as before that byte, so the next
/// step fails on it), so that where framing stops being valid does not depend on the chunking.
fn invalid_after(c: &mut Chunked, before: Chunked, i: usize) -> Piece {
    if i > 1 {
        *c = before;
        Piece::Framing(i - 1)
    } else {
        Piece::Invalid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8], piece: usize) -> (Vec<u8>, Option<usize>) {
        let mut d = BodyDecoder::chunked();
        let mut data = Vec::new();
        let mut consumed = 0;
        for part in input.chunks(piece) {
            let mut i = 0;
            while i < part.len() {
                match d.step(&part[i..]) {
                    Piece::Data(n) => {
                        data.extend_from_slice(&part[i..i + n]);
                        i += n;
                    }
                    Piece::Framing(n) => i += n,
                    Piece::End(n) => return (data, Some(consumed + i + n)),
                    Piece::Invalid => return (data, None),
                }
            }
            consumed += part.len();
        }
        (data, None)
    }

    #[test]
    fn chunked_with_extensions_and_trailers_decodes_under_any_split() {
        let body =
            b"5;name=val\r\nhello\r\n7 ; x\r\n, world\r\n0\r\nExpires: never\r\nX: y\r\n\r\n";
        for piece in 1..=body.len() {
            let (data, end) = decode(body, piece);
            assert_eq!(data, b"hello, world", "piece {piece}");
            assert_eq!(end, Some(body.len()), "piece {piece}");
        }
    }

    #[test]
    fn malformed_size_line_is_invalid() {
        assert_eq!(decode(b"zz\r\n", 4).1, None);
        assert_eq!(decode(b"\r\n", 2), (Vec::new(), None));
        assert_eq!(decode(b"3\r\nabcX", 7).0, b"abc");
    }
}
