//! HTTP/2 on the wire (RFC 9113): the frame layer both the passive observer and the stream
//! relay read, so that a stream's `DATA` payload reaches the same SSE scanner and LLM reader an
//! HTTP/1.1 body does.
//!
//! Why its own layer: HTTP/2 multiplexes many request/response exchanges on one connection, so
//! "where a byte sits" gains a level — the frame and the stream — between the connection's raw
//! bytes and the SSE event. Everything above this layer keys an exchange by its stream id (the
//! `seq` of an [`super::Observation`] on an h2 connection *is* the stream id).

pub mod frame;
pub mod hpack;
mod huffman;

pub use frame::{ErrorCode, FrameHeader, FrameType, PREFACE};
