//! Integration tests of `replay`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod audience;
mod e2e;
mod fail_on_names;
mod goaway;
mod h2;
mod hold_headers;
mod interrupt;
mod report_cli;
mod report_files;
mod report_thresholds;
mod sessions;
mod stateless;
