//! The I/O around [`Core`]: one reader and one writer per direction and a timer, as joined
//! futures of the connection's task.
//!
//! Invariants: a reader reads only while its destination queue has room (backpressure) and
//! stops once the core ended the connection (the server's reader then only looks for the
//! drain `PING`'s acknowledgement); a writer writes each item no earlier than its
//! time (what is due at once as one batch), flushes, and passes EOF on as a write shutdown (half-close) after every earlier item;
//! the relay ends when both directions ended (or one failed, or a cut was written to both
//! destinations: toward the server after its acknowledgement of the drain `PING`, see
//! [`super::queue::Out::Drain`]). The core's lock is never held across an await.

use std::sync::Mutex;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use super::batch::Batch;
use super::core::Core;
use super::queue::{DRAIN_MAX, DRAIN_PING, Next, Out, OutQueue};
use super::reader::{FrameReader, MAX_FRAME, Piece};
use crate::proxy::Stats;
use crate::proxy::pump::{Side, Stop};
use crate::vocab::{CutAction, Direction};
use crate::wire::h2::frame::{self, HEADER_LEN, flags, window_update};
use crate::wire::h2::{FrameHeader, FrameType};

fn lock<'a, 'b>(core: &'a Mutex<Core<'b>>) -> std::sync::MutexGuard<'a, Core<'b>> {
    core.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The side a direction reads from.
fn source(dir: Direction) -> Side {
    match dir {
        Direction::Upstream => Side::Client,
        Direction::Downstream => Side::Server,
    }
}

fn dest(dir: Direction) -> Side {
    match dir {
        Direction::Upstream => Side::Server,
        Direction::Downstream => Side::Client,
    }
}

/// Reads `dir`'s source as frames into the core until EOF, an error, or the end.
pub(crate) async fn read<R: AsyncRead + Unpin>(
    (core, stats): (&Mutex<Core<'_>>, &Stats),
    dir: Direction,
    mut src: R,
    room: &OutQueue<'_>,
    (changed, acked): (&Notify, &Notify),
) -> Result<(), Stop> {
    let mut reader = FrameReader::new(dir == Direction::Upstream, MAX_FRAME);
    let mut said_raw = false;
    loop {
        room.room().await;
        if lock(core).ended {
            break;
        }
        let piece = reader
            .next(&mut src)
            .await
            .map_err(|e| Stop::Io(source(dir), e))?;
        let now = Instant::now();
        {
            let mut c = lock(core);
            if c.ended {
                drop(c);
                if piece.as_ref().is_some_and(is_drain_ack) {
                    acked.notify_one();
                    return Ok(());
                }
                break;
            }
            match piece {
                Some(p) => {
                    stats.received(dir, p.len() as u64);
                    c.on_piece(dir, p, now);
                }
                None => {
                    c.on_eof(dir, now);
                    drop(c);
                    changed.notify_one();
                    return Ok(());
                }
            }
        }
        if reader.is_raw() && !said_raw {
            said_raw = true;
            tracing::debug!(direction = %dir, held = reader.held(), "h2 relay: byte relay");
        }
        changed.notify_one();
    }
    // The connection was cut. If the server owes the drain PING's acknowledgement, its frames
    // are read (and dropped: nothing reaches the client any more) until it comes, the server
    // closes, or the writer stops waiting.
    if dir == Direction::Downstream && lock(core).draining {
        loop {
            match reader.next(&mut src).await {
                Ok(Some(p)) if !is_drain_ack(&p) => continue,
                _ => break,
            }
        }
        acked.notify_one();
    }
    Ok(())
}

/// True for the server's acknowledgement of the relay's drain `PING`.
fn is_drain_ack(piece: &Piece) -> bool {
    let Piece::Frame { frame, .. } = piece else {
        return false;
    };
    FrameHeader::parse(frame).is_some_and(|h| {
        h.kind == FrameType::Ping
            && h.has(flags::ACK)
            && frame.get(HEADER_LEN..) == Some(&DRAIN_PING[..])
    })
}

/// Writes `q` to `dir`'s destination until EOF is passed on (`None`) or a cut ends the
/// connection (the cut's action, once every earlier item was written).
/// Everything due at one wake-up goes out as one batch ([`Batch`]): it is written when the
/// queue has nothing more due now, when it is full, and before any wait for an item's time.
pub(crate) async fn write<W: AsyncWrite + Unpin>(
    (core, stats): (&Mutex<Core<'_>>, &Stats),
    dir: Direction,
    mut dst: W,
    (q, acked): (&OutQueue<'_>, &Notify),
) -> Result<Option<CutAction>, Stop> {
    let io = |e| Stop::Io(dest(dir), e);
    let mut batch = Batch::default();
    // Writes the batch and settles it: stats, queue room, then the observer's releases.
    macro_rules! settle {
        () => {
            if !batch.is_empty() {
                let s = batch.write_to(&mut dst).await.map_err(io)?;
                stats.delivered(dir, s.bytes);
                q.written(s.counted);
                if !s.releases.is_empty() {
                    let mut c = lock(core);
                    for (d, raw) in s.releases {
                        c.observer.delivered_through(d, raw);
                    }
                }
            }
        };
    }
    loop {
        let next = match q.try_next() {
            Some(next) => next,
            None => {
                settle!();
                q.next().await
            }
        };
        match next {
            Next::Credit(n) => {
                batch.push(Bytes::copy_from_slice(&window_update(0, n)), false, None);
            }
            Next::Item(Out::Bytes {
                bytes,
                at,
                counted,
                release,
            }) => {
                if at > Instant::now() {
                    settle!();
                    sleep_until(at).await;
                }
                batch.push(bytes, counted, release);
            }
            Next::Item(Out::Eof { at }) => {
                settle!();
                sleep_until(at).await;
                // The peer may be gone already; its half-close then has no one to reach.
                let _ = dst.shutdown().await;
                return Ok(None);
            }
            Next::Item(Out::Cut { action, at }) => {
                settle!();
                sleep_until(at).await;
                let _ = dst.flush().await;
                return Ok(Some(action));
            }
            Next::Item(Out::Drain) => {
                settle!();
                let ping = frame::ping(DRAIN_PING);
                if dst.write_all(&ping).await.is_ok() && dst.flush().await.is_ok() {
                    let _ = tokio::time::timeout(DRAIN_MAX, acked.notified()).await;
                }
            }
        }
        if batch.full() {
            settle!();
        }
    }
}

/// Runs what the core has due by time; never returns.
pub(crate) async fn timers(core: &Mutex<Core<'_>>, changed: &Notify) {
    loop {
        let notified = changed.notified();
        let next = lock(core).next_timer();
        match next {
            Some(t) => {
                tokio::select! {
                    () = sleep_until(t) => lock(core).on_timer(Instant::now()),
                    () = notified => {}
                }
            }
            None => notified.await,
        }
    }
}
