//! The relay: listener, connection tasks, one pump per direction, shutdown.

pub mod cli;
