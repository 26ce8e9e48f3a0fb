//! One direction of one connection: read a chunk, let the observer and the fault chain plan it,
//! carry the plan out.
//!
//! Invariants:
//! - Order: bytes are written in the order they were read. The fast path (nothing queued, every
//!   slice due now) writes straight from the read buffer; otherwise slices are copied once into a
//!   FIFO queue and written at their `at` (never before, and never before an earlier slice).
//! - Reading continues while queued slices wait for their time, so a latency shifts the stream
//!   in time without capping its throughput; it stops when the queue holds
//!   `max_inflight_bytes` (backpressure), so memory stays bounded by
//!   `buffer_size + max_inflight_bytes + buffer_size` per direction; it also stops while the
//!   proxy is over its memory budget (`max_buffered_bytes`, across connections) while its own
//!   queue holds anything, so queues stop growing there; a direction with an empty queue still
//!   reads (its chunk is written at once), so undelayed connections keep flowing.
//! - The read buffer is lent by the proxy (`readbuf`): a TCP direction waits for readability
//!   without one, takes it to read, and gives it back after a chunk that did not fill it, so
//!   an idle direction holds none and many busy ones share the proxy's read budget.
//! - The rare, large states (a cut, EOF, the zero-copy relay) are awaited boxed, so each
//!   connection's task is sized by the read/write loop (0.9 KB less per connection).
//! - A cut delivers every slice planned before it, on time, then ends the direction with an
//!   error value the connection task turns into RST or FIN; EOF is passed on (write shutdown)
//!   after every queued byte and no earlier than every fault's `on_eof` time.
//! - The observer hears what happened, by raw offset, exactly as [`WireObserver`] documents
//!   (the delivery contract): `delivered_through` after every write (fast path and queue),
//!   `dropped` for every planned gap, for slices a deadline cut discards and for slices a kill
//!   discards (when the pump is dropped), and `cut_at` the offset after the last byte written.
//! - `bytes_buffered` counts the bytes this pump holds (read chunk in flight + queue) plus what
//!   its observer reports holding (`held_bytes`, synced after each chunk and queued write).
//! - Writes go straight to the socket (no user-space write buffer, TCP_NODELAY set), so a chunk
//!   is on the wire when its write returns and there is nothing left to flush when reads go
//!   pending. Each write is followed by `flush` (free on TCP halves) so a TLS writer never holds
//!   a record back.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::time::{Instant, sleep_until};

use super::chain::Chain;
use super::engine::{self, Handback};
use super::splice::{Lane, SpliceHalf, ZeroCopy};
use super::state::Proxy;
use super::stats::ResidenceBatch;
use crate::fault::{Chunk, ConnRng, Cut, Deadline, Plan};
use crate::vocab::{CutAction, Direction};
use crate::wire::{CleanEnd, Observation, WireObserver};

/// Why a direction ended early (its `Err`): the connection must be cut or was broken.
#[derive(Debug)]
pub(crate) enum Stop {
    /// A fault cut the connection; close both sides this way.
    Cut(CutAction),
    /// Reading or writing failed on this side; the other side is reset.
    Io(Side, std::io::Error),
}

/// One of the connection's two sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The accepted socket.
    Client,
    /// The socket to the upstream.
    Server,
}

impl Side {
    /// The socket a pump of direction `dir` reads from.
    pub(crate) fn source_of(dir: Direction) -> Side {
        match dir {
            Direction::Upstream => Side::Client,
            Direction::Downstream => Side::Server,
        }
    }

    /// The socket a pump of direction `dir` writes to.
    pub(crate) fn sink_of(dir: Direction) -> Side {
        match dir {
            Direction::Upstream => Side::Server,
            Direction::Downstream => Side::Client,
        }
    }
}

struct Timed {
    bytes: Bytes,
    at: Instant,
    /// Raw offset of the slice's first byte.
    start: u64,
}

enum Event {
    Read(usize),
    Deadline(Deadline),
    Drained,
}

