//! Replaying a wire trace ([`super::trace`]) through fresh HTTP/1.1 observers: the
//! observations the audit would be fed, in the order they were released in the recorded run,
//! or with other read splits and another causally valid interleaving of the connections.
//!
//! What "causally valid" means here (what the proxy's pumps can really produce):
//! - one direction's observations stay in their order (one pump releases them, in order);
//! - a connection's `ConnOpened` comes before its observations, its `ConnClosed` after them;
//! - a connection opened after another's cut comes after that `Cut` (the pump records a cut
//!   before the client can see it: before the RST or FIN, before the bytes of a clean end);
//! - within a connection, anything else may come in any order: the pump that released a
//!   request may run after the other pump released the response, its events and the cut;
//! - across connections, an observation may come after another connection's observation
//!   released at most [`OVERTAKE`] later (a client acts on bytes once it has them, and a
//!   pump records what it wrote right after the write: only a preempted thread delays it;
//!   see [`OVERTAKE`]).
//!
//! Other read splits: a direction's bytes are shown to its observer in random chunks (as small
//! as one byte), each delivered whole up to the recorded delivery (and never past the recorded
//! cut); the cut is made in the chunk that holds its point, which reaches on past it when the
//! recorded run read past it (bytes read, never delivered); then the recorded clean end, cut
//! and EOF. A direction with dropped ranges keeps its recorded
//! calls. Each observation carries the time of the recorded call that stands for the one that
//! released it; an observation that arrives after a later one takes the later time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::trace::{Call, Entry, Trace};
use crate::audit::rules::RESEND_HOLD;
use crate::vocab::Direction;
use crate::wire::http1::observer_pair;
use crate::wire::{CutPoint, Observation, ObservationSink, WireObserver};

/// An observation with its release position in the recorded run and its time.
type Tagged = (usize, Duration, Observation);

/// Collects what a pair of observers releases, tagged with the call being replayed.
#[derive(Default)]
struct Collector {
    inner: Mutex<(Vec<Tagged>, usize, Duration)>,
}

impl Collector {
    fn tag(&self, idx: usize, at: Duration) {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (g.1, g.2) = (idx, at);
    }

    fn take(&self) -> Vec<Tagged> {
        std::mem::take(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner).0)
    }
}

impl ObservationSink for Collector {
    fn record(&self, obs: Observation) {
        let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let (idx, at) = (g.1, g.2);
        g.0.push((idx, at, obs));
    }
}

/// One recorded call: its index in the trace, its time, the call.
type Rec = (usize, Duration, Call);

/// What one connection left in the trace.
#[derive(Default)]
struct ConnTrace {
    up: Vec<Rec>,
    down: Vec<Rec>,
    opened: Option<(usize, Duration, Observation)>,
    closed: Option<(usize, Duration, Observation)>,
    cuts: Vec<(usize, Duration, Observation)>,
}

