//! The decisions of the stream relay for one h2 connection: every frame read from either side
//! passes here once, with the connection's faults, stream table, holds and observer, and
//! leaves as queue items (forwarded frames, edited frames, injected frames, credit, the end).
//!
//! Order of a frame's decisions: the observer reads it (positions of a `DATA` body); a server
//! `DATA` of a stream the relay cut is dropped and credited; the h2 faults give their verdict
//! and injections; the positioned faults (`sse_cut`) decide on a server `DATA` body, and a cut
//! there is carried out as stream surgery (`surgery`) or as a connection cut; what is forwarded
//! waits behind held frames as `hold` says, then the byte faults of its direction time it.
//!
//! Invariants: the core does no I/O and never waits (the readers, writers and the timer task
//! around it do); every frame is forwarded byte for byte unless a fault edits it; an
//! observation is recorded for every cut and every frame the relay writes on its own
//! (`StreamReset`, `GoAway` with `by_proxy`).

use bytes::Bytes;
use tokio::time::Instant;

use super::hold::{Holds, is_header_block};
use super::observer::FrameObserver;
use super::queue::{Out, OutQueue};
use super::reader::Piece;
use super::streams::Streams;
use super::surgery;
use crate::fault::h2::{
    BodyCut, CutScope, FrameView, H2Actions, H2Fault, Inject, StreamFacts, Verdict,
};
use crate::fault::{Chunk, ConnRng, Cut, Fault, Plan};
use crate::proxy::state::Proxy;
use crate::vocab::{CutAction, Direction};
use crate::wire::h2::frame::{HEADER_LEN, data_body, flags, goaway, rst_stream};
use crate::wire::h2::{ErrorCode, FrameHeader, FrameType, PREFACE};
use crate::wire::{ChunkPositions, CutPoint, Observation};

/// Index of a direction in the core's per-direction arrays.
pub(crate) fn ix(dir: Direction) -> usize {
    usize::from(dir == Direction::Downstream)
}

fn other(dir: Direction) -> Direction {
    match dir {
        Direction::Upstream => Direction::Downstream,
        Direction::Downstream => Direction::Upstream,
    }
}

/// The byte faults of one direction (latency, bandwidth, Toxiproxy toxics, …), applied to the
/// frame bytes as they leave.
pub(crate) struct ByteChain {
    pub(crate) faults: Vec<Box<dyn Fault>>,
    pub(crate) rng: ConnRng,
    /// Bytes of the direction shown to them so far.
    pub(crate) offset: u64,
}

/// The faults of one connection, as the relay splits them.
pub(crate) struct Faults {
    /// Positioned faults on the server's `DATA` bodies, with what their cuts end.
    pub(crate) body: Vec<(Box<dyn Fault>, BodyCut)>,
    /// HTTP/2 faults (both directions).
    pub(crate) h2: Vec<Box<dyn H2Fault>>,
    /// Byte faults, `[upstream, downstream]`.
    pub(crate) bytes: [ByteChain; 2],
    /// The RNG of the body and h2 faults.
    pub(crate) rng: ConnRng,
}

/// One connection's decisions.
pub(crate) struct Core<'a> {
    conn: u64,
    proxy: &'a Proxy,
    /// Destination queues: `[to the server, to the client]` (indexed by the direction frames
    /// travel).
    queues: [&'a OutQueue<'a>; 2],
    pub(crate) observer: Box<dyn FrameObserver>,
    faults: Faults,
    streams: Streams,
    held: [Holds; 2],
    actions: H2Actions,
    plan: Plan,
    /// A connection cut or close was queued: nothing more is read.
    pub(crate) ended: bool,
    /// A close an h2 fault asked for, not yet due.
    close: Option<(Instant, CutAction, &'static str)>,
    /// The direction went to bytes past a frame boundary (a frame over the reader's cap):
    /// nothing more may be written into it between its bytes.
    opaque: [bool; 2],
    /// A connection cut queued a drain `PING` to the server ([`Out::Drain`]): the server's
    /// reader watches for its acknowledgement after the end.
    pub(crate) draining: bool,
}

/// What the positioned faults decided on one body.
struct BodyDecision {
    cut: Cut,
    scope: BodyCut,
    last_at: Instant,
}

impl<'a> Core<'a> {
    pub(crate) fn new(
        conn: u64,
        proxy: &'a Proxy,
        queues: [&'a OutQueue<'a>; 2],
        observer: Box<dyn FrameObserver>,
        faults: Faults,
    ) -> Self {
        Core {
            conn,
            proxy,
            queues,
            observer,
            faults,
            streams: Streams::default(),
            held: [Holds::default(), Holds::default()],
            actions: H2Actions::default(),
            plan: Plan::default(),
            ended: false,
            close: None,
            opaque: [false; 2],
            draining: false,
        }
    }

