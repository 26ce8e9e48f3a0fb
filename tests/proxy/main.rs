//! Integration tests of `proxy`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod backlog;
mod budget;
mod cli;
mod h2_kinds;
mod h2_kinds_peers;
mod h2_relay;
mod limit;
mod plan;
mod read_buffers;
mod relay;
mod runtime;
mod shutdown_sink;
mod splice_relay;
