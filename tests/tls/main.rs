//! Integration tests of `tls`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod alpn;
mod clients;
mod cut;
mod load;
mod mcp_sdk;
mod proxy;
mod replay;
mod sdk_binary;
mod self_signed;
mod truncation;
