//! The HTTP/2 stream relay: carries an h2 connection frame by frame so that a fault can end one
//! stream (stream surgery) while the connection and its other streams keep flowing.
//!
//! Why beside the pumps: a byte pump can only cut the whole TCP connection. On HTTP/2 many
//! exchanges share it, and the failures users meet are per stream (`RST_STREAM` from an
//! intermediary, held response `HEADERS`, stalled flow control, `GOAWAY`). The relay reads
//! whole frames from both sockets, forwards each byte for byte unless a fault edits it, and
//! writes the frames a fault asks for.
//!
//! When it is used ([`wanted`]): the proxy observes HTTP (not `--observe bytes`), its faults
//! include a positioned one (an `sse_cut`, whatever its `scope`: the byte pumps cannot place a
//! cut inside an h2 stream's SSE body, so a `scope = "connection"` or `action = "fin"` cut is
//! the relay's too) or an h2 kind, and the connection speaks h2: the client's first bytes are the h2 preface (h2c with
//! prior knowledge) or TLS negotiated ALPN `h2`. Every other connection keeps the two pumps.
//!
//! Invariants:
//! - Untouched streams are byte-exact: a frame no fault edits leaves as it arrived, in order
//!   per direction; header blocks are never dropped or reordered (HPACK).
//! - Bounded memory per connection: one frame being read per direction (at most
//!   [`reader::MAX_FRAME`] payload bytes; a longer frame turns the direction into a byte relay),
//!   a write queue per direction of at most [`QUEUE_CAP`] bytes (the reader waits for room:
//!   backpressure), held frames at most [`hold::HOLD_CAP`], a stream table of at most
//!   [`streams::MAX_TRACKED`] streams.
//! - Byte faults (latency, bandwidth, Toxiproxy's toxics, …) apply to the frame bytes of their
//!   direction as they leave: their timing delays frames, their drops and cuts act on bytes as
//!   on any connection (a cut ends the connection). The fault list is the one in force when the
//!   connection was accepted: a live edit applies to h2 connections accepted after it.
//! - Flow control stays whole: every byte of server `DATA` the client never receives is
//!   credited back with a connection-level `WINDOW_UPDATE`.

mod batch;
mod core;
mod hold;
pub(crate) mod observer;
mod queue;
mod reader;
mod run;
mod streams;
mod surgery;

use std::sync::Mutex;

use futures_util::future::try_join;
use rand::SeedableRng;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio::time::Instant;

use self::core::{ByteChain, Core, Faults};
use self::observer::FrameObserver;
use self::queue::OutQueue;
use super::pump::Stop;
use super::state::{Proxy, Published};
use crate::fault::{ConnRng, conn_rng};
use crate::vocab::Direction;

/// Bytes of forwarded frames each direction's write queue holds at most (plus one frame).
pub(crate) const QUEUE_CAP: usize = 4 << 20;

/// How long after one writer reached a connection cut the other may still write what was
/// queued before it (and wait for the drain PING's acknowledgement, at most
/// [`queue::DRAIN_MAX`]): a peer that stopped reading cannot hold the cut back.
const DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// True if the fault list asks for the stream relay on h2 connections: a positioned fault
/// (of either scope) or an h2 kind.
pub(crate) fn wanted(list: &Published) -> bool {
    list.factories
        .iter()
        .any(|f| f.h2().is_some() || f.h2_body_cut().is_some())
}

/// Instantiates the faults of connection `id` for the relay, drawing from the connection RNG
/// in list order as the pumps' chains do.
fn build(proxy: &Proxy, id: u64) -> Faults {
    let cfg = proxy.config();
    let mut rng = conn_rng(cfg.seed, &cfg.name, id);
    let list = proxy.published();
    let now = Instant::now();
    let stats = proxy.stats();
    let (mut body, mut h2, mut up, mut down) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for f in list.factories.iter() {
        if let Some(h) = f.h2() {
            if let Some(fault) = h.instantiate_h2(&mut rng, now) {
                stats.activated(fault.kind());
                h2.push(fault);
            }
            continue;
        }
        let Some(fault) = f.instantiate(&mut rng, now) else {
            continue;
        };
        stats.activated(fault.kind());
        match (f.h2_body_cut(), f.direction()) {
            (Some(b), _) => body.push((fault, b)),
            (None, Direction::Upstream) => up.push(fault),
            (None, Direction::Downstream) => down.push(fault),
        }
    }
    let up_rng = ConnRng::from_rng(&mut rng);
    let down_rng = ConnRng::from_rng(&mut rng);
    Faults {
        body,
        h2,
        bytes: [
            ByteChain {
                faults: up,
                rng: up_rng,
                offset: 0,
            },
            ByteChain {
                faults: down,
                rng: down_rng,
                offset: 0,
            },
        ],
        rng,
    }
}

/// Relays connection `id` as h2 frames between `(client read, client write)` and `(upstream
/// read, upstream write)` until both directions ended, one failed, or a cut ended it.
pub(crate) async fn relay<CR, CW, UR, UW>(
    proxy: &Proxy,
    id: u64,
    observer: Box<dyn FrameObserver>,
    (cr, cw): (CR, CW),
    (ur, uw): (UR, UW),
) -> Result<(), Stop>
where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    UR: AsyncRead + Unpin,
    UW: AsyncWrite + Unpin,
{
    let to_server = OutQueue::with_stats(QUEUE_CAP, proxy.stats());
    let to_client = OutQueue::with_stats(QUEUE_CAP, proxy.stats());
    let changed = Notify::new();
    let faults = build(proxy, id);
    let core = Mutex::new(Core::new(
        id,
        proxy,
        [&to_server, &to_client],
        observer,
        faults,
    ));
    let acked = Notify::new();
    let c = (&core, proxy.stats());
    let readers = try_join(
        run::read(c, Direction::Upstream, cr, &to_server, (&changed, &acked)),
        run::read(c, Direction::Downstream, ur, &to_client, (&changed, &acked)),
    );
    let up_w = run::write(c, Direction::Upstream, uw, (&to_server, &acked));
    let down_w = run::write(c, Direction::Downstream, cw, (&to_client, &acked));
    // A cut ends both writers, each after what was queued for it (the server's after the drain
    // PING's acknowledgement), within [`DRAIN_GRACE`] of the first; the readers may still wait
    // on a socket then.
    let work = async {
        let mut readers = std::pin::pin!(readers);
        let (mut up_w, mut down_w) = (std::pin::pin!(up_w), std::pin::pin!(down_w));
        let (mut up, mut down, mut read) = (None, None, false);
        let mut grace_until = None;
        while up.is_none() || down.is_none() {
            let grace = async {
                match grace_until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                w = &mut up_w, if up.is_none() => up = Some(w?),
                w = &mut down_w, if down.is_none() => down = Some(w?),
                r = &mut readers, if !read => {
                    r?;
                    read = true;
                }
                () = grace => break,
            }
            let cut = matches!(up, Some(Some(_))) || matches!(down, Some(Some(_)));
            if cut && grace_until.is_none() {
                grace_until = Some(Instant::now() + DRAIN_GRACE);
            }
        }
        match down.flatten().or(up.flatten()) {
            Some(action) => Err(Stop::Cut(action)),
            None if read => Ok(()),
            None => readers.await.map(|_| ()),
        }
    };
    tokio::select! {
        r = work => r,
        () = run::timers(&core, &changed) => Ok(()),
    }
}
