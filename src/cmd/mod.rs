//! The programs: one module per `tearline` subcommand, each composing the library.
//!
//! Why a layer of its own: parsing flags, assembling a stack (relay + observer + audit + control
//! API + profile watcher), installing signal handlers and writing reports for the user are what
//! a program does, not what the relay, the audit or the load client are. Keeping them here lets
//! every library folder import only the folders below it (the order is in the crate doc), and
//! gives each subcommand one place that says what it wires together.
//!
//! Invariants: every bad flag becomes one typed error naming the flag at fault (`main.rs`
//! prints it on one line and picks the exit code); nothing here is on the data path.

pub mod load;
pub mod profiles;
pub mod proxy;
pub mod replay;
pub mod report;
pub mod serve;
pub mod signals;
pub mod tls;
pub mod toxiproxy_server;
