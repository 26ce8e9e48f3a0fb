//! Classification of SSE payload cut points: for every `k`, the [`SseClass`] of a cut that
//! delivers exactly the first `k` payload bytes, with the facts a cut record needs.
//!
//! It exists so that faults can aim at a position class and records can say what a cut tore.
//!
//! Invariants:
//! - Every payload cut point `0..=n` is classified exactly once, in increasing order, and its
//!   class and facts depend only on the payload bytes up to it plus at most ONE byte of
//!   lookahead; so the classification is identical under every chunking.
//! - The lookahead is used only after a value byte: the cut is `before-eol` if and only if the
//!   next byte is CR or LF, else `mid-value` (`mid-id` in an `id` value). When the next byte has
//!   not arrived, that one cut point stays pending and is classified by the next feed (or as
//!   not-before-eol by [`SseScanner::flush_pending`], which the HTTP observer calls when chunk
//!   framing, not payload, follows on the wire).
//! - A cut right after a CR that ends a line is `cr-lf` (field line) or `dispatch-cr-lf` (blank
//!   line ending an event) whether or not an LF follows: the client holds the same bytes, and a
//!   conformant client has already ended the line.
//!
//! Precedence: `bom` (inside the leading BOM) > `after-final` (once the final JSON-RPC response
//! was dispatched) > `mid-utf8` (inside a multi-byte character) > `priming` > the structural
//! class. `priming` covers cut points inside the stream's first event block while that block has
//! a recognised `id` field and no `data` value byte (the MCP priming event `id: X` + `data:`),
//! except its dispatching CR. `event_index` is the number of events dispatched before the cut.
//! `during-replay` is not produced here: the scanner does not know the request; the HTTP
//! observer maps these classes with `SseClass::on_resume` on a resume response.

use super::SseClass;
use super::position::LlmPos;
use super::sse::{Field, SseScanner};

/// Cut points `start..end` (payload offsets) of one class in one event with the same facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadRun {
    /// First cut point (payload bytes delivered).
    pub start: u64,
    /// One past the last cut point.
    pub end: u64,
    /// The class every cut point of the run hits.
    pub class: SseClass,
    /// Events dispatched before these cut points.
    pub event_index: u64,
    /// Index into [`Classified::facts`].
    pub facts: u32,
    /// The LLM position of these cut points (LLM streams only).
    pub llm: Option<LlmPos>,
}

/// What a cut at a run's points would leave, apart from the payload offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    pending_id: Option<(u32, u32)>,
    last_id: (u32, u32),
    /// Payload offset of the first byte of the event block in progress (or of the next one).
    pub block_start: u64,
    /// Number of `data` lines begun in the event in progress (0: none).
    pub data_line: u32,
}

/// The output of classifying feeds: runs and their facts. Clear it to reuse its allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classified {
    /// Runs in increasing order, without overlap or gap.
    pub runs: Vec<PayloadRun>,
    /// Facts referenced by runs.
    pub facts: Vec<Facts>,
    arena: String,
}

impl Classified {
    /// Empties the output, keeping allocations.
    pub fn clear(&mut self) {
        self.runs.clear();
        self.facts.clear();
        self.arena.clear();
    }

    /// The pending (uncommitted) id of the event in progress under `f`.
    pub fn pending_id(&self, f: &Facts) -> Option<&str> {
        f.pending_id
            .and_then(|(a, b)| self.arena.get(a as usize..b as usize))
    }

    /// The last committed event id under `f`.
    pub fn last_id(&self, f: &Facts) -> &str {
        self.arena
            .get(f.last_id.0 as usize..f.last_id.1 as usize)
            .unwrap_or("")
    }

    /// The run containing payload cut point `p`, if classified.
    pub fn run_at(&self, p: u64) -> Option<&PayloadRun> {
        let i = self.runs.partition_point(|r| r.end <= p);
        self.runs.get(i).filter(|r| r.start <= p)
    }
}

/// How the last cut point of a text segment is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Last {
    /// Like the others.
    Same,
    /// A line ending follows in the same feed.
    BeforeEol,
    /// The feed ended: the next byte decides.
    Pending,
}

