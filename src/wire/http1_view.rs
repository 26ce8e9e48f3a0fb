//! The per-chunk view of the downstream observer: what it learned about one chunk's cut
//! points (positions, event facts, framing spots, owning responses), kept for every chunk not
//! yet wholly delivered, and the description of a cut at any raw offset from those views.
//!
//! Invariants: a view covers raw cut points `start..=start + len`; a cut point at a chunk's
//! start is described by the newest view that classifies it (a class waiting for the next byte
//! is reported by the chunk that brings it), else by the chunk before.

use std::collections::VecDeque;
use std::sync::Arc;

use super::http1::ReqInfo;
use super::http1_body::ChunkSpot;
use super::http1_clean::Spot;
use super::position::SseClass;
use super::sse_class::Classified;
use super::{ChunkPositions, CutPoint};

/// The response (and its request) that bytes from cut point `from` on belong to.
#[derive(Clone)]
pub(super) struct Owner {
    pub(super) from: usize,
    pub(super) seq: u64,
    pub(super) sse: bool,
    /// Raw offset of the body's first byte (just after the head).
    pub(super) body_start: u64,
    /// Raw offset just after the body's last byte, once the body ended.
    pub(super) ended: Option<u64>,
    pub(super) req: Option<Arc<ReqInfo>>,
    pub(super) session: Option<String>,
}

/// What the observer learned about one chunk's cut points: enough to describe a cut (or a
/// clean end) anywhere in it. Kept for every chunk not yet wholly delivered, so a cut that
/// falls in an earlier chunk than the last observed one (a deadline with slices queued) is
/// described as exactly as one in the last chunk.
#[derive(Default)]
pub(super) struct ChunkView {
    /// Raw offset of the chunk's first byte.
    pub(super) start: u64,
    pub(super) len: usize,
    pub(super) positions: ChunkPositions,
    pub(super) run_facts: Vec<u32>,
    pub(super) classified: Classified,
    pub(super) spots: Vec<Spot>,
    pub(super) spot_at_start: Option<ChunkSpot>,
    /// The responses seen in this chunk, with the cut point from which they own the bytes.
    pub(super) owners: Vec<Owner>,
}

impl Owner {
    /// True if and only if this owner is what a chunk of the response with these facts,
    /// owned from its start, would name: `from` 0, not ended, the same request and session.
    pub(super) fn continues(
        &self,
        seq: u64,
        body_start: u64,
        sse: bool,
        req: &Option<Arc<ReqInfo>>,
        session: &Option<String>,
    ) -> bool {
        self.from == 0
            && self.ended.is_none()
            && self.seq == seq
            && self.body_start == body_start
            && self.sse == sse
            && match (&self.req, req) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
            && self.session == *session
    }
}

impl ChunkView {
    pub(super) fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    pub(super) fn clear(&mut self) {
        self.clear_but_owners();
        self.positions.streams.clear();
        self.owners.clear();
    }

    /// Empties the view but for its owners and stream spans, which the next chunk of the same
    /// response would name again (see `Http1Downstream::restart_view`).
    pub(super) fn clear_but_owners(&mut self) {
        self.positions.runs.clear();
        self.run_facts.clear();
        self.classified.clear();
        self.spots.clear();
    }

    pub(super) fn has_run_at(&self, k: usize) -> bool {
        self.positions
            .runs
            .iter()
            .any(|r| r.start <= k && k < r.end)
    }

    pub(super) fn owner_at(&self, delivered: usize) -> Option<&Owner> {
        self.owners.iter().rev().find(|o| o.from <= delivered)
    }
}

/// The chunk view and chunk cut point of raw cut point `raw`: the newest chunk that has a
/// class for it (a cut point at a chunk's start may be classified by the chunk before).
pub(super) fn view_at<'a>(
    view: &'a ChunkView,
    history: &'a VecDeque<ChunkView>,
    raw: u64,
) -> Option<(&'a ChunkView, usize)> {
    let mut fallback = None;
    for v in std::iter::once(view).chain(history.iter().rev()) {
        if v.start <= raw && raw <= v.end() {
            let k = (raw - v.start) as usize;
            if k > 0 || v.has_run_at(0) {
                return Some((v, k));
            }
            fallback = fallback.or(Some((v, k)));
        }
    }
    fallback
}

/// Describes the cut at raw offset `raw` from what the chunk views hold.
pub(super) fn describe(
    view: &ChunkView,
    history: &VecDeque<ChunkView>,
    raw: u64,
) -> (CutPoint, Option<Owner>) {
    let mut point = CutPoint {
        raw_offset: raw,
        ..CutPoint::default()
    };
    let Some((v, delivered)) = view_at(view, history, raw) else {
        return (point, None);
    };
    // An exchange whose body ended at or before the cut point does not own it: the bytes after
    // it (the next response's head) belong to no exchange yet, and a cut exactly at its end
    // took nothing from it, whichever read holds them (the view of a later read does not
    // know the ended response at all).
    let owner = v
        .owner_at(delivered)
        .filter(|o| o.ended.is_none_or(|e| raw < e))
        .cloned();
    if let Some(owner) = &owner {
        point.exchange = Some(owner.seq);
        point.session = owner.session.clone();
        if let Some(r) = &owner.req {
            point.request = Some(format!("{} {}", r.method, super::redact::target(&r.path)));
            point.rpc_id = r.rpc_id.get().cloned().flatten();
        }
    }
    // Outside an SSE body: how much of the response's body (framing included) went out.
    if let Some(o) = owner.as_ref().filter(|o| !o.sse) {
        let end = o.ended.map_or(raw, |e| e.min(raw));
        point.body_bytes = Some(end.saturating_sub(o.body_start));
    }
    fill_run(
        &mut point,
        &v.positions,
        &v.run_facts,
        &v.classified,
        delivered,
    );
    (point, owner)
}

/// Fills `point` with what the run holding chunk cut point `delivered` says (class, payload
/// offset, event, ids, torn bytes, data line), if a run of `positions` holds it; `run_facts`
/// index `classified.facts` per run. Shared by the HTTP/1.1 and HTTP/2 observers.
pub(super) fn fill_run(
    point: &mut CutPoint,
    positions: &ChunkPositions,
    run_facts: &[u32],
    classified: &Classified,
    delivered: usize,
) {
    let runs = &positions.runs;
    let i = runs.partition_point(|r| r.end <= delivered);
    if let Some(run) = runs.get(i).filter(|r| r.start <= delivered) {
        let payload = if run.class == SseClass::ChunkFraming {
            run.payload_offset
        } else {
            run.payload_offset + (delivered - run.start) as u64
        };
        point.class = Some(run.class);
        point.llm = run.llm;
        point.payload_offset = Some(payload);
        point.event_index = Some(run.event_index);
        if let Some(f) = run_facts
            .get(i)
            .and_then(|&f| classified.facts.get(f as usize))
        {
            point.pending_id = classified.pending_id(f).map(str::to_string);
            let last = classified.last_id(f);
            point.last_committed_id = (!last.is_empty()).then(|| last.to_string());
            point.torn_bytes = if run.class.tears_event() {
                payload.saturating_sub(f.block_start)
            } else {
                0
            };
            point.data_line = (f.data_line > 0).then_some(f.data_line);
        }
    }
}
