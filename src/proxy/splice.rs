//! The zero-copy path of one direction: `splice(2)` from the source socket into a pipe and from
//! the pipe into the destination socket, so the bytes never enter user space.
//!
//! It exists because a relay that nothing inspects spends most of its CPU copying bytes into a
//! buffer and out again; splice moves page references instead. The syscalls go through `rustix`
//! (a safe wrapper); readiness comes from tokio (`readable()`/`writable()` + `try_io`), so the
//! sockets stay registered with the runtime and the copying pump can take over at any time.
//!
//! Invariants:
//! - Strict alternation: the source is spliced into the pipe only when the pipe is empty, so a
//!   would-block from the source always means "no data" (never "pipe full"), and readiness is
//!   cleared only when it is truly gone.
//! - At most `budget` bytes are taken from the source per call; every return (handback) is made
//!   with the pipe empty, each byte taken having been written to the destination in order.
//! - The pipe holds at most its capacity (`pipe_size`, 1 MiB by default, or what the kernel
//!   grants; a pipe under [`MIN_PIPE`] is not used): a slow reader stops the splice from the
//!   source, memory stays bounded, and the bytes in the pipe count in `bytes_buffered`
//!   (released if the direction is dropped).
//! - EOF (a 0-byte splice from the source) is reported after the pipe drained; an I/O error on
//!   a socket is reported as the pump would ([`Stop::Io`] naming the side).
//! - Where splice is unavailable (not Linux, no pipe, the kernel refuses the socket) the first
//!   call hands back with nothing moved and every later call does the same at once: the
//!   copying pump carries the direction.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::TcpStream;

use super::engine::Handback;
use super::pump::{Side, Stop};
use super::state::Proxy;
use crate::fault::Deadline;
use crate::vocab::Direction;

/// The smallest pipe worth splicing through: over the per-user pipe quota the kernel hands out
/// one- or two-page pipes, and a syscall pair per 4 KiB costs more than copying.
pub(crate) const MIN_PIPE: usize = 64 * 1024;

/// A pump half the zero-copy path may splice: plain TCP halves expose their socket; any other
/// half (a TLS stream's) has no socket whose bytes are the payload, so it always copies.
pub(crate) trait SpliceHalf {
    /// The socket under this half, if its bytes are exactly the relayed bytes.
    fn tcp(&self) -> Option<&TcpStream> {
        None
    }
}

impl SpliceHalf for tokio::net::tcp::ReadHalf<'_> {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self.as_ref())
    }
}

impl SpliceHalf for tokio::net::tcp::WriteHalf<'_> {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self.as_ref())
    }
}

impl<T> SpliceHalf for tokio::io::ReadHalf<T> {}

impl<T> SpliceHalf for tokio::io::WriteHalf<T> {}

/// What the zero-copy path needs from the pump for one call.
pub(crate) struct Lane<'a> {
    pub(crate) proxy: &'a Proxy,
    pub(crate) dir: Direction,
    pub(crate) src: &'a TcpStream,
    pub(crate) dst: &'a TcpStream,
    /// The connection's per-direction delivered counter (close log).
    pub(crate) delivered: &'a AtomicU64,
    /// The fault-list generation the pump's chain was built from: a newer one hands back.
    pub(crate) generation: u64,
    /// The earliest fault deadline of the chain.
    pub(crate) deadline: Option<Deadline>,
    /// Fault edits: one made while the lane waits hands back at once, so an idle connection
    /// picks up an added fault (a `timeout`'s clock) at the edit, not at its next byte.
    pub(crate) edits: tokio::sync::watch::Receiver<u64>,
}

impl Lane<'_> {
    fn src_side(&self) -> Side {
        Side::source_of(self.dir)
    }

    fn dst_side(&self) -> Side {
        Side::sink_of(self.dir)
    }

    fn account(&self, n: usize) {
        let stats = self.proxy.stats();
        stats.delivered(self.dir, n);
        stats.spliced(n);
        self.delivered.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Bytes sitting in the pipe, counted in `bytes_buffered` until written or dropped.
struct Held<'a> {
    stats: &'a super::stats::Stats,
    n: usize,
}

impl Held<'_> {
    fn add(&mut self, n: usize) {
        self.n += n;
        self.stats.buffer_add(n);
    }

    fn sub(&mut self, n: usize) {
        self.n -= n;
        self.stats.buffer_sub(n);
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.stats.buffer_sub(self.n);
    }
}

