//! Feeds body bytes to the shared SSE scanner one line at a time, so that at a disconnect the
//! client can tell the story of the event it held: how many bytes, how many complete `data:`
//! lines, and whether it stopped inside a `data:` line.
//!
//! The scanner ([`crate::wire::sse::SseScanner`]) stays the only SSE parser: this module only
//! splits the input at LF (one `memchr` per line, no per-byte work) and notes, after each
//! piece, whether the scanner still holds a partial event. Lines ended by a bare CR are counted
//! with the line they precede; the facts are for stories, the scanner decides what is
//! dispatched.

use crate::wire::sse::{SseEvent, SseScanner};

/// Facts about the incomplete event in hand (reset whenever the scanner holds none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tail {
    /// Bytes of the incomplete event received so far.
    pub bytes: u64,
    /// Complete `data` lines of the incomplete event.
    pub data_lines: u32,
    /// True if the input stopped inside a `data` line.
    pub mid_data_line: bool,
    at_line_start: bool,
}

impl Tail {
    /// A tail at the start of a stream.
    pub fn new() -> Tail {
        Tail {
            at_line_start: true,
            ..Tail::default()
        }
    }
}

/// Feeds `chunk` to `scanner`, line by line, keeping `tail` up to date.
pub fn feed(
    scanner: &mut SseScanner,
    tail: &mut Tail,
    chunk: &[u8],
    on_event: &mut dyn FnMut(&SseEvent<'_>),
) {
    let mut rest = chunk;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (piece, after) = rest.split_at(end);
        if tail.at_line_start {
            tail.mid_data_line = piece.starts_with(b"data:")
                || piece == b"data\n"
                || piece == b"data\r\n"
                || piece == b"data";
        }
        scanner.feed(piece, on_event);
        let line_done = piece.ends_with(b"\n");
        if scanner.has_partial_event() {
            tail.bytes += piece.len() as u64;
            if line_done && tail.mid_data_line {
                tail.data_lines += 1;
            }
        } else {
            tail.bytes = 0;
            tail.data_lines = 0;
        }
        if line_done {
            tail.mid_data_line = false;
        }
        tail.at_line_start = line_done;
        rest = after;
    }
}