    fn record(&self, obs: Observation) {
        if let Some(sink) = self.proxy.sink() {
            sink.record(obs);
        }
    }

    /// One piece read from `dir` at `now`.
    pub(crate) fn on_piece(&mut self, dir: Direction, piece: Piece, now: Instant) {
        match piece {
            Piece::Raw { bytes, raw } => {
                let end = raw + bytes.len() as u64;
                // Only the client preface (the first 24 bytes upstream) ends at a frame
                // boundary; any other raw piece leaves its direction between frames.
                let preface = dir == Direction::Upstream && end <= PREFACE.len() as u64;
                if !preface {
                    self.opaque[ix(dir)] = true;
                }
                self.emit(dir, bytes, Some(end), now);
            }
            Piece::Frame { frame, raw } => self.on_frame(dir, frame, raw, now),
        }
    }

    fn on_frame(&mut self, dir: Direction, frame: Bytes, raw: u64, now: Instant) {
        let Some(h) = FrameHeader::parse(&frame) else {
            return;
        };
        let raw_end = raw + frame.len() as u64;
        let payload = &frame[HEADER_LEN..];
        self.observer.frame(dir, raw, &h, payload);
        let before = self.streams.get(h.stream);
        let down_data = dir == Direction::Downstream && h.kind == FrameType::Data;
        if down_data && self.streams.is_cut(h.stream) {
            // A stream the relay cut: the client never sees its DATA; the server gets its
            // window back.
            self.streams.on_frame(dir, &h);
            self.credit(Direction::Upstream, h.len);
            self.observer.delivered_through(dir, raw_end);
            return;
        }
        // The h2 faults.
        let mut verdict = Verdict::Forward;
        let mut injects = std::mem::take(&mut self.actions.inject);
        injects.clear();
        if !self.faults.h2.is_empty() {
            let info = self.observer.info(h.stream);
            let facts = StreamFacts {
                info: info.as_deref(),
                open_streams: self.streams.open(),
                last_client_stream: self.streams.last_client,
                response_data_seen: before.data_seen,
                response_sse: self.observer.response_sse(h.stream),
                reset_by_proxy: before.reset_by_proxy,
            };
            let view = FrameView {
                direction: dir,
                header: h,
                payload,
            };
            for f in &mut self.faults.h2 {
                self.actions.clear();
                f.on_frame(&view, &facts, now, &mut self.faults.rng, &mut self.actions);
                if verdict == Verdict::Forward {
                    verdict = self.actions.verdict;
                }
                injects.append(&mut self.actions.inject);
                if let Some((at, action)) = self.actions.close {
                    let by = f.kind();
                    if self.close.is_none_or(|c| at < c.0) {
                        self.close = Some((at, action, by));
                    }
                }
            }
        }
        // The positioned faults, on a server DATA body.
        let decision = match (down_data, verdict, data_body(&h, payload)) {
            (true, Verdict::Forward, Some(body)) if !self.faults.body.is_empty() => decide_body(
                &mut self.faults.body,
                &mut self.faults.rng,
                &mut self.plan,
                &payload[body],
                raw,
                now,
                self.observer.positions(),
            ),
            _ => None,
        };
        self.streams.on_frame(dir, &h);
        if let Some(d) = decision {
            self.cut_in(&h, frame, raw_end, d, now);
        } else {
            match verdict {
                Verdict::Drop if droppable(&h) => {
                    if h.kind == FrameType::Data {
                        self.credit(other(dir), h.len);
                    }
                    self.observer.delivered_through(dir, raw_end);
                }
                Verdict::Hold(hold) => {
                    self.held[ix(dir)].push(frame, h.stream, h.kind, Some(raw_end), Some(hold));
                }
                Verdict::Drop | Verdict::Forward => {
                    if verdict == Verdict::Drop {
                        tracing::info!(kind = ?h.kind, "h2 relay: a fault asked to drop a frame that must pass; forwarded");
                    }
                    self.pass(dir, &h, frame, raw_end, now);
                }
            }
        }
        for inj in injects.drain(..) {
            self.inject(inj, now);
        }
        self.actions.inject = injects;
    }

