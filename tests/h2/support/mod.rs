//! What the h2 peer tests share: the peers as child processes whose JSON-line logs are read as
//! they come ([`peer`]), the certificates made at test time ([`certs`]), the routes a client
//! takes to a server — direct, or through an in-process proxy relaying bytes or observing
//! ([`route`]) — and the checks of a client's log against the server's contract ([`check`]).
//!
//! Invariants: every wait is bounded by a deadline; every child is killed when its handle
//! drops; every socket is on 127.0.0.1 with a port the kernel chose.
#![allow(dead_code)]

pub mod audited;
pub mod certs;
pub mod check;
pub mod judged;
pub mod launch;
pub mod peer;
pub mod route;