/// Classification state carried by the scanner.
#[derive(Debug, Clone, Default)]
pub(super) struct Tracker {
    started: bool,
    next_point: u64,
    pending: Option<SseClass>,
    utf8_need: u8,
    last_line_id: bool,
    last_line_blank: bool,
    block_open: bool,
    blocks_done: u64,
    block_saw_id: bool,
    block_saw_data: bool,
    after_final: bool,
    block_start: u64,
    data_line: u32,
    dirty: bool,
    cur_facts: Option<u32>,
    /// The LLM position of the cut points classified now (kept by the scanner's LLM reader).
    pub(super) llm_mark: Option<LlmPos>,
    out: Classified,
}

impl Tracker {
    pub(super) fn begin(&mut self, out: &mut Classified) {
        std::mem::swap(&mut self.out, out);
        self.cur_facts = None;
    }

    pub(super) fn end(&mut self, out: &mut Classified) {
        std::mem::swap(&mut self.out, out);
    }

    pub(super) fn at_start(&mut self) -> bool {
        !std::mem::replace(&mut self.started, true)
    }

    pub(super) fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    pub(super) fn field_recognized(&mut self, f: Field) {
        match f {
            Field::Id => self.block_saw_id = true,
            Field::Data => {
                self.data_line += 1;
                self.dirty = true;
            }
            _ => {}
        }
    }

    pub(super) fn data_value_seen(&mut self) {
        self.block_saw_data = true;
    }

    pub(super) fn id_line_done(&mut self, valid: bool) {
        self.last_line_id = valid;
        self.dirty |= valid;
    }

    pub(super) fn other_line_done(&mut self) {
        self.last_line_id = false;
    }

    /// `data` field lines begun in the event block in progress.
    pub(super) fn data_lines(&self) -> u32 {
        self.data_line
    }

    pub(super) fn block_start(&self) -> u64 {
        self.block_start
    }

    pub(super) fn block_done(&mut self, ended_event: bool, pos: u64) {
        self.block_start = pos;
        if ended_event {
            self.blocks_done += 1;
        }
        self.block_saw_id = false;
        self.block_saw_data = false;
        self.last_line_id = false;
        self.block_open = false;
        self.data_line = 0;
        self.dirty = true;
    }

    pub(super) fn discard_pending(&mut self) {
        self.pending = None;
    }

    pub(super) fn final_seen(&mut self) {
        self.after_final = true;
    }
}

impl SseScanner {
    /// Classifies the pending cut point (if any) as not followed by a line ending: the HTTP
    /// observer calls this when chunk framing follows the payload on the wire, or at its end.
    pub fn flush_pending(&mut self, out: &mut Classified) {
        self.tr.begin(out);
        self.resolve_pending(false);
        self.tr.end(out);
    }

    /// Chunk framing follows the payload read so far: classifies the pending cut point (as
    /// [`SseScanner::flush_pending`]) and returns the index in `out` of the facts of the current
    /// state, for the framing's own cut points (the pending point's facts when it had one:
    /// resolving it changes no fact).
    pub fn framing_facts(&mut self, out: &mut Classified) -> u32 {
        self.tr.begin(out);
        self.resolve_pending(false);
        let i = self.snapshot_facts();
        self.tr.end(out);
        i
    }

    /// True if and only if the cut point after the last payload byte awaits its lookahead byte.
    pub fn is_pending(&self) -> bool {
        self.tr.pending.is_some()
    }

    pub(super) fn resolve_pending(&mut self, eol: bool) {
        if let Some(c) = self.tr.pending.take() {
            let class = if eol {
                self.overrides(SseClass::BeforeEol)
            } else {
                c
            };
            self.emit(self.tr.next_point, class);
        }
    }

    fn overrides(&self, base: SseClass) -> SseClass {
        if self.tr.after_final {
            return SseClass::AfterFinal;
        }
        let priming = self.tr.blocks_done == 0
            && self.in_event
            && self.tr.block_saw_id
            && !self.tr.block_saw_data;
        if priming && !matches!(base, SseClass::MidUtf8 | SseClass::DispatchCrLf) {
            return SseClass::Priming;
        }
        base
    }

    pub(super) fn mark_simple(&mut self, base: SseClass) {
        let c = self.overrides(base);
        self.emit(self.pos, c);
    }

    pub(super) fn mark_line_start(&mut self) {
        self.tr.last_line_blank = false;
        if !self.tr.block_open {
            self.tr.block_open = true;
            self.tr.block_start = self.pos;
            self.tr.dirty = true;
        }
    }

