//! The relay: listener, connection task, one pump per direction, shutdown.
//!
//! A [`Proxy`] is the shared, runtime-changeable state of one named proxy (upstream, enabled,
//! faults, outage gate, observers, stats); [`run`] serves it on an already-bound listener until
//! a [`CancellationToken`] fires. Each accepted connection is one task holding both sockets and
//! running two pumps (client→server and server→client) as joined futures.
//!
//! Invariants the relay keeps:
//! - Bytes leave in the order they arrived, each direction independently; no byte is lost or
//!   duplicated unless a fault's plan drops or cuts it (also across fault changes).
//! - EOF on one side becomes a write shutdown on the other (half-close); the other direction
//!   keeps flowing until it ends.
//! - Memory per connection is bounded: each direction holds at most `buffer_size` bytes in its
//!   read buffer (lent only while bytes pass; many busy directions share `read_budget`, see
//!   `readbuf`) plus `max_inflight_bytes` (+ one chunk) in its timed queue, or, while it is
//!   relayed zero-copy, at most `pipe_size` bytes in its pipe; a slow reader stops the pump
//!   from reading (backpressure), it never grows a buffer. Across connections, timed queues
//!   stop growing while the proxy holds `max_buffered_bytes` (each direction may still hold one
//!   chunk, so none starves).
//! - An I/O error on one side resets the other side at once.
//! - A cut that carries an outage (the documents' 250 ms window) starts it in
//!   [`OutageMode::Hold`](crate::vocab::OutageMode::Hold): open connections are reset, new ones wait until the window ends.

mod chain;
mod conn;
mod engine;
pub mod fd_limit;
mod h2;
mod listener;
mod pump;
mod readbuf;
pub mod schedule;
mod sendq;
mod splice;
mod state;
mod stats;
mod tls_hook;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use listener::{
    LISTEN_BACKLOG, ProxySpec, bind, bind_all, build, listen, run, run_all, run_bound,
};
pub use readbuf::ReadBufferGauge;
pub use state::{Factories, ObserverFactory, Proxy};
pub use stats::{Stats, StatsSnapshot};
pub use tokio_util::sync::CancellationToken;

/// Static configuration of one proxy. `upstream` is only the initial value: [`Proxy`] can change
/// it at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Name (logs, metrics, per-connection RNG derivation).
    pub name: String,
    /// `host:port` to connect to for each accepted connection.
    pub upstream: String,
    /// Size of each pump's read buffer (the largest chunk the faults see).
    pub buffer_size: usize,
    /// Bytes the read buffers of all busy directions share: a buffer is `buffer_size` while
    /// few directions hold one and shrinks (to 4 KiB at least) when many do, so memory follows
    /// the bytes in flight, not the connections open. Idle directions hold no buffer.
    pub read_budget: usize,
    /// Upper bound on the upstream connect.
    pub connect_timeout: Duration,
    /// Connections served at once; a connection over it is reset at once and counted (default:
    /// what the open-file limit allows, [`fd_limit::default_max_connections`]).
    pub max_connections: usize,
    /// How long open connections may keep running after shutdown is requested.
    pub drain_timeout: Duration,
    /// Byte budget of each direction's timed queue (data a fault delays). Throughput through a
    /// latency `L` is at most `max_inflight_bytes / L` (default 256 MiB: ~2.5 GiB/s through
    /// 100 ms, i.e. line rate on loopback).
    pub max_inflight_bytes: usize,
    /// Memory budget of the whole proxy: bytes held across all its connections (delay queues,
    /// chunks in flight, observer holdings; the `bytes_buffered` gauge). While the gauge is at
    /// or over it, pumps stop reading into their queues (backpressure: nothing is dropped) and
    /// new connections are refused with RST and a warning. 0 = no budget.
    pub max_buffered_bytes: u64,
    /// Run seed; connection `i` draws from `conn_rng(seed, name, i)`.
    pub seed: u64,
    /// TLS on the client side, the upstream side, both or neither (default: neither).
    pub tls: crate::tls::ProxyTls,
    /// Relay a direction with `splice(2)` (socket → pipe → socket, no user-space copy) while
    /// its observer is opaque and no fault needs its bytes (Linux; elsewhere always copying).
    pub zero_copy: bool,
    /// Capacity asked for each zero-copy pipe (the most a spliced direction holds). The kernel
    /// may grant less (per-user pipe quota, `/proc/sys/fs/pipe-max-size`); below 64 KiB the
    /// direction copies instead.
    pub pipe_size: usize,
}

impl ProxyConfig {
    /// Defaults: 64 KiB buffers sharing a 32 MiB read budget, 5 s connect timeout, as many connections as the open-file limit allows, 5 s drain, 256 MiB queue
    /// per direction (line rate through a 100 ms latency), a 1 GiB proxy budget, zero-copy on
    /// through 1 MiB pipes.
    pub fn new(name: impl Into<String>, upstream: impl Into<String>) -> Self {
        ProxyConfig {
            name: name.into(),
            upstream: upstream.into(),
            buffer_size: 64 * 1024,
            read_budget: DEFAULT_READ_BUDGET,
            connect_timeout: Duration::from_secs(5),
            max_connections: fd_limit::default_max_connections(),
            drain_timeout: Duration::from_secs(5),
            max_inflight_bytes: 256 * 1024 * 1024,
            max_buffered_bytes: DEFAULT_MAX_BUFFERED,
            seed: 0,
            tls: crate::tls::ProxyTls::default(),
            zero_copy: true,
            pipe_size: 1024 * 1024,
        }
    }
}

/// Default of [`ProxyConfig::read_budget`]: 512 directions at 64 KiB, 8,192 at 4 KiB.
pub const DEFAULT_READ_BUDGET: usize = 32 << 20;

/// Default of [`ProxyConfig::max_buffered_bytes`].
pub const DEFAULT_MAX_BUFFERED: u64 = 1 << 30;

/// Errors of the relay.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// A configuration value is out of range.
    #[error("invalid configuration of proxy '{proxy}': {problem}")]
    Config { proxy: String, problem: String },
    /// Two proxies were given the same name.
    #[error("duplicate proxy name '{0}'")]
    DuplicateName(String),
}

/// The fault factories of one proxy, both directions (each factory names its direction).
pub type FaultList = Vec<Arc<dyn crate::fault::FaultFactory>>;
