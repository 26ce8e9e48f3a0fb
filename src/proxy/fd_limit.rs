//! How many connections the process's open-file limit allows, and which descriptors the relay
//! may still spend on pipes, so the default connection limit never caps a load test below what
//! the file descriptors allow and a pipe never takes a connection's descriptors.
//!
//! Each relayed connection holds two sockets (client and upstream): the default connection
//! limit counts those. A zero-copy direction also needs a pipe (two descriptors), but only
//! while bytes flow through it (`splice` gives an idle direction's pipe back), and a pipe is
//! made only from the descriptors the process's [`Budget`] has left beyond a headroom kept for
//! the next connections: pipes are refused before connections are, and a direction without a
//! pipe copies. [`RESERVED`] descriptors are kept for the listeners, the control API, logs and
//! files.
//!
//! Invariant: [`raise_to_hard`] only raises the soft limit (to the hard one, as Go's runtime
//! does at start for `toxiproxy-server`); it never lowers it.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Descriptors left for everything but relayed connections.
pub const RESERVED: u64 = 256;

/// Descriptors one relayed connection holds (client and upstream sockets).
pub const PER_CONNECTION: u64 = 2;

/// Descriptors one pipe holds (its two ends).
pub const PER_PIPE: u64 = 2;

/// The descriptors relayed connections hold, process-wide (every proxy of the process draws on
/// the one open-file limit): sockets are always counted, pipes are made only within the limit
/// less a headroom for connections still to come.
#[derive(Debug)]
pub struct Budget {
    /// Descriptors relayed connections may hold in all: the soft limit less [`RESERVED`].
    limit: u64,
    /// Descriptors kept free of pipes: room for the next connections' sockets.
    headroom: u64,
    used: AtomicU64,
    pipes: AtomicU64,
}

/// What a holder keeps of the [`Budget`] until it is dropped.
#[derive(Debug)]
pub struct Hold {
    budget: &'static Budget,
    n: u64,
    pipe: bool,
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.n, Ordering::Relaxed);
        if self.pipe {
            self.budget.pipes.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Budget {
    /// A budget for a soft limit of `soft` descriptors (`None`: no limit).
    pub fn new(soft: Option<u64>) -> Budget {
        let limit = soft.map_or(u64::MAX, |n| n.saturating_sub(RESERVED));
        Budget {
            limit,
            // A sixteenth of the limit, at least 64 connections' sockets.
            headroom: (limit / 16).max(64 * PER_CONNECTION),
            used: AtomicU64::new(0),
            pipes: AtomicU64::new(0),
        }
    }

    /// The connection's two sockets, counted whatever the budget says (the connection limit
    /// bounds them).
    pub fn hold_sockets(&'static self) -> Hold {
        self.used.fetch_add(PER_CONNECTION, Ordering::Relaxed);
        Hold {
            budget: self,
            n: PER_CONNECTION,
            pipe: false,
        }
    }

    /// A pipe's two descriptors, if they fit beside the sockets and pipes held and the
    /// headroom; `None`: make no pipe (copy).
    pub fn try_hold_pipe(&'static self) -> Option<Hold> {
        let cap = self.limit.saturating_sub(self.headroom);
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                let next = used.checked_add(PER_PIPE)?;
                (next <= cap).then_some(next)
            })
            .ok()?;
        self.pipes.fetch_add(1, Ordering::Relaxed);
        Some(Hold {
            budget: self,
            n: PER_PIPE,
            pipe: true,
        })
    }

    /// Descriptors held now (sockets and pipes).
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Pipes held now.
    pub fn pipes(&self) -> u64 {
        self.pipes.load(Ordering::Relaxed)
    }
}

/// The process's budget, made at first use from the soft limit then in force (programs raise it
/// with [`raise_to_hard`] before they relay).
pub fn budget() -> &'static Budget {
    static BUDGET: OnceLock<Budget> = OnceLock::new();
    BUDGET.get_or_init(|| Budget::new(soft_limit()))
}

/// The soft open-file limit, if the platform tells.
pub fn soft_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Raises the soft open-file limit to the hard limit; returns the soft limit now in force.
pub fn raise_to_hard() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut lim = getrlimit(Resource::Nofile);
        if lim.current != lim.maximum {
            lim.current = lim.maximum;
            if let Err(e) = setrlimit(Resource::Nofile, lim) {
                tracing::debug!(error = %e, "could not raise the open-file limit");
            }
        }
    }
    soft_limit()
}

/// The connections `soft` descriptors allow: `(soft - RESERVED) / PER_CONNECTION`, at least 1;
/// without a limit (or on a platform that does not tell), 65,536.
pub fn connections_for(soft: Option<u64>) -> usize {
    match soft {
        Some(n) => usize::try_from((n.saturating_sub(RESERVED) / PER_CONNECTION).max(1))
            .unwrap_or(usize::MAX),
        None => 65_536,
    }
}

/// The default connection limit: what the current soft open-file limit allows.
pub fn default_max_connections() -> usize {
    connections_for(soft_limit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_follows_the_descriptors_with_a_reserve() {
        assert_eq!(connections_for(Some(20_000)), 9_872);
        assert_eq!(connections_for(Some(1_024)), 384);
        assert_eq!(connections_for(Some(100)), 1);
        // RLIM_INFINITY reads as no limit.
        assert!(connections_for(None) >= 4_096);
    }

    fn leaked(soft: u64) -> &'static Budget {
        Box::leak(Box::new(Budget::new(Some(soft))))
    }

    #[test]
    fn pipes_are_refused_before_the_sockets_of_the_connections_the_limit_allows() {
        // 20,000 descriptors: 9,872 connections by default; 5,000 busy ones hold 10,000.
        let b = leaked(20_000);
        let socks: Vec<Hold> = (0..5_000).map(|_| b.hold_sockets()).collect();
        let mut pipes = Vec::new();
        while let Some(p) = b.try_hold_pipe() {
            pipes.push(p);
        }
        // Pipes filled what was left but the headroom (a sixteenth of 19,744: 1,234).
        assert_eq!(b.used(), 19_744 - 1_234);
        assert_eq!(b.pipes(), pipes.len() as u64);
        assert_eq!(pipes.len(), (19_744 - 1_234 - 10_000) / 2);
        // More connections still count their sockets; pipes stay refused.
        let more = b.hold_sockets();
        assert!(b.try_hold_pipe().is_none());
        drop(more);
        // A pipe given back makes room for one.
        pipes.pop();
        assert!(b.try_hold_pipe().is_some());
        drop(pipes);
        drop(socks);
        assert_eq!((b.used(), b.pipes()), (0, 0));
    }

    #[test]
    fn without_a_limit_every_pipe_fits() {
        let b: &'static Budget = Box::leak(Box::new(Budget::new(None)));
        let holds: Vec<Hold> = (0..1_000).filter_map(|_| b.try_hold_pipe()).collect();
        assert_eq!(holds.len(), 1_000);
    }
}