    /// After the CR or LF that ended a field or comment line (or the LF of a CRLF).
    pub(super) fn mark_line_end(&mut self, cr: bool) {
        self.tr.utf8_need = 0;
        let base = if cr {
            if self.in_event {
                SseClass::CrLf
            } else {
                SseClass::Boundary
            }
        } else if self.tr.last_line_blank || !self.in_event {
            SseClass::Boundary
        } else if self.tr.last_line_id {
            SseClass::AfterId
        } else {
            SseClass::BeforeDispatch
        };
        self.mark_simple(base);
    }

    /// After the CR or LF of a blank line.
    pub(super) fn mark_blank_end(&mut self, cr: bool, ended_event: bool) {
        self.tr.utf8_need = 0;
        self.tr.last_line_blank = true;
        let base = if cr && ended_event {
            SseClass::DispatchCrLf
        } else {
            SseClass::Boundary
        };
        self.mark_simple(base);
    }

    /// Classifies the cut points after each byte of `seg`, the text just consumed.
    pub(super) fn mark_text(&mut self, seg: &[u8], base: SseClass, last: Last) {
        if seg.is_empty() {
            return;
        }
        let base = self.overrides(base);
        let end = self.pos;
        if seg.is_ascii() {
            self.tr.utf8_need = 0;
            if last == Last::Same {
                self.emit(end, base);
                return;
            }
            self.emit(end - 1, base);
        } else {
            let first = end - seg.len() as u64;
            let mid_utf8 = self.overrides(SseClass::MidUtf8);
            for (j, &b) in seg.iter().enumerate() {
                self.tr.utf8_need = utf8_next(self.tr.utf8_need, b);
                let point = first + j as u64 + 1;
                if self.tr.utf8_need > 0 {
                    self.emit(point, mid_utf8);
                } else if point < end || last == Last::Same {
                    self.emit(point, base);
                }
            }
            if self.tr.utf8_need > 0 || last == Last::Same {
                return;
            }
        }
        match last {
            Last::BeforeEol => {
                let c = self.overrides(SseClass::BeforeEol);
                self.emit(end, c);
            }
            Last::Pending => self.tr.pending = Some(base),
            Last::Same => {}
        }
    }

    /// Classifies cut points `next_point..=upto` as `class`.
    pub(super) fn emit(&mut self, upto: u64, class: SseClass) {
        if upto < self.tr.next_point {
            return;
        }
        let facts = self.snapshot_facts();
        let start = self.tr.next_point;
        self.tr.next_point = upto + 1;
        let event_index = self.dispatched;
        if let Some(r) = self.tr.out.runs.last_mut()
            && r.end == start
            && r.class == class
            && r.event_index == event_index
            && r.facts == facts
            && r.llm == self.tr.llm_mark
        {
            r.end = upto + 1;
            return;
        }
        self.tr.out.runs.push(PayloadRun {
            start,
            end: upto + 1,
            class,
            event_index,
            facts,
            llm: self.tr.llm_mark,
        });
    }

    /// The facts of the cut points classified now: the last snapshot's index while nothing it
    /// holds changed (most calls: inlined, a test and a load), else a new snapshot.
    #[inline]
    fn snapshot_facts(&mut self) -> u32 {
        match self.tr.cur_facts {
            Some(i) if !self.tr.dirty => i,
            _ => self.new_facts(),
        }
    }

    /// A new snapshot of the facts (out of line: the common call stays small).
    #[inline(never)]
    fn new_facts(&mut self) -> u32 {
        let last = self.last_event_id.as_str();
        let pending = self.id_set.then_some(self.id_buf.as_str());
        let out = &mut self.tr.out;
        let a = out.arena.len() as u32;
        out.arena.push_str(last);
        let b = out.arena.len() as u32;
        let pending_id = pending.map(|p| {
            out.arena.push_str(p);
            (b, out.arena.len() as u32)
        });
        out.facts.push(Facts {
            pending_id,
            last_id: (a, b),
            block_start: self.tr.block_start,
            data_line: self.tr.data_line,
        });
        let i = (out.facts.len() - 1) as u32;
        self.tr.cur_facts = Some(i);
        self.tr.dirty = false;
        i
    }
}

/// Remaining continuation bytes of a UTF-8 character after byte `b`.
fn utf8_next(need: u8, b: u8) -> u8 {
    match b {
        0x00..=0x7F => 0,
        0x80..=0xBF => need.saturating_sub(1),
        0xC2..=0xDF => 1,
        0xE0..=0xEF => 2,
        0xF0..=0xF4 => 3,
        _ => 0,
    }
}
