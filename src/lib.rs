//! tearline: a fault-injecting TCP chaos proxy that knows where every byte sits in the HTTP
//! message and the SSE event, so it can cut streams at chosen SSE positions and judge how
//! clients and servers resume.
//!
//! ## Layers
//!
//! Folders are the architecture, stacked: a module imports only the modules of the lines above
//! its own. The unit test in `layers.rs` reads every `crate::…` path of non-test code and fails
//! on an import that points down this list, so there is no import circle between folders.
//!
//! 1. [`vocab`], [`units`]: the plain types every folder trades (`Direction`, `CutAction`,
//!    `OutageMode`, `StreamInfo`) and units (sizes, durations); they import nothing.
//! 2. [`tls`]: TLS to the upstream and for clients (rustls, ring), the local CA.
//! 3. [`wire`]: passive observers: HTTP/1.1 framing, the WHATWG SSE scanner, positions.
//! 4. [`fault`]: the [`fault::Fault`] trait, one file per fault kind, the table of kinds.
//! 5. [`profile`]: the profile model, parsing and validation (over the table of kinds).
//! 6. [`audit`]: a shared ledger of streams, legs and calls, and the rules that judge it.
//! 7. [`proxy`]: listener, connection task, pump (one direction), shutdown.
//! 8. [`control`]: the Toxiproxy-compatible HTTP control API and `/metrics`, over the proxy.
//! 9. [`report`]: histograms, JSON, `.hgrm`, `.hlog`, HTML+SVG, thresholds, and the names of
//!    the histograms a run records.
//! 10. [`lab`]: a reference MCP Streamable HTTP server with knobs that reproduce both documents.
//! 11. [`load`]: the load client: sessions, SSE consumer with strict/naive policies, histograms.
//! 12. [`replay`]: the scenarios end to end (lab + proxy + load + audit + report).
//! 13. `accuracy`, `fuzzing`: test harnesses (the audit's accuracy against ground truth, the
//!     fuzz entry points), built only with the `harness` feature, which the tests, benches and
//!     fuzz targets turn on; the shipped library and binary do not contain them.
//! 14. [`cmd`]: the programs, one module per subcommand: flags, stack assembly, signals,
//!     watching, agents. Only `main.rs` is above it.
//!
//! Flow of one byte: socket → pump reads a chunk → [`wire`] annotates positions → faults edit
//! the chunk's plan → pump writes and tells the observer what it delivered or dropped, by raw
//! offset → only then are facts released → [`audit`] (its own task, behind a bounded queue).
// `unsafe` is denied everywhere but in `proxy::sendq` (one ioctl, see its doc).
#![deny(unsafe_code)]

#[cfg(feature = "harness")]
pub mod accuracy;
pub mod audit;
pub mod cmd;
pub mod control;
pub mod fault;
#[cfg(feature = "harness")]
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

#[cfg(test)]
mod layers;
