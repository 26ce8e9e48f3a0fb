//! Integration tests of `wire`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod fuzz_corpus;
mod fuzz_regressions;
mod http1;
mod long_event_facts;
mod observer_memory;
mod sse;
