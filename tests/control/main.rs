//! Integration tests of `control`, one module per capability, in one executable so the test
//! build links a handful of binaries instead of one per file.

#[path = "../common/mod.rs"]
mod common;

mod api;
mod api_hardening;
mod deploy_images;
mod deploy_kubernetes;
mod live;
mod metrics;
mod safety;
mod server_start;
mod toxics;
mod toxiproxy_client;
