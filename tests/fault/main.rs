//! Integration tests of `fault`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod kinds;
mod latency_memory;
mod live_edit_state;
mod profile_cli;
mod profile_validate;
mod registry;
mod sockets;
mod splice_faults;
mod sse_cut;
