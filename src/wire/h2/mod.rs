//! HTTP/2 on the wire (RFC 9113): the frame layer both the passive observer and the stream
//! relay read, so that a stream's `DATA` payload reaches the same SSE scanner and LLM reader an
//! HTTP/1.1 body does.
//!
//! Why its own layer: HTTP/2 multiplexes many request/response exchanges on one connection, so
//! "where a byte sits" gains a level — the frame and the stream — between the connection's raw
//! bytes and the SSE event. Everything above this layer keys an exchange by its stream id (the
//! `seq` of an [`super::Observation`] on an h2 connection *is* the stream id).
//!
//! The parts: `frame` (headers, the frames the proxy writes), `reader` (incremental frames of
//! one direction), `hpack` + `huffman` (header blocks), `headers` (the facts of a header
//! list), `half` + `up` + `down` (one direction of the observer, the relay's API), `view` and
//! `outbox` (cut descriptions and held observations), `shared` (what both directions share),
//! `observer` (the pump's [`crate::wire::WireObserver`] and the observer pairs).

mod down;
pub mod frame;
mod half;
mod headers;
pub mod hpack;
mod huffman;
mod marks;
mod observer;
mod outbox;
pub mod reader;
mod shared;
mod up;
mod view;

pub use frame::{ErrorCode, FrameHeader, FrameType, PREFACE};
pub use half::{H2Half, StreamEnding};
pub use observer::{H2Observer, h2_pair, halves, observer_pair_h2, observer_pair_sniffed};
pub use shared::MAX_STREAMS;

#[cfg(test)]
mod sniff_tests;
#[cfg(test)]
mod tests;
