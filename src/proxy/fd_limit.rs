//! How many connections the process's open-file limit allows, so the default connection limit
//! never caps a load test below what the file descriptors allow.
//!
//! Each relayed connection holds two sockets (client and upstream); a zero-copy direction also
//! holds a pipe (two descriptors) while it splices, but a direction whose pipe cannot be made
//! copies instead, so only the sockets are counted. [`RESERVED`] descriptors are kept for the
//! listeners, the control API, logs and files.
//!
//! Invariant: [`raise_to_hard`] only raises the soft limit (to the hard one, as Go's runtime
//! does at start for `toxiproxy-server`); it never lowers it.

/// Descriptors left for everything but relayed connections.
pub const RESERVED: u64 = 256;

/// Descriptors one relayed connection holds (client and upstream sockets).
pub const PER_CONNECTION: u64 = 2;

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
}
