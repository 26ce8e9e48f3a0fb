//! Waiting until a socket's sent bytes are acknowledged, so that a reset cut delivers exactly
//! the bytes before the cut point.
//!
//! Why: closing with SO_LINGER 0 makes the kernel discard whatever is still in the socket's
//! send queue, so a "reset after N bytes" would reach the peer as "reset after fewer than N"
//! whenever the peer had not yet read everything — measured: 348 KiB of a 1.6 MiB cut arrived.
//! The fault decided N; the wire must show N. Linux reports the bytes not yet acknowledged
//! (`SIOCOUTQ`, which equals `TIOCOUTQ`); waiting for 0 means the peer's kernel holds them all,
//! and the peer reads them before it sees the reset.
//!
//! This is the crate's one use of `unsafe`: one `ioctl` that writes one `c_int`. On other
//! systems the query answers `None` and the reset is immediate (the old behaviour).
#![allow(unsafe_code)]

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::{Instant, sleep};

/// Bytes `stream` has sent that the peer has not acknowledged, if the system can tell.
pub fn unacknowledged(stream: &TcpStream) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut n: libc::c_int = 0;
        // SAFETY: the fd is a live socket borrowed from `stream` for the duration of the call,
        // and TIOCOUTQ writes exactly one c_int into `n`, which outlives the call.
        let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::TIOCOUTQ, &mut n) };
        if rc == 0 {
            return usize::try_from(n).ok();
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = stream;
        None
    }
}

/// Waits until every byte sent on `stream` is acknowledged, at most `limit` (a peer that stops
/// reading must not hold a cut forever). Returns whether the queue drained.
pub async fn drained(stream: &TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_micros(200);
    loop {
        match unacknowledged(stream) {
            None | Some(0) => return true,
            Some(_) if Instant::now() >= deadline => return false,
            Some(_) => {
                sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(10));
            }
        }
    }
}
