//! Integration tests of `load`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod abandon;
mod bad_target;
mod client_modes;
mod fail_on;
mod h2;
mod http;
mod interop_load;
mod lab;
mod multi_agent;
mod scripted;