/// One direction's pump. Borrowed socket halves: dropping the pump never closes a socket (the
/// connection task decides how sockets end). `R`/`W` are TCP halves by default; TLS
/// connections pump through `tokio::io::split` halves of their TLS streams.
pub(crate) struct Pump<'a, R = ReadHalf<'a>, W = WriteHalf<'a>> {
    pub(crate) proxy: &'a Proxy,
    pub(crate) conn: u64,
    pub(crate) dir: Direction,
    pub(crate) src: R,
    pub(crate) dst: W,
    pub(crate) chain: Chain,
    pub(crate) rng: ConnRng,
    pub(crate) observer: Box<dyn WireObserver>,
    /// Bytes this direction delivered (for the connection's close log).
    pub(crate) delivered: &'a AtomicU64,
    /// The read buffer, lent by the proxy (`readbuf`): no capacity while none is held. Read
    /// into as spare capacity; after a read, `buf[..n]` is the chunk.
    buf: Vec<u8>,
    plan: Plan,
    queue: VecDeque<Timed>,
    queued: usize,
    /// Bytes of the current read chunk not yet written or queued.
    held: usize,
    read_total: u64,
    /// Raw offset after the last byte written (the delivered-through offset).
    written_to: u64,
    /// The observer's held bytes last added to `bytes_buffered`.
    observer_held: usize,
    residence: ResidenceBatch,
    zero_copy: ZeroCopy,
    /// Wakes a waiting pump when the fault list changes (the edit applies at once).
    edits: tokio::sync::watch::Receiver<u64>,
}