/// Replays one direction's calls on `obs`: verbatim when `rng` is `None` or the direction
/// dropped bytes, else with random read splits. Returns the point of its cut, if it was cut.
fn drive(
    obs: &mut dyn WireObserver,
    calls: &[Rec],
    col: &Collector,
    rng: Option<&mut ChaCha8Rng>,
) -> Option<(usize, Duration, CutPoint)> {
    let dropped = calls.iter().any(|c| matches!(c.2, Call::Dropped(..)));
    let Some(rng) = rng.filter(|_| !dropped) else {
        let mut cut = None;
        for (idx, at, call) in calls {
            col.tag(*idx, *at);
            match call {
                Call::Observe(b) => {
                    obs.observe(b);
                }
                Call::Delivered(x) => obs.delivered_through(*x),
                Call::Dropped(a, b) => obs.dropped(*a, *b),
                Call::CleanEndAt(x) => {
                    obs.clean_end_at(*x);
                }
                Call::CutAt(x) => cut = Some((*idx, *at, obs.cut_at(*x))),
                Call::Eof => obs.eof(),
            }
        }
        return cut;
    };
    // The bytes, where each recorded read began, and the recorded deliveries.
    let mut bytes = Vec::new();
    let mut reads = Vec::new();
    let mut marks = Vec::new();
    for (idx, at, call) in calls {
        match call {
            Call::Observe(b) => {
                reads.push((bytes.len() as u64, *idx, *at));
                bytes.extend_from_slice(b);
            }
            Call::Delivered(x) => marks.push((*x, *idx, *at)),
            _ => {}
        }
    }
    let len = bytes.len() as u64;
    let cut_at = calls.iter().find_map(|c| match c.2 {
        Call::CutAt(x) => Some(x),
        _ => None,
    });
    let delivered = marks.iter().map(|m| m.0).max().unwrap_or(0);
    let delivered = cut_at.map_or(delivered, |x| delivered.min(x));
    let limit = cut_at.unwrap_or(len).min(len);
    let mut bounds = Vec::new();
    let mut pos = 0u64;
    while pos < limit {
        let step = match rng.random_range(0..10u8) {
            0..=4 => rng.random_range(1..=8u64),
            5..=7 => rng.random_range(9..=200u64),
            _ => rng.random_range(201..=4096u64),
        };
        pos = (pos + step).min(limit);
        bounds.push(pos);
    }
    if cut_at.is_some() && len > limit {
        // The cut is made in the read that holds its point (a pump decides on the chunk it
        // holds), which reaches on past it: where that read starts is what varies.
        bounds.pop();
    }
    if bounds.last().is_none_or(|&b| b < len) {
        bounds.push(len);
    }
    let mut start = 0u64;
    let mut through = 0u64;
    for end in bounds {
        let r = reads.partition_point(|r| r.0 <= start).saturating_sub(1);
        if let Some(&(_, idx, at)) = reads.get(r) {
            col.tag(idx, at);
        }
        obs.observe(&bytes[start as usize..end as usize]);
        let d = end.min(delivered);
        if d > through {
            through = d;
            if let Some(&(_, idx, at)) = marks.iter().find(|m| m.0 >= d) {
                col.tag(idx, at);
            }
            obs.delivered_through(d);
        }
        start = end;
    }
    let mut cut = None;
    for (idx, at, call) in calls {
        col.tag(*idx, *at);
        match call {
            Call::CleanEndAt(x) => {
                obs.clean_end_at(*x);
            }
            Call::CutAt(x) => cut = Some((*idx, *at, obs.cut_at(*x))),
            Call::Eof => obs.eof(),
            _ => {}
        }
    }
    cut
}

/// The recorded `Cut` of `dir` with the point the replayed observer described.
fn cut_obs(rec: &Observation, point: CutPoint) -> Observation {
    match rec {
        Observation::Cut {
            conn,
            direction,
            action,
            point: p,
        } => Observation::Cut {
            conn: *conn,
            direction: *direction,
            action: *action,
            point: CutPoint {
                tls_end: p.tls_end,
                outage_ms: p.outage_ms,
                by: p.by,
                ..point
            },
        },
        other => other.clone(),
    }
}

/// How much later than an observation another connection's observation may have been
/// released and still reach the audit before it: 5 ms. A pump's thread preempted between its
/// write and its record delays its observations past another connection's (measured: a
/// resume's answer 1.1 ms behind the re-send the client made on reading it). The audit's
/// verdicts hold within the re-send rule's hold ([`RESEND_HOLD`], which must exceed this: an
/// answer released with the re-send reaches the audit at most `OVERTAKE` after it).
pub const OVERTAKE: Duration = Duration::from_millis(5);

const _: () = assert!(OVERTAKE.as_nanos() < RESEND_HOLD.as_nanos());

/// One stream of the merge: its connection, its items, in order, and what must come before
/// its first.
struct Lane {
    conn: u64,
    items: Vec<Tagged>,
    next: usize,
    /// What must be emitted first: (lane, items of it).
    after: Vec<(usize, usize)>,
}

