//! tearline: a fault-injecting TCP chaos proxy that knows where every byte sits in the HTTP
//! message and the SSE event, so it can cut streams at chosen SSE positions and judge how
//! clients and servers resume.
//!
//! Map of the crate (folders are the architecture):
//! - [`proxy`]: listener, connection task, pump (one direction), shutdown.
//! - [`fault`]: the [`fault::Fault`] trait, one file per fault kind, the registry of kinds.
//! - [`wire`]: passive observers: HTTP/1.1 framing, the WHATWG SSE scanner, positions.
//! - [`audit`]: per-session/stream ledger → findings (torn cut, cursor ahead, replay gap, …).
//! - [`profile`]: the profile model, parsing and validation.
//! - [`control`]: the Toxiproxy-compatible HTTP control API and `/metrics`.
//! - [`lab`]: a reference MCP Streamable HTTP server with knobs that reproduce both documents.
//! - [`load`]: the load client: sessions, SSE consumer with strict/naive policies, histograms.
//! - [`replay`]: `tearline replay`, the 250 ms reset load test in one command.
//! - [`report`]: histograms, JSON, `.hgrm`, `.hlog`, HTML+SVG, thresholds.
//! - [`tls`]: TLS to the upstream and for the clients (rustls, ring), the local CA.
//! - [`accuracy`]: the audit's accuracy harness: lab bug modes × clients × cuts, scored against
//!   ground truth the lab and the client record independently of the audit.
//! - [`vocab`]: the types the folders trade (`Direction`, `CutAction`, `OutageMode`,
//!   `StreamInfo`), defined once so `wire`, `fault`, `proxy` and `audit` need not import each
//!   other for them.
//!
//! Flow of one byte: socket → pump reads a chunk → [`wire`] annotates positions → faults edit
//! the chunk's plan → pump writes and tells the observer what it delivered or dropped, by raw
//! offset → only then are facts released → [`audit`] (its own task, behind a bounded queue).
// `unsafe` is denied everywhere but in `proxy::sendq` (one ioctl, see its doc).
#![deny(unsafe_code)]

pub mod accuracy;
pub mod audit;
pub mod control;
pub mod fault;
#[doc(hidden)]
pub mod fuzzing;
pub mod lab;
pub mod load;
pub mod profile;
pub mod proxy;
pub mod replay;
pub mod report;
pub mod tls;
pub mod units;
pub mod vocab;
pub mod wire;