    /// Forwards a frame, behind held frames that must go first.
    fn pass(&mut self, dir: Direction, h: &FrameHeader, frame: Bytes, raw_end: u64, now: Instant) {
        let d = ix(dir);
        if h.kind == FrameType::Data {
            self.held[d].on_data(h.stream);
            self.flush_held(dir, now);
        }
        if self.held[d].must_wait(h.stream, is_header_block(h.kind)) {
            self.held[d].push(frame, h.stream, h.kind, Some(raw_end), None);
        } else {
            self.emit(dir, frame, Some(raw_end), now);
        }
    }

    fn flush_held(&mut self, dir: Direction, now: Instant) {
        self.held[ix(dir)].due(now);
        while let Some(f) = self.held[ix(dir)].take_ready() {
            self.emit(dir, f.frame, f.raw_end, now);
        }
    }

    /// Queues bytes towards `dir`'s destination through that direction's byte faults.
    fn emit(&mut self, dir: Direction, bytes: Bytes, release: Option<u64>, now: Instant) {
        let q = self.queues[ix(dir)];
        let release = release.map(|r| (dir, r));
        let chain = &mut self.faults.bytes[ix(dir)];
        if chain.faults.is_empty() {
            q.push(Out::Bytes {
                bytes,
                at: now,
                counted: true,
                release,
            });
            return;
        }
        self.plan.reset(bytes.len(), now);
        let chunk = Chunk {
            bytes: &bytes,
            offset: chain.offset,
            arrived: now,
            direction: dir,
            positions: None,
        };
        for f in &mut chain.faults {
            f.on_chunk(&chunk, &mut self.plan, &mut chain.rng);
        }
        chain.offset += bytes.len() as u64;
        let n = self.plan.slices().len();
        let mut last = now;
        for (i, s) in self.plan.slices().iter().enumerate() {
            last = last.max(s.at);
            q.push(Out::Bytes {
                bytes: bytes.slice(s.start..s.end),
                at: s.at,
                counted: true,
                release: if i + 1 == n { release } else { None },
            });
        }
        if let Some(cut) = self.plan.cut() {
            let point = CutPoint::default();
            self.end_connection(dir, cut, point, last);
        }
    }

    /// A connection cut towards `dir`'s destination, after what is queued.
    fn end_connection(&mut self, dir: Direction, cut: Cut, point: CutPoint, at: Instant) {
        // HTTP/2 has no "clean end" of a connection's bytes: it closes with FIN.
        let action = match cut.action {
            CutAction::CleanEnd => CutAction::Fin,
            a => a,
        };
        let outage = cut.outage.map(|d| self.proxy.hold_new_connections(d));
        self.proxy.stats().cut(action);
        tracing::debug!(direction = %dir, action = action.as_str(), by = cut.by, "h2 connection cut");
        self.record(Observation::Cut {
            conn: self.conn,
            direction: dir,
            action,
            point: CutPoint {
                tls_end: self.proxy.config().tls.end_of(action),
                outage_ms: outage.map(crate::units::millis),
                by: Some(cut.by),
                h2_stream: None,
                ..point
            },
        });
        self.queues[ix(dir)].push(Out::Cut { action, at });
        // The other destination ends too, after what was queued for it. Toward the server,
        // requests forwarded just before the close could arrive with it, and a server drops
        // a stream whose frames came with the connection's end unprocessed (h2's server does):
        // the audit would have seen a call the server never got. So the server acknowledges a
        // PING after them first (unless that direction is a byte relay, where no frame may be
        // injected).
        let other = match dir {
            Direction::Upstream => Direction::Downstream,
            Direction::Downstream => Direction::Upstream,
        };
        if other == Direction::Upstream && !self.opaque[ix(other)] {
            self.draining = self.queues[ix(other)].push(Out::Drain);
        }
        self.queues[ix(other)].push(Out::Cut { action, at });
        self.ended = true;
    }