/// The observations the audit is fed when `trace` is replayed: with `seed` `None`, the
/// recorded reads in the recorded release order; with a seed, random read splits and a random
/// causally valid interleaving (see the module doc). Times are non-decreasing.
pub fn replay(trace: &Trace, seed: Option<u64>) -> Vec<(Duration, Observation)> {
    let mut conns: BTreeMap<u64, ConnTrace> = BTreeMap::new();
    for (idx, (at, entry)) in trace.entries.iter().enumerate() {
        match entry {
            Entry::Call { conn, dir, call } => {
                let c = conns.entry(*conn).or_default();
                let lane = if *dir == Direction::Upstream {
                    &mut c.up
                } else {
                    &mut c.down
                };
                lane.push((idx, *at, call.clone()));
            }
            Entry::Conn(obs) => {
                let obs = &**obs;
                let (conn, slot) = match obs {
                    Observation::ConnOpened { conn, .. } => (*conn, 0),
                    Observation::ConnClosed { conn } => (*conn, 1),
                    Observation::Cut { conn, .. } => (*conn, 2),
                    _ => continue,
                };
                let c = conns.entry(conn).or_default();
                let item = (idx, *at, obs.clone());
                match slot {
                    0 => c.opened = Some(item),
                    1 => c.closed = Some(item),
                    _ => c.cuts.push(item),
                }
            }
        }
    }
    let mut rng = seed.map(ChaCha8Rng::seed_from_u64);
    // Per connection: lanes up, down (cuts at their ends), and its open and close.
    let mut lanes: Vec<Lane> = Vec::new();
    let mut per_conn = Vec::new();
    for (&conn, c) in &conns {
        let col = Arc::new(Collector::default());
        let (mut u, mut d) = observer_pair(conn, col.clone());
        let mut dirs = Vec::new();
        for (dir, calls, observer) in [
            (Direction::Upstream, &c.up, &mut u),
            (Direction::Downstream, &c.down, &mut d),
        ] {
            let point = drive(&mut **observer, calls, &col, rng.as_mut());
            let mut items = col.take();
            let recorded = c.cuts.iter().find(
                |(_, _, o)| matches!(o, Observation::Cut { direction, .. } if *direction == dir),
            );
            if let Some((idx, at, rec)) = recorded {
                match point {
                    Some((_, _, p)) => items.push((*idx, *at, cut_obs(rec, p))),
                    None => items.push((*idx, *at, rec.clone())),
                }
            }
            dirs.push(items);
        }
        per_conn.push((conn, dirs));
    }
    if rng.is_none() {
        let mut all: Vec<Tagged> = Vec::new();
        for c in conns.values() {
            all.extend(c.opened.iter().cloned());
            all.extend(c.closed.iter().cloned());
        }
        for (_, dirs) in per_conn {
            all.extend(dirs.into_iter().flatten());
        }
        // Stable: a call's observations keep their order.
        all.sort_by_key(|t| t.0);
        return all.into_iter().map(|(_, at, o)| (at, o)).collect();
    }
    // Lanes: [opened], up, down, [closed] per connection.
    // (trace index of a cut, its lane); (trace index of an open, its lane).
    let mut cut_lane: Vec<(usize, usize)> = Vec::new();
    let mut opened_lane: Vec<(usize, usize)> = Vec::new();
    for ((conn, dirs), c) in per_conn.into_iter().zip(conns.values()) {
        let open = lanes.len();
        lanes.push(Lane {
            conn,
            items: c.opened.iter().cloned().collect(),
            next: 0,
            after: Vec::new(),
        });
        let opens = usize::from(c.opened.is_some());
        if let Some(o) = &c.opened {
            opened_lane.push((o.0, open));
        }
        for items in dirs {
            for t in &items {
                if matches!(t.2, Observation::Cut { .. }) {
                    cut_lane.push((t.0, lanes.len()));
                }
            }
            lanes.push(Lane {
                conn,
                items,
                next: 0,
                after: vec![(open, opens)],
            });
        }
        let (u, d) = (open + 1, open + 2);
        let (nu, nd) = (lanes[u].items.len(), lanes[d].items.len());
        lanes.push(Lane {
            conn,
            items: c.closed.iter().cloned().collect(),
            next: 0,
            after: vec![(open, opens), (u, nu), (d, nd)],
        });
    }
    // A connection opened after a cut waits for that cut.
    for &(open_idx, open_lane) in &opened_lane {
        for &(cut_idx, lane) in &cut_lane {
            if cut_idx < open_idx {
                let n = lanes[lane].items.len();
                lanes[open_lane].after.push((lane, n));
            }
        }
    }
    let Some(rng) = rng.as_mut() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut clock = Duration::ZERO;
    loop {
        let head = |l: &Lane| l.items.get(l.next).map(|t| t.1);
        let ready: Vec<usize> = (0..lanes.len())
            .filter(|&i| {
                let Some(at) = head(&lanes[i]) else {
                    return false;
                };
                lanes[i].after.iter().all(|&(l, n)| lanes[l].next >= n)
                    && lanes.iter().all(|o| {
                        o.conn == lanes[i].conn || head(o).is_none_or(|t| t + OVERTAKE >= at)
                    })
            })
            .collect();
        if ready.is_empty() {
            break;
        }
        let pick = ready[rng.random_range(0..ready.len())];
        let lane = &mut lanes[pick];
        let (_, at, obs) = lane.items[lane.next].clone();
        lane.next += 1;
        clock = clock.max(at);
        out.push((clock, obs));
    }
    out
}