impl<'a, R: AsyncRead + SpliceHalf + Unpin, W: AsyncWrite + SpliceHalf + Unpin> Pump<'a, R, W> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        proxy: &'a Proxy,
        conn: u64,
        dir: Direction,
        src: R,
        dst: W,
        chain: Chain,
        rng: ConnRng,
        observer: Box<dyn WireObserver>,
        delivered: &'a AtomicU64,
    ) -> Self {
        Pump {
            buf: Vec::new(),
            proxy,
            conn,
            dir,
            src,
            dst,
            chain,
            rng,
            observer,
            delivered,
            plan: Plan::default(),
            queue: VecDeque::new(),
            queued: 0,
            held: 0,
            read_total: 0,
            written_to: 0,
            observer_held: 0,
            residence: ResidenceBatch::new(),
            zero_copy: ZeroCopy::new(proxy.config().zero_copy),
            edits: proxy.fault_edits(),
        }
    }

    /// Runs the direction to its end: `Ok` after EOF was passed on. Takes `&mut self` so that
    /// the connection's future holds the pump once (see `conn::Halves::run`); the pump lives
    /// until both directions ended, so EOF gives the read buffer back at once, and dropping
    /// the pump (the other direction failed, or the connection was killed) releases the rest.
    pub(crate) async fn run(&mut self) -> Result<(), Stop> {
        loop {
            self.refresh_chain();
            if let Some(back) = self.zero_copy().await? {
                match back {
                    Handback::Copy { .. } => continue,
                    Handback::Eof { .. } => return Box::pin(self.eof()).await,
                    Handback::Deadline { deadline, .. } => {
                        return Err(Box::pin(self.deadline_cut(deadline)).await);
                    }
                }
            }
            let deadline = self.earliest_deadline();
            let event = if self.queue.is_empty() && deadline.is_none() {
                if !self.take_buffer_when_readable().await {
                    continue;
                }
                self.buf.clear();
                let n = tokio::select! {
                    biased;
                    n = self.src.read_buf(&mut self.buf) => n,
                    Ok(()) = self.edits.changed() => continue,
                };
                Event::Read(n.map_err(|e| Stop::Io(self.src_side(), e))?)
            } else {
                self.wait(deadline).await?
            };
            match event {
                Event::Drained => continue,
                Event::Read(0) => return Box::pin(self.eof()).await,
                Event::Read(n) => {
                    self.chunk(n).await?;
                    self.settle_buffer(n);
                }
                Event::Deadline(d) => return Err(Box::pin(self.deadline_cut(d)).await),
            }
        }
    }

    /// Holds a read buffer once the source has bytes (or EOF, or an error) to read: an idle
    /// TCP direction waits without one. `false` when a fault edit came first (the caller
    /// re-plans). A source that is not a plain TCP half (TLS) takes its buffer at once.
    async fn take_buffer_when_readable(&mut self) -> bool {
        if self.buf.capacity() > 0 {
            return true;
        }
        if let Some(tcp) = self.src.tcp() {
            tokio::select! {
                biased;
                // An error is the read's to report.
                _ = tcp.readable() => {}
                Ok(()) = self.edits.changed() => return false,
            }
        }
        self.buf = self.proxy.read_bufs().take();
        true
    }

    /// After a chunk of `n` bytes was handled (written or queued: the buffer's bytes are no
    /// longer needed), gives the buffer back when the read did not fill it (the source is
    /// drained for now; only on TCP, whose readiness can be awaited without a buffer) or when
    /// it is oversized for the current number of busy directions.
    fn settle_buffer(&mut self, n: usize) {
        let cap = self.buf.capacity();
        let drained = n < cap && self.src.tcp().is_some();
        if cap > 0 && (drained || self.proxy.read_bufs().oversized(cap)) {
            self.give_buffer_back();
        }
    }

    /// Writes queued slices as they fall due while reading (if the budget allows) and watching
    /// the deadline; returns at the first read, the deadline, or an empty queue.
    async fn wait(&mut self, deadline: Option<Deadline>) -> Result<Event, Stop> {
        enum Timer {
            Write,
            Deadline(Deadline),
        }
        loop {
            // The earliest timer: the front slice, or the deadline when it comes first.
            let (at, timer) = match (self.queue.front().map(|t| t.at), deadline) {
                (Some(due), Some(d)) if d.at < due => (d.at, Timer::Deadline(d)),
                (Some(due), _) => (due, Timer::Write),
                (None, Some(d)) => (d.at, Timer::Deadline(d)),
                (None, None) => return Ok(Event::Drained),
            };
            // Backpressure: this direction's queue budget, and the proxy's memory budget — a
            // direction with an empty queue still relays (its chunk is written at once), so
            // connections no fault delays keep flowing while others fill the budget.
            let can_read = self.queued < self.proxy.config().max_inflight_bytes
                && (self.queued == 0 || !self.proxy.over_budget());
            if can_read && self.buf.capacity() == 0 {
                self.buf = self.proxy.read_bufs().take();
            }
            self.buf.clear();
            let read = tokio::select! {
                biased;
                () = sleep_until(at) => None,
                r = self.src.read_buf(&mut self.buf), if can_read => Some(r),
                // An edit may remove the deadline's fault or add an earlier one.
                Ok(()) = self.edits.changed() => return Ok(Event::Drained),
            };
            match (read, timer) {
                (Some(r), _) => {
                    return Ok(Event::Read(r.map_err(|e| Stop::Io(self.src_side(), e))?));
                }
                (None, Timer::Write) => self.write_front().await?,
                (None, Timer::Deadline(d)) => return Ok(Event::Deadline(d)),
            }
        }
    }

    /// Relays zero-copy while the engine allows it (see `engine`); `None` when the copying
    /// path must read the next chunk. Bytes moved count as one delivered, unobserved chunk.
    async fn zero_copy(&mut self) -> Result<Option<Handback>, Stop> {
        if !self.queue.is_empty() || !self.zero_copy.usable() {
            return Ok(None);
        }
        let (Some(src), Some(dst)) = (self.src.tcp(), self.dst.tcp()) else {
            return Ok(None);
        };
        let Some(budget) = engine::budget(&self.chain.faults, &*self.observer, self.read_total)
        else {
            return Ok(None);
        };
        // No pipe to be had (the descriptor budget keeps them for connections): copy this one.
        if !self.zero_copy.ready(self.proxy.config().pipe_size) {
            return Ok(None);
        }
        let lane = Lane {
            proxy: self.proxy,
            dir: self.dir,
            src,
            dst,
            delivered: self.delivered,
            generation: self.chain.generation,
            deadline: self.earliest_deadline(),
            edits: {
                let mut e = self.edits.clone();
                e.borrow_and_update();
                e
            },
        };
        let back = Box::pin(self.zero_copy.relay(lane, budget)).await?;
        let moved = back.moved();
        if moved > 0 {
            // Spliced bytes are read and written in one step: every one of them is delivered.
            self.read_total += moved;
            self.written_to = self.read_total;
            self.observer.passed(moved);
            self.observer.delivered_through(self.written_to);
        }
        Ok(Some(back))
    }

    /// The socket the pump reads from.
    fn src_side(&self) -> Side {
        Side::source_of(self.dir)
    }

    /// The socket the pump writes to.
    fn dst_side(&self) -> Side {
        Side::sink_of(self.dir)
    }

    /// Applies a live edit of the fault list to this direction's chain (see `chain`).
    fn refresh_chain(&mut self) {
        if self.proxy.fault_generation() == self.chain.generation {
            return;
        }
        let list = self.proxy.published();
        let stats = self.proxy.stats();
        let at = (Instant::now(), self.read_total);
        self.chain
            .rebuild(&list, self.dir, &mut self.rng, at, stats);
    }

    fn earliest_deadline(&self) -> Option<Deadline> {
        self.chain
            .faults
            .iter()
            .filter_map(|f| f.deadline())
            .min_by_key(|d| d.at)
    }

    async fn chunk(&mut self, n: usize) -> Result<(), Stop> {
        // An edit made while the read was pending applies to this chunk.
        self.refresh_chain();
        let now = Instant::now();
        let stats = self.proxy.stats();
        stats.buffer_add(n);
        self.held = n;
        let offset = self.read_total;
        self.read_total += n as u64;
        stats.received(self.dir, n as u64);
        let bytes = &self.buf[..n];
        let positions = self.observer.observe(bytes);
        self.plan.reset(n, now);
        if !self.chain.faults.is_empty() {
            let chunk = Chunk {
                bytes,
                offset,
                arrived: now,
                direction: self.dir,
                positions,
            };
            for f in &mut self.chain.faults {
                f.on_chunk(&chunk, &mut self.plan, &mut self.rng);
            }
        }
        self.report_gaps(offset, n);
        let fast = self.queue.is_empty() && self.plan.slices().iter().all(|s| s.at <= now);
        let result = if fast {
            self.write_direct(offset, now).await
        } else {
            for s in self.plan.slices() {
                let len = s.end - s.start;
                self.queue.push_back(Timed {
                    bytes: Bytes::copy_from_slice(&self.buf[s.start..s.end]),
                    at: s.at,
                    start: offset + s.start as u64,
                });
                self.queued += len;
                stats.buffer_add(len);
            }
            Ok(())
        };
        stats.buffer_sub(n);
        self.held = 0;
        self.sync_observer_gauge();
        result?;
        match self.plan.cut() {
            Some(cut) => Err(Box::pin(self.cut(cut)).await),
            None => Ok(()),
        }
    }

    /// Tells the observer which bytes of the chunk at raw `offset` (`n` bytes) the plan drops:
    /// gaps between slices and after the last one (bytes at or after a cut are not dropped but
    /// cut; the cut reports them).
    fn report_gaps(&mut self, offset: u64, n: usize) {
        let end = self.plan.cut().map_or(n, |c| c.at);
        let mut next = 0;
        for s in self.plan.slices() {
            if s.start > next {
                self.observer
                    .dropped(offset + next as u64, offset + s.start as u64);
            }
            next = s.end;
        }
        if end > next {
            self.observer
                .dropped(offset + next as u64, offset + end as u64);
        }
    }

    /// Writes the plan's slices of the chunk at raw `offset` straight from the read buffer.
    async fn write_direct(&mut self, offset: u64, now: Instant) -> Result<(), Stop> {
        let mut written = 0;
        for i in 0..self.plan.slices().len() {
            let s = self.plan.slices()[i];
            let r = self.dst.write_all(&self.buf[s.start..s.end]).await;
            r.map_err(|e| Stop::Io(self.dst_side(), e))?;
            written += s.end - s.start;
            self.written_to = offset + s.end as u64;
            self.observer.delivered_through(self.written_to);
        }
        // A no-op on TCP halves; a TLS writer may hold the last record until flushed.
        let r = self.dst.flush().await;
        r.map_err(|e| Stop::Io(self.dst_side(), e))?;
        if written > 0 {
            self.account(written);
            let done = Instant::now();
            self.residence
                .record(self.proxy.stats(), done.duration_since(now), done);
        }
        Ok(())
    }

    /// Moves the observer's held bytes into the `bytes_buffered` gauge.
    fn sync_observer_gauge(&mut self) {
        let now = self.observer.held_bytes();
        let stats = self.proxy.stats();
        if now > self.observer_held {
            stats.buffer_add(now - self.observer_held);
        } else if now < self.observer_held {
            stats.buffer_sub(self.observer_held - now);
        }
        self.observer_held = now;
    }

    fn account(&self, n: usize) {
        self.proxy.stats().delivered(self.dir, n);
        self.delivered.fetch_add(n as u64, Ordering::Relaxed);
    }

    async fn write_front(&mut self) -> Result<(), Stop> {
        let Some(t) = self.queue.pop_front() else {
            return Ok(());
        };
        let len = t.bytes.len();
        let mut r = self.dst.write_all(&t.bytes).await;
        if r.is_ok() {
            r = self.dst.flush().await;
        }
        self.queued -= len;
        self.proxy.stats().buffer_sub(len);
        if let Err(e) = r {
            self.observer.dropped(t.start, t.start + len as u64);
            return Err(Stop::Io(self.dst_side(), e));
        }
        self.account(len);
        self.written_to = t.start + len as u64;
        self.observer.delivered_through(self.written_to);
        self.sync_observer_gauge();
        Ok(())
    }

    /// Writes every queued slice at its time.
    async fn drain(&mut self) -> Result<(), Stop> {
        while let Some(at) = self.queue.front().map(|t| t.at) {
            sleep_until(at).await;
            self.write_front().await?;
        }
        Ok(())
    }

    async fn eof(&mut self) -> Result<(), Stop> {
        self.give_buffer_back();
        let now = Instant::now();
        self.observer.eof();
        let mut at = now;
        for f in &mut self.chain.faults {
            at = at.max(f.on_eof(now));
        }
        self.drain().await?;
        sleep_until(at).await;
        let r = self.dst.shutdown().await;
        // The peer may already be gone; a failed shutdown is no data loss.
        if let Err(e) = r {
            tracing::debug!(direction = %self.dir, error = %e, "shutdown after EOF failed");
        }
        Ok(())
    }

    async fn cut(&mut self, cut: Cut) -> Stop {
        if let Err(stop) = self.drain().await {
            return stop;
        }
        // The documents' outage: new connections wait until the window ends. The record names
        // the window this cut opened, not the profile's setting.
        let outage = cut.outage.map(|d| self.proxy.hold_new_connections(d));
        self.end_cleanly(cut.action, cut.by, outage).await
    }

    /// A fault's deadline fired: slices due by then leave, later ones are dropped, then the cut.
    async fn deadline_cut(&mut self, d: Deadline) -> Stop {
        while let Some(at) = self.queue.front().map(|t| t.at).filter(|at| *at <= d.at) {
            sleep_until(at).await;
            if let Err(stop) = self.write_front().await {
                return stop;
            }
        }
        self.discard_queue();
        self.end_cleanly(d.action, d.by, None).await
    }

    /// Throws the queued slices away and tells the observer they were dropped.
    fn discard_queue(&mut self) {
        if let Some(first) = self.queue.front().map(|t| t.start) {
            self.observer.dropped(first, self.read_total);
        }
        let stats = self.proxy.stats();
        stats.buffer_sub(self.queued);
        self.queued = 0;
        self.queue.clear();
    }

    /// Records the cut at the delivered-through offset, then, for a `clean-end` cut, writes the
    /// observer's clean end there; the action carried out is `fin` when no clean end exists
    /// there. The record comes first: once the client has the clean end it may reconnect, and
    /// the audit must know of the cut before it sees the reconnect, whatever the scheduling
    /// (as for a reset or FIN, which the connection carries out after the record).
    async fn end_cleanly(
        &mut self,
        action: CutAction,
        by: &'static str,
        outage: Option<Duration>,
    ) -> Stop {
        let tail = if action == CutAction::CleanEnd {
            self.observer.clean_end_at(self.written_to)
        } else {
            CleanEnd::default()
        };
        let action = if action == CutAction::CleanEnd && tail.is_empty() {
            CutAction::Fin
        } else {
            action
        };
        self.record_cut(action, by, outage);
        // Piece by piece: the filler (up to 16 MiB) is never built in memory.
        for piece in tail.pieces() {
            if let Err(e) = self.dst.write_all(piece).await {
                return Stop::Io(self.dst_side(), e);
            }
        }
        Stop::Cut(action)
    }

    fn record_cut(&mut self, action: CutAction, by: &'static str, outage: Option<Duration>) {
        self.proxy.stats().cut(action);
        tracing::debug!(direction = %self.dir, action = action.as_str(), by, "cut");
        if let Some(sink) = self.proxy.sink() {
            sink.record(Observation::Cut {
                conn: self.conn,
                direction: self.dir,
                action,
                point: crate::wire::CutPoint {
                    tls_end: self.proxy.config().tls.end_of(action),
                    outage_ms: outage.map(crate::units::millis),
                    by: Some(by),
                    ..self.observer.cut_at(self.written_to)
                },
            });
        }
    }
}

impl<R, W> Pump<'_, R, W> {
    /// Gives the read buffer (if one is held) back to the proxy.
    fn give_buffer_back(&mut self) {
        if self.buf.capacity() > 0 {
            self.proxy.read_bufs().give(std::mem::take(&mut self.buf));
        }
    }
}

impl<R, W> Drop for Pump<'_, R, W> {
    fn drop(&mut self) {
        // A kill (or the other direction's end) drops the future: queued bytes never leave.
        if let Some(first) = self.queue.front().map(|t| t.start) {
            self.observer.dropped(first, self.read_total);
        }
        let stats = self.proxy.stats();
        stats.buffer_sub(self.queued + self.held + self.observer_held);
        self.residence.flush(stats);
        self.give_buffer_back();
    }
}
