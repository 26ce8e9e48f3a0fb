//! The relay's table of the streams of one h2 connection: which are open, which the relay
//! reset (their later server `DATA` is dropped and credited), and whether the server already
//! sent `DATA` on them.
//!
//! Invariants: memory is bounded by [`MAX_TRACKED`] entries; an entry leaves the table when
//! both sides ended the stream or either reset it, except a stream the relay reset, which
//! stays until the server ends or resets it (so its late `DATA` is still recognised).

use rustc_hash::FxHashMap;

use crate::vocab::Direction;
use crate::wire::h2::frame::flags;
use crate::wire::h2::{FrameHeader, FrameType};

/// Streams followed at once; a connection past it is followed for its first streams only (a
/// new stream is then not tracked: its facts read as fresh, and it cannot be cut).
pub(crate) const MAX_TRACKED: usize = 4096;

/// What the relay knows of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamState {
    /// The client sent `END_STREAM`.
    pub(crate) client_ended: bool,
    /// The server sent `END_STREAM`.
    pub(crate) server_ended: bool,
    /// The server sent `DATA`.
    pub(crate) data_seen: bool,
    /// The relay reset the stream (or ended it towards the client).
    pub(crate) reset_by_proxy: bool,
}

/// The streams of one connection.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    map: FxHashMap<u32, StreamState>,
    /// Highest stream id the client opened.
    pub(crate) last_client: u32,
}

impl Streams {
    /// The state of `stream` (default when unknown).
    pub(crate) fn get(&self, stream: u32) -> StreamState {
        self.map.get(&stream).copied().unwrap_or_default()
    }

    /// Streams the client opened that are still open.
    pub(crate) fn open(&self) -> usize {
        self.map
            .values()
            .filter(|s| !(s.reset_by_proxy || (s.client_ended && s.server_ended)))
            .count()
    }

    /// True if the server's `DATA` on `stream` must be dropped.
    pub(crate) fn is_cut(&self, stream: u32) -> bool {
        self.map.get(&stream).is_some_and(|s| s.reset_by_proxy)
    }

    /// Follows one frame that travelled in `dir` (before any fault's verdict on it).
    pub(crate) fn on_frame(&mut self, dir: Direction, h: &FrameHeader) {
        if h.stream == 0 {
            return;
        }
        let end = h.has(flags::END_STREAM);
        match (h.kind, dir) {
            (FrameType::Headers, Direction::Upstream) if h.stream > self.last_client => {
                self.last_client = h.stream;
                if self.map.len() < MAX_TRACKED {
                    self.map.insert(
                        h.stream,
                        StreamState {
                            client_ended: end,
                            ..StreamState::default()
                        },
                    );
                }
            }
            (FrameType::Headers | FrameType::Data, _) => {
                let Some(s) = self.map.get_mut(&h.stream) else {
                    return;
                };
                if h.kind == FrameType::Data && dir == Direction::Downstream {
                    s.data_seen = true;
                }
                if end {
                    match dir {
                        Direction::Upstream => s.client_ended = true,
                        Direction::Downstream => s.server_ended = true,
                    }
                }
                let done = if s.reset_by_proxy {
                    s.server_ended
                } else {
                    s.client_ended && s.server_ended
                };
                if done {
                    self.map.remove(&h.stream);
                }
            }
            (FrameType::RstStream, _) => {
                // A relay-reset stream waits for the server's word on it; anything else ends.
                let keep = dir == Direction::Upstream && self.is_cut(h.stream);
                if !keep {
                    self.map.remove(&h.stream);
                }
            }
            _ => {}
        }
    }

    /// The relay reset `stream` (stream-scope cut or an injected `RST_STREAM` to the client).
    pub(crate) fn reset_by_proxy(&mut self, stream: u32) {
        if let Some(s) = self.map.get_mut(&stream) {
            s.reset_by_proxy = true;
        } else if self.map.len() < MAX_TRACKED {
            self.map.insert(
                stream,
                StreamState {
                    reset_by_proxy: true,
                    ..StreamState::default()
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(kind: FrameType, flags: u8, stream: u32) -> FrameHeader {
        FrameHeader {
            len: 0,
            kind,
            flags,
            stream,
        }
    }

    #[test]
    fn a_stream_opens_with_the_clients_headers_and_closes_when_both_sides_end() {
        let mut s = Streams::default();
        s.on_frame(
            Direction::Upstream,
            &h(FrameType::Headers, flags::END_STREAM, 1),
        );
        s.on_frame(Direction::Upstream, &h(FrameType::Headers, 0, 3));
        assert_eq!((s.open(), s.last_client), (2, 3));
        s.on_frame(Direction::Downstream, &h(FrameType::Headers, 0, 1));
        s.on_frame(
            Direction::Downstream,
            &h(FrameType::Data, flags::END_STREAM, 1),
        );
        assert_eq!(s.open(), 1);
        assert!(s.get(3) == StreamState::default());
    }

    #[test]
    fn a_stream_the_relay_reset_stays_cut_until_the_server_ends_it() {
        let mut s = Streams::default();
        s.on_frame(
            Direction::Upstream,
            &h(FrameType::Headers, flags::END_STREAM, 1),
        );
        s.on_frame(Direction::Downstream, &h(FrameType::Data, 0, 1));
        s.reset_by_proxy(1);
        assert!(s.is_cut(1));
        assert_eq!(s.open(), 0);
        // The client's own RST for it does not forget the cut.
        s.on_frame(Direction::Upstream, &h(FrameType::RstStream, 0, 1));
        s.on_frame(Direction::Downstream, &h(FrameType::Data, 0, 1));
        assert!(s.is_cut(1));
        s.on_frame(
            Direction::Downstream,
            &h(FrameType::Data, flags::END_STREAM, 1),
        );
        assert!(!s.is_cut(1));
    }
}
