//! Faults: pure decisions about one direction of one connection.
//!
//! A fault does no I/O and is not async. Given a chunk (its bytes, its stream offset, its arrival
//! time and its SSE positions, if any), the connection's RNG and the clock, it edits the chunk's
//! [`Plan`]: when each slice of the chunk may leave, which bytes are dropped, and whether the
//! connection is cut after some byte. The pump carries the plan out. Faults of one direction form
//! a chain; each sees the plan the previous ones made.
//!
//! Invariants of a plan: slices are in byte order, do not overlap, and their departure times never
//! decrease (order on the wire is kept); a cut at `k` removes every byte at or after `k`.

pub mod bandwidth;
pub mod buffer;
pub mod common;
pub mod flow_stall;
pub mod goaway;
pub mod h2;
pub mod h2_kind;
pub mod hold_headers;
pub mod idle;
pub mod keys;
pub mod kind;
pub mod latency;
pub mod limit_data;
pub mod outage;
pub mod refuse_streams;
pub mod registry;
pub mod reset;
pub mod slicer;
pub mod slow_close;
pub mod sse_cut;
pub mod sse_cut_h2;
pub mod stall;
pub mod timeout;
pub mod toxiproxy;

use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::vocab::{CutAction, Direction};
use crate::wire::ChunkPositions;

/// A chunk as the fault chain sees it.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    /// The bytes read from the source.
    pub bytes: &'a [u8],
    /// Stream offset of `bytes[0]` in this direction (bytes read before this chunk).
    pub offset: u64,
    /// When the chunk was read.
    pub arrived: Instant,
    /// The direction of the pump.
    pub direction: Direction,
    /// SSE positions of the chunk's cut points, when the observer found an SSE body in it.
    pub positions: Option<&'a ChunkPositions>,
}

/// A contiguous part of a chunk with the earliest time it may be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// First byte (chunk-relative).
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Earliest departure time.
    pub at: Instant,
}

/// A cut decided by a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Chunk bytes delivered before the cut (`0..=len`).
    pub at: usize,
    /// How the connection ends.
    pub action: CutAction,
    /// After the cut, refuse or hold new connections of this proxy for this long (the
    /// documents' outage window), if set.
    pub outage: Option<Duration>,
    /// The fault kind that decided the cut (for records and metrics).
    pub by: &'static str,
}

/// What happens to one chunk. Reused across chunks: no allocation per chunk once warm.
#[derive(Debug, Default)]
pub struct Plan {
    slices: Vec<Slice>,
    cut: Option<Cut>,
}

impl Plan {
    /// Resets the plan to "send the whole chunk of `len` bytes at `at`".
    pub fn reset(&mut self, len: usize, at: Instant) {
        self.slices.clear();
        self.cut = None;
        if len > 0 {
            self.slices.push(Slice {
                start: 0,
                end: len,
                at,
            });
        }
    }

    /// The slices to write, in order.
    pub fn slices(&self) -> &[Slice] {
        &self.slices
    }

    /// Mutable access for faults that re-time or re-split slices; they must keep the plan's
    /// invariants (see the module doc).
    pub fn slices_mut(&mut self) -> &mut Vec<Slice> {
        &mut self.slices
    }

    /// The cut, if any fault decided one.
    pub fn cut(&self) -> Option<Cut> {
        self.cut
    }

    /// Cuts after `cut.at` chunk bytes; the earliest cut of the chain wins.
    pub fn cut_at(&mut self, cut: Cut) {
        if self.cut.is_some_and(|c| c.at <= cut.at) {
            return;
        }
        self.slices.retain_mut(|s| {
            if s.start >= cut.at {
                return false;
            }
            s.end = s.end.min(cut.at);
            true
        });
        self.cut = Some(cut);
    }

    /// Delays every byte at or after chunk offset `from` until at least `until` (a stall);
    /// splits the slice that contains `from`.
    pub fn delay_from(&mut self, from: usize, until: Instant) {
        if let Some(i) = self
            .slices
            .iter()
            .position(|s| s.start < from && from < s.end)
        {
            let tail = Slice {
                start: from,
                end: self.slices[i].end,
                at: self.slices[i].at,
            };
            self.slices[i].end = from;
            self.slices.insert(i + 1, tail);
        }
        for s in self.slices.iter_mut().filter(|s| s.start >= from) {
            s.at = s.at.max(until);
        }
    }

