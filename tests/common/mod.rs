//! Helpers shared by the integration-test groups (each `tests/<group>/main.rs` includes this
//! module once): echo servers and proxies, the control API fakes, the audit's wire builders,
//! the lab client, report readers, TLS fixtures, and the pinned real peers.
#![allow(dead_code)]

pub mod audit;
pub mod control;
pub mod delivery;
pub mod lab_client;
#[path = "../peers/mod.rs"]
pub mod peers;
pub mod proxy;
pub mod report;
pub mod tls;
