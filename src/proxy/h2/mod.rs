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

use futures_util::future::try_join4;
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
    let c = (&core, proxy.stats());
    let work = try_join4(
        run::read(c, Direction::Upstream, cr, &to_server, &changed),
        run::write(c, Direction::Upstream, uw, &to_server),
        run::read(c, Direction::Downstream, ur, &to_client, &changed),
        run::write(c, Direction::Downstream, cw, &to_client),
    );
    tokio::select! {
        r = work => r.map(|_| ()),
        () = run::timers(&core, &changed) => Ok(()),
    }
}
