//! What one h2 direction learned about the cut points of a read (the pump's chunk) or of one
//! `DATA` frame's body (the relay's frame): positions, event facts, and which stream's body
//! each byte range is — kept until those bytes are delivered, so a cut anywhere in them is
//! described exactly.
//!
//! Invariants: a view covers raw cut points `start..=start + len`; pieces are the `DATA` body
//! ranges of tracked streams in increasing order; a cut point is a stream's if and only if it
//! lies in one of its pieces (ends included): frame headers, padding and other frames belong to
//! no exchange.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::wire::http1::ReqInfo;
use crate::wire::http1_view::fill_run;
use crate::wire::sse_class::Classified;
use crate::wire::{ChunkPositions, CutPoint};

/// A stream's exchange as the views name it (one allocation per response, shared by its
/// pieces).
#[derive(Debug)]
pub(super) struct Exchange {
    pub(super) stream: u32,
    pub(super) req: Arc<ReqInfo>,
    pub(super) session: Option<String>,
    pub(super) sse: bool,
}

/// Body bytes `from..to` (view offsets) of a stream, with the body bytes before them.
#[derive(Debug, Clone)]
pub(super) struct Piece {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) body_before: u64,
    pub(super) ex: Arc<Exchange>,
}

#[derive(Default)]
pub(super) struct View {
    pub(super) start: u64,
    pub(super) len: usize,
    pub(super) positions: ChunkPositions,
    pub(super) run_facts: Vec<u32>,
    pub(super) classified: Classified,
    pub(super) pieces: Vec<Piece>,
}

impl View {
    pub(super) fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// Empties the view for the bytes from raw offset `start`, keeping its allocations.
    pub(super) fn restart(&mut self, start: u64, len: usize) {
        self.start = start;
        self.len = len;
        self.positions.clear();
        self.run_facts.clear();
        self.classified.clear();
        self.pieces.clear();
    }

    fn has_run_at(&self, k: usize) -> bool {
        self.positions
            .runs
            .iter()
            .any(|r| r.start <= k && k < r.end)
    }
}

/// Describes the cut after exactly the bytes before raw offset `raw` were delivered, from the
/// newest view that classifies it (else the newest that covers it).
pub(super) fn describe(view: &View, history: &VecDeque<View>, raw: u64) -> CutPoint {
    let mut point = CutPoint {
        raw_offset: raw,
        ..CutPoint::default()
    };
    let mut found = None;
    for v in std::iter::once(view).chain(history.iter().rev()) {
        if v.start <= raw && raw <= v.end() {
            let k = (raw - v.start) as usize;
            if k > 0 || v.has_run_at(0) {
                found = Some((v, k));
                break;
            }
            found = found.or(Some((v, k)));
        }
    }
    let Some((v, k)) = found else {
        return point;
    };
    if let Some(p) = v.pieces.iter().rev().find(|p| p.from <= k && k <= p.to) {
        let ex = &p.ex;
        point.exchange = Some(u64::from(ex.stream));
        point.session = ex.session.clone();
        point.request = Some(format!(
            "{} {}",
            ex.req.method,
            crate::wire::redact::target(&ex.req.path)
        ));
        point.rpc_id = ex.req.rpc_id.get().cloned().flatten();
        if !ex.sse {
            point.body_bytes = Some(p.body_before + (k - p.from) as u64);
        }
    }
    fill_run(&mut point, &v.positions, &v.run_facts, &v.classified, k);
    point
}
