//! Passive observers of the bytes the proxy forwards: HTTP/1.1 framing for both directions,
//! the WHATWG SSE scanner, and the position of every byte in the SSE event it belongs to.
//!
//! Invariant: an observer never changes a byte and never fails the connection. Traffic it
//! cannot parse (not HTTP, TLS, HTTP/2, upgrades) makes it opaque from there on; opaque bytes
//! pass through untouched and carry no positions.

pub mod h2;
pub mod http1;
pub mod http1_body;
mod http1_clean;
mod http1_down;
mod http1_head;
mod http1_view;
pub mod llm;
pub mod llm_args;
pub mod llm_json;
pub mod llm_routes;
pub mod observe;
pub mod position;
pub mod record;
pub mod redact;
mod rpc_head;
mod rpc_scan;
pub mod sse;
pub mod sse_class;
mod sse_data;

pub use http1_clean::CleanEnd;
pub use observe::{
    ChunkPositions, CutPoint, LlmEventSeen, LlmRequestSeen, Observation, ObservationSink,
    PositionRun, StreamSpan, WireObserver,
};
pub use position::{LlmPos, SseClass};