    /// Carries out a positioned fault's cut inside the server `DATA` frame `frame`.
    fn cut_in(
        &mut self,
        h: &FrameHeader,
        frame: Bytes,
        raw_end: u64,
        d: BodyDecision,
        now: Instant,
    ) {
        let payload = &frame[HEADER_LEN..];
        let Some(body) = data_body(h, payload) else {
            return;
        };
        let k = d.cut.at;
        let dir = Direction::Downstream;
        if d.scope.scope == CutScope::Connection || d.cut.action == CutAction::Fin {
            let torn = surgery::connection_cut(h, payload, body, k);
            let point = self.observer.cut_point(h.stream, k);
            // Every other SSE stream ends with the connection, delivered through its last
            // `DATA` body: each is recorded as cut there (before the connection's cut, which
            // ends what is left), so an event it tore is judged too, not only this stream's.
            for other in self.observer.stands(h.stream) {
                self.record(Observation::Cut {
                    conn: self.conn,
                    direction: dir,
                    action: match d.cut.action {
                        CutAction::CleanEnd => CutAction::Fin,
                        a => a,
                    },
                    point: CutPoint {
                        by: Some(d.cut.by),
                        ..other
                    },
                });
            }
            if !torn.is_empty() {
                self.emit(dir, Bytes::from(torn), None, now);
            }
            self.end_connection(dir, d.cut, point, d.last_at);
            return;
        }
        let cut = surgery::cut_data(h, payload, body, k, d.cut.action, d.scope.client_code);
        let point = self.observer.cut_point(h.stream, k);
        // The stream's events before the cut and its broken end are observed before the cut
        // itself, as on an HTTP/1.1 connection (the audit judges a cut of a known exchange);
        // the body is broken even when the client sees `END_STREAM`: the `Cut` says so.
        self.observer.ended_by_proxy(h.stream, false);
        let outage = d.cut.outage.map(|t| self.proxy.hold_new_connections(t));
        let action = d.cut.action;
        self.proxy.stats().cut(action);
        tracing::debug!(
            stream = h.stream,
            action = action.as_str(),
            by = d.cut.by,
            "h2 stream cut"
        );
        self.record(Observation::Cut {
            conn: self.conn,
            direction: dir,
            action,
            point: CutPoint {
                tls_end: None,
                outage_ms: outage.map(crate::units::millis),
                by: Some(d.cut.by),
                h2_stream: Some(u64::from(h.stream)),
                ..point
            },
        });
        // The bytes before the cut leave on time; the reset (or the clean end) when the fault
        // said (`stall_ms` later).
        let split = cut.to_client.len() - cut.end_len();
        let to_client = Bytes::from(cut.to_client);
        if split > 0 {
            self.emit(dir, to_client.slice(..split), Some(raw_end), now);
        } else {
            self.observer.delivered_through(dir, raw_end);
        }
        self.queues[ix(dir)].push(Out::Bytes {
            bytes: to_client.slice(split..),
            at: d.last_at,
            counted: false,
            release: None,
        });
        if !cut.clean {
            self.record_reset(dir, h.stream, d.scope.client_code);
        }
        if self.writable(Direction::Upstream) {
            let up = self.queues[ix(Direction::Upstream)];
            up.push(Out::Bytes {
                bytes: Bytes::copy_from_slice(&cut.to_server),
                at: now,
                counted: false,
                release: None,
            });
            up.credit(cut.credit);
            self.record_reset(Direction::Upstream, h.stream, ErrorCode::CANCEL);
        }
        self.streams.reset_by_proxy(h.stream);
    }

    fn record_reset(&self, to: Direction, stream: u32, code: ErrorCode) {
        self.record(Observation::StreamReset {
            conn: self.conn,
            seq: u64::from(stream),
            direction: to,
            code: code.0,
            by_proxy: true,
        });
    }

    /// True while frames may be written towards `to` (it did not go to bytes mid-frame); says
    /// so in the log when not.
    fn writable(&self, to: Direction) -> bool {
        let ok = !self.opaque[ix(to)];
        if !ok {
            tracing::debug!(direction = %to, "h2 relay: direction relayed as bytes; frame not written");
        }
        ok
    }

    /// Credits `n` bytes of connection window to the peer `to` writes to.
    fn credit(&self, to: Direction, n: u32) {
        if self.writable(to) {
            self.queues[ix(to)].credit(n);
        }
    }

    /// Writes a frame an h2 fault asked for.
    fn inject(&mut self, inj: Inject, now: Instant) {
        let to = match inj {
            Inject::RstStream { to, .. } | Inject::GoAway { to, .. } => to,
        };
        if !self.writable(to) {
            return;
        }
        let (to, bytes) = match inj {
            Inject::RstStream { to, stream, code } => {
                self.record_reset(to, stream, code);
                if to == Direction::Downstream {
                    self.streams.reset_by_proxy(stream);
                    self.observer.ended_by_proxy(stream, false);
                }
                (to, Bytes::copy_from_slice(&rst_stream(stream, code)))
            }
            Inject::GoAway {
                to,
                last_stream,
                code,
            } => {
                self.record(Observation::GoAway {
                    conn: self.conn,
                    direction: to,
                    last_stream: u64::from(last_stream),
                    code: code.0,
                    by_proxy: true,
                });
                (to, Bytes::copy_from_slice(&goaway(last_stream, code)))
            }
        };
        self.queues[ix(to)].push(Out::Bytes {
            bytes,
            at: now,
            counted: false,
            release: None,
        });
    }

