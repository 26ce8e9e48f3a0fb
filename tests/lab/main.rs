//! Integration tests of `lab`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod expiry;
mod h2;
mod hold;
mod interop_lab;
mod resume;
mod server;
mod stateless;
mod wire;