/// One direction's zero-copy state: its pipe while bytes flow (taken from the process's idle
/// pipes or made within the descriptor budget, given back when the source goes quiet), and
/// whether splice works here at all.
#[derive(Debug)]
pub(crate) struct ZeroCopy {
    enabled: bool,
    #[cfg(target_os = "linux")]
    pipe: Option<linux::Pipe>,
}

impl ZeroCopy {
    /// `enabled` is the proxy's `zero_copy` setting.
    pub(crate) fn new(enabled: bool) -> Self {
        ZeroCopy {
            enabled: enabled && cfg!(target_os = "linux"),
            #[cfg(target_os = "linux")]
            pipe: None,
        }
    }

    /// False once splice is known not to work here (or was never enabled).
    pub(crate) fn usable(&self) -> bool {
        self.enabled
    }

    /// True when the direction has a pipe or got one now (of `size`, the proxy's
    /// `pipe_size`); false when none may be had now (the descriptor budget is spent: the
    /// copying pump carries the next chunk, and the next call asks again) or splice does not
    /// work here (then never again).
    pub(crate) fn ready(&mut self, size: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            if self.pipe.is_some() {
                return true;
            }
            match linux::Pipe::acquire(size) {
                Ok(Some(p)) => {
                    self.pipe = Some(p);
                    true
                }
                Ok(None) => false,
                Err(e) => {
                    tracing::debug!(error = %e, "no pipe for splice; copying instead");
                    self.enabled = false;
                    false
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = size;
            false
        }
    }

    /// Relays up to `budget` bytes socket to socket; returns why it stopped, the pipe empty.
    /// Call only after [`ZeroCopy::ready`] said yes.
    pub(crate) async fn relay(&mut self, lane: Lane<'_>, budget: u64) -> Result<Handback, Stop> {
        #[cfg(target_os = "linux")]
        {
            if self.pipe.is_some() {
                let r = linux::relay(&mut self.pipe, &lane, budget).await;
                if self.pipe.as_ref().is_some_and(|p| p.refused) {
                    self.enabled = false;
                }
                return r;
            }
        }
        let _ = (budget, lane);
        Ok(Handback::Copy { moved: 0 })
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::OwnedFd;
    use std::sync::Mutex;

    use rustix::pipe::{PipeFlags, SpliceFlags};
    use tokio::io::Interest;
    use tokio::time::{Instant, sleep_until};

    use super::{Held, Lane};
    use crate::fault::Deadline;
    use crate::proxy::engine::Handback;
    use crate::proxy::fd_limit::Hold;
    use crate::proxy::pump::Stop;

    /// Empty pipes kept for the next direction that has bytes to move, at most: a quiet
    /// direction gives its pipe back here rather than closing it, so a stream of small writes
    /// does not make a pipe per write. They count in the descriptor budget.
    const IDLE_MAX: usize = 64;

    /// The idle pipes, with the size each was asked for.
    static IDLE: Mutex<Vec<Pipe>> = Mutex::new(Vec::new());

    /// A non-blocking pipe and its capacity.
    #[derive(Debug)]
    pub(super) struct Pipe {
        r: OwnedFd,
        w: OwnedFd,
        cap: usize,
        /// The capacity it was asked for (the proxy's `pipe_size`).
        asked: usize,
        /// Set when the kernel refused to splice these sockets (EINVAL): copy from then on.
        pub(super) refused: bool,
        /// Its two descriptors in the process's budget.
        _hold: Hold,
    }

    impl Pipe {
        /// An idle pipe asked for with `size`, else a new one if the descriptor budget has room;
        /// `Ok(None)` when it has none (copy for now), `Err` when the kernel makes no usable
        /// pipe (copy for good).
        pub(super) fn acquire(size: usize) -> io::Result<Option<Pipe>> {
            {
                let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(i) = idle.iter().position(|p| p.asked == size) {
                    return Ok(Some(idle.swap_remove(i)));
                }
            }
            let Some(hold) = crate::proxy::fd_limit::budget().try_hold_pipe() else {
                return Ok(None);
            };
            Pipe::new(size, hold).map(Some)
        }

        /// Gives an empty pipe back to the idle ones (closed when they are enough).
        pub(super) fn release(self) {
            if self.refused {
                return;
            }
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE_MAX {
                idle.push(self);
            }
        }

        fn new(size: usize, hold: Hold) -> io::Result<Pipe> {
            let (r, w) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
            let mut cap = rustix::pipe::fcntl_getpipe_size(&w)?;
            if cap != size {
                // Above the user's pipe quota or /proc/sys/fs/pipe-max-size the kernel says
                // no; the default capacity still works.
                if let Ok(c) = rustix::pipe::fcntl_setpipe_size(&w, size) {
                    cap = c;
                }
            }
            if cap < super::MIN_PIPE {
                return Err(io::Error::other(format!(
                    "the kernel granted a {cap}-byte pipe (per-user pipe quota reached?)"
                )));
            }
            Ok(Pipe {
                r,
                w,
                cap,
                asked: size,
                refused: false,
                _hold: hold,
            })
        }
    }

    const FLAGS: SpliceFlags = SpliceFlags::MOVE.union(SpliceFlags::NONBLOCK);

    /// What ended a wait of [`ready_or`].
    enum Woke {
        Ready,
        Deadline,
        Edit,
    }

    /// Waits for `ready`, the deadline (if any) or a fault edit.
    async fn ready_or(
        ready: impl Future<Output = io::Result<()>>,
        deadline: Option<Deadline>,
        edits: &mut tokio::sync::watch::Receiver<u64>,
    ) -> io::Result<Woke> {
        let timer = async {
            match deadline {
                Some(d) => sleep_until(d.at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            r = ready => r.map(|()| Woke::Ready),
            () = timer => Ok(Woke::Deadline),
            Ok(()) = edits.changed() => Ok(Woke::Edit),
        }
    }

    /// Relays through the pipe in `slot` (present at the call); while the source is quiet the
    /// empty pipe goes back to the idle ones, and is taken again (or another) when bytes come;
    /// with none to be had, hands back to the copying pump. `slot` holds the pipe (or none)
    /// at the return.
    pub(super) async fn relay(
        slot: &mut Option<Pipe>,
        lane: &Lane<'_>,
        budget: u64,
    ) -> Result<Handback, Stop> {
        let size = lane.proxy.config().pipe_size;
        let stats = lane.proxy.stats();
        let mut held = Held { stats, n: 0 };
        let mut moved = 0u64;
        let mut left = budget;
        let mut eof = false;
        let mut edits = lane.edits.clone();
        // Some(d) once the deadline fired: drain, then hand back for the cut.
        let mut fired: Option<Deadline> = None;
        loop {
            let Some(pipe) = slot.as_mut() else {
                return Ok(Handback::Copy { moved });
            };
            while held.n > 0 {
                let out = lane.dst.try_io(Interest::WRITABLE, || {
                    rustix::pipe::splice(&pipe.r, None, lane.dst, None, held.n, FLAGS)
                        .map_err(io::Error::from)
                });
                match out {
                    Ok(n) => {
                        held.sub(n);
                        lane.account(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        // Bytes in the pipe are due: a deadline waits for them.
                        lane.dst
                            .writable()
                            .await
                            .map_err(|e| Stop::Io(lane.dst_side(), e))?;
                    }
                    Err(e) => return Err(Stop::Io(lane.dst_side(), e)),
                }
            }
            if let Some(deadline) = fired {
                return Ok(Handback::Deadline { moved, deadline });
            }
            if eof {
                return Ok(Handback::Eof { moved });
            }
            if left == 0 || lane.proxy.fault_generation() != lane.generation {
                return Ok(Handback::Copy { moved });
            }
            if let Some(d) = lane.deadline.filter(|d| d.at <= Instant::now()) {
                fired = Some(d);
                continue;
            }
            let want = usize::try_from(left).unwrap_or(usize::MAX).min(pipe.cap);
            let got = lane.src.try_io(Interest::READABLE, || {
                rustix::pipe::splice(lane.src, None, &pipe.w, None, want, FLAGS)
                    .map_err(io::Error::from)
            });
            match got {
                Ok(0) => eof = true,
                Ok(n) => {
                    held.add(n);
                    stats.received(lane.dir, n as u64);
                    moved += n as u64;
                    left -= n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Quiet, the pipe empty (strict alternation): it serves others meanwhile.
                    if let Some(p) = slot.take() {
                        p.release();
                    }
                    let r = ready_or(lane.src.readable(), lane.deadline, &mut edits).await;
                    match r.map_err(|e| Stop::Io(lane.src_side(), e))? {
                        Woke::Ready => {}
                        Woke::Deadline => fired = lane.deadline,
                        // The generation check above hands back.
                        Woke::Edit => {}
                    }
                    // None to be had: the loop's top hands back to the copying pump.
                    *slot = Pipe::acquire(size).ok().flatten();
                }
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                    if moved == 0 {
                        tracing::debug!("the kernel refused to splice this socket; copying");
                        pipe.refused = true;
                        return Ok(Handback::Copy { moved });
                    }
                    return Err(Stop::Io(lane.src_side(), e));
                }
                Err(e) => return Err(Stop::Io(lane.src_side(), e)),
            }
        }
    }
}