    /// Drops every byte of the chunk (a blackhole).
    pub fn drop_all(&mut self) {
        self.slices.clear();
    }
}

/// What a fault wants when no data flows: a time at which the connection ends by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// When.
    pub at: Instant,
    /// How the connection ends then.
    pub action: CutAction,
    /// The fault kind.
    pub by: &'static str,
}

/// How much of a direction may pass a fault without being shown to it (the zero-copy relay
/// moves such bytes socket to socket; the fault never sees them as chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unseen {
    /// Every chunk must be shown: the fault alters, delays, splits or drops bytes (the default).
    Never,
    /// The bytes before this absolute stream offset need not be shown; the chunk holding the
    /// byte at the offset must be. A fault that cuts after byte `n` returns `Before(n - 1)`, so
    /// the cut fires as soon as that byte arrives, as it would on the copying path.
    Before(u64),
    /// No byte needs to be shown: the fault acts only through [`Fault::deadline`] or
    /// [`Fault::on_eof`], which the relay honours on every path.
    Always,
}

/// One fault instance on one direction of one connection.
pub trait Fault: Send {
    /// The kind's name as in profiles (`latency`, `reset`, …).
    fn kind(&self) -> &'static str;

    /// Edits the plan of one chunk.
    fn on_chunk(&mut self, chunk: &Chunk<'_>, plan: &mut Plan, rng: &mut ConnRng);

    /// A time at which the connection ends even if no data flows (timeout, reset after a time).
    fn deadline(&self) -> Option<Deadline> {
        None
    }

    /// The source sent EOF at `now`; returns the earliest time the EOF may be passed on.
    fn on_eof(&mut self, now: Instant) -> Instant {
        now
    }

    /// Which bytes may pass without [`Fault::on_chunk`] seeing them. The default, `Never`, is
    /// right for every fault that edits plans; only faults that do nothing to the bytes before
    /// a known offset (or act by time alone) say more.
    fn unseen(&self) -> Unseen {
        Unseen::Never
    }

    /// The fault first applies at stream offset `offset` of its direction (a live edit added it
    /// mid-stream, or re-made it after a change): byte counts it keeps (`limit_data`, `reset`
    /// after N bytes, a `stall` at a byte) start there. Called once, before the first chunk;
    /// default: nothing to move.
    fn rebase(&mut self, offset: u64) {
        let _ = offset;
    }

    /// A live edit changed this fault's definition: the state that still means the same under
    /// the new definition (handed to the new instance's [`Fault::take_over`]). Default: none;
    /// the new instance starts from the connection's start time and the stream offsets alone.
    fn hand_over(&mut self) -> Option<Box<dyn std::any::Any + Send>> {
        None
    }

    /// Takes the state a previous instance of the same fault handed over (ignored when it is
    /// not this kind's).
    fn take_over(&mut self, state: Box<dyn std::any::Any + Send>) {
        let _ = state;
    }
}

/// Makes a fault for each new connection (and decides, with `probability`, whether it fires on
/// that connection at all).
pub trait FaultFactory: Send + Sync {
    /// The kind's name.
    fn kind(&self) -> &'static str;
    /// The direction the fault acts on.
    fn direction(&self) -> Direction;
    /// A new instance for one connection, or `None` when it does not fire there.
    fn instantiate(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn Fault>>;

    /// Like [`FaultFactory::instantiate`], with the connection's probability draw kept across
    /// live edits: `draw` is the draw made earlier for this fault on this connection (`None`:
    /// make it now). Returns the draw used (`None` for factories without one) and the instance.
    fn instantiate_drawn(
        &self,
        draw: Option<f64>,
        rng: &mut ConnRng,
        now: Instant,
    ) -> (Option<f64>, Option<Box<dyn Fault>>) {
        let _ = draw;
        (None, self.instantiate(rng, now))
    }

    /// The fault's identity across live edits (a toxic's or a profile fault's name); `None`
    /// for unnamed factories, which are identified by kind, direction and rank.
    fn name(&self) -> Option<&str> {
        None
    }

    /// Equal fingerprints mean the same definition (a live edit leaves such a fault alone).
    /// Default: the factory's address, so only the same factory object is "unchanged".
    fn fingerprint(&self) -> String {
        format!("{:p}", std::ptr::from_ref(self).cast::<()>())
    }

    /// On an HTTP/2 connection the stream relay carries: `Some` if this fault decides on each
    /// stream's `DATA` bodies with their SSE positions (`sse_cut`), and what its cuts end there;
    /// `None` (the default) for a byte fault, which the relay applies to the frame bytes of its
    /// direction as they leave.
    fn h2_body_cut(&self) -> Option<h2::BodyCut> {
        None
    }

    /// The HTTP/2 fault this factory makes, if it is an h2 kind (see [`h2`]); default `None`.
    fn h2(&self) -> Option<&dyn h2::H2FaultFactory> {
        None
    }
}

/// A factory with a name: the identity a live edit matches faults by (see
/// [`FaultFactory::name`]). Every other method is the inner factory's.
pub struct Named {
    name: String,
    inner: std::sync::Arc<dyn FaultFactory>,
}

/// Names `inner` (a toxic's or a profile fault's name).
pub fn named(
    name: impl Into<String>,
    inner: std::sync::Arc<dyn FaultFactory>,
) -> std::sync::Arc<dyn FaultFactory> {
    std::sync::Arc::new(Named {
        name: name.into(),
        inner,
    })
}

impl FaultFactory for Named {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn direction(&self) -> Direction {
        self.inner.direction()
    }