    /// `dir`'s source ended at `now`: what it held leaves, then the half-close.
    pub(crate) fn on_eof(&mut self, dir: Direction, now: Instant) {
        self.held[ix(dir)].release_all();
        self.flush_held(dir, now);
        self.observer.eof(dir);
        let mut at = now;
        for f in &mut self.faults.bytes[ix(dir)].faults {
            at = at.max(f.on_eof(now));
        }
        self.queues[ix(dir)].push(Out::Eof { at });
    }

    /// The next time [`Core::on_timer`] has work.
    pub(crate) fn next_timer(&self) -> Option<Instant> {
        if self.ended {
            return None;
        }
        let h2 = self.faults.h2.iter().filter_map(|f| f.next_timer());
        let held = self.held.iter().filter_map(Holds::next_time);
        let deadlines = self
            .faults
            .bytes
            .iter()
            .flat_map(|c| c.faults.iter().filter_map(|f| f.deadline()))
            .map(|d| d.at);
        let close = self.close.map(|c| c.0);
        h2.chain(held).chain(deadlines).chain(close).min()
    }

    /// Runs what is due at `now`: h2 faults' timers, releases of held frames, byte faults'
    /// deadlines, a close.
    pub(crate) fn on_timer(&mut self, now: Instant) {
        if self.ended {
            return;
        }
        let mut injects = std::mem::take(&mut self.actions.inject);
        injects.clear();
        for f in &mut self.faults.h2 {
            if f.next_timer().is_some_and(|t| t <= now) {
                self.actions.clear();
                f.on_timer(now, &mut self.faults.rng, &mut self.actions);
                injects.append(&mut self.actions.inject);
                if let Some((at, action)) = self.actions.close
                    && self.close.is_none_or(|c| at < c.0)
                {
                    self.close = Some((at, action, f.kind()));
                }
            }
        }
        for inj in injects.drain(..) {
            self.inject(inj, now);
        }
        self.actions.inject = injects;
        for dir in [Direction::Upstream, Direction::Downstream] {
            self.flush_held(dir, now);
        }
        for dir in [Direction::Upstream, Direction::Downstream] {
            let due = self.faults.bytes[ix(dir)]
                .faults
                .iter()
                .filter_map(|f| f.deadline())
                .filter(|d| d.at <= now)
                .min_by_key(|d| d.at);
            if let Some(d) = due {
                let cut = Cut {
                    at: 0,
                    action: d.action,
                    outage: None,
                    by: d.by,
                };
                self.end_connection(dir, cut, CutPoint::default(), now);
                return;
            }
        }
        if let Some((at, action, by)) = self.close
            && at <= now
        {
            self.close = None;
            let cut = Cut {
                at: 0,
                action,
                outage: None,
                by,
            };
            // Both destinations get what was queued before the close, then the close.
            self.queues[ix(Direction::Upstream)].push(Out::Cut { action, at: now });
            self.end_connection(Direction::Downstream, cut, CutPoint::default(), now);
        }
    }
}

/// True for the frames a fault may drop (see [`Verdict::Drop`]).
fn droppable(h: &FrameHeader) -> bool {
    match h.kind {
        FrameType::Data | FrameType::WindowUpdate | FrameType::Priority => true,
        FrameType::Ping => !h.has(flags::ACK),
        FrameType::Unknown(_) => true,
        _ => false,
    }
}

/// Shows one server `DATA` body to the positioned faults, in order, each seeing the plan the
/// earlier ones made; the earliest cut wins, with the scope of the fault that decided it.
fn decide_body(
    body_faults: &mut [(Box<dyn Fault>, BodyCut)],
    rng: &mut ConnRng,
    plan: &mut Plan,
    body: &[u8],
    raw: u64,
    now: Instant,
    positions: Option<&ChunkPositions>,
) -> Option<BodyDecision> {
    plan.reset(body.len(), now);
    let chunk = Chunk {
        bytes: body,
        offset: raw,
        arrived: now,
        direction: Direction::Downstream,
        positions,
    };
    let mut scope = None;
    for (f, s) in body_faults.iter_mut() {
        let before = plan.cut();
        f.on_chunk(&chunk, plan, rng);
        if plan.cut() != before {
            scope = Some(*s);
        }
    }
    let cut = plan.cut()?;
    let last_at = plan.slices().iter().map(|s| s.at).max().unwrap_or(now);
    Some(BodyDecision {
        cut,
        scope: scope?,
        last_at,
    })
}

#[cfg(test)]
#[path = "core_tests.rs"]
mod tests;