    fn instantiate(&self, rng: &mut ConnRng, now: Instant) -> Option<Box<dyn Fault>> {
        self.inner.instantiate(rng, now)
    }

    fn instantiate_drawn(
        &self,
        draw: Option<f64>,
        rng: &mut ConnRng,
        now: Instant,
    ) -> (Option<f64>, Option<Box<dyn Fault>>) {
        self.inner.instantiate_drawn(draw, rng, now)
    }

    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }

    fn fingerprint(&self) -> String {
        self.inner.fingerprint()
    }

    fn h2_body_cut(&self) -> Option<h2::BodyCut> {
        self.inner.h2_body_cut()
    }

    fn h2(&self) -> Option<&dyn h2::H2FaultFactory> {
        self.inner.h2()
    }
}

/// The per-connection random stream: one seed reproduces every decision of a run.
pub type ConnRng = ChaCha8Rng;

/// Derives the RNG of connection `index` of proxy `proxy` from the run's `seed`.
///
/// Stable across runs and platforms (FNV-1a of the name, then ChaCha8 seeded from the mix).
pub fn conn_rng(seed: u64, proxy: &str, index: u64) -> ConnRng {
    let h = crate::units::fnv1a(proxy.as_bytes());
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&h.to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    key[24..].copy_from_slice(b"tearline");
    ChaCha8Rng::from_seed(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    fn plan_of(len: usize, at: Instant) -> Plan {
        let mut p = Plan::default();
        p.reset(len, at);
        p
    }

    #[test]
    fn cut_truncates_slices_and_earliest_cut_wins() {
        let t = Instant::now();
        let mut p = plan_of(100, t);
        let cut = |at| Cut {
            at,
            action: CutAction::Reset,
            outage: None,
            by: "test",
        };
        p.cut_at(cut(60));
        p.cut_at(cut(80));
        assert_eq!(
            p.slices(),
            &[Slice {
                start: 0,
                end: 60,
                at: t
            }]
        );
        p.cut_at(cut(10));
        assert_eq!(p.cut().map(|c| c.at), Some(10));
        assert_eq!(
            p.slices(),
            &[Slice {
                start: 0,
                end: 10,
                at: t
            }]
        );
    }

    #[test]
    fn delay_from_splits_and_keeps_order() {
        let t = Instant::now();
        let later = t + Duration::from_millis(5);
        let mut p = plan_of(10, t);
        p.delay_from(4, later);
        assert_eq!(
            p.slices(),
            &[
                Slice {
                    start: 0,
                    end: 4,
                    at: t
                },
                Slice {
                    start: 4,
                    end: 10,
                    at: later
                }
            ]
        );
    }

    #[test]
    fn same_seed_same_stream_and_names_differ() {
        let a: u64 = conn_rng(7, "api", 3).random();
        let b: u64 = conn_rng(7, "api", 3).random();
        let c: u64 = conn_rng(7, "api", 4).random();
        let d: u64 = conn_rng(7, "web", 3).random();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }
}
