//! The WHATWG `text/event-stream` scanner: bytes in, dispatched events out, incrementally.
//!
//! It exists so that the proxy, the lab server's tests and the load client all interpret an SSE
//! body exactly as the WHATWG algorithm does (PROTOCOL.md), whatever the read boundaries are.
//!
//! Invariants:
//! - Chunking never changes the result: feeding a stream whole, byte by byte, or split at any
//!   offset dispatches the same events with the same fields and leaves the same state.
//! - One leading BOM (EF BB BF) is stripped, only at payload byte 0, even when split across feeds.
//! - A line ends at CRLF, LF, or a CR not followed by LF. The line ends at the CR itself; an LF
//!   that follows it (in the same feed or the next) is swallowed, so a split CRLF is ONE line end
//!   and a CR at the very end of the stream has already ended its line before `finish()`.
//! - `id` values containing NUL are ignored; an empty `id` resets the buffer; the committed
//!   "last event ID string" changes only when a blank line dispatches (ids are sticky).
//! - `retry` is applied if and only if its value is one or more ASCII digits (an empty value has
//!   no integer to interpret and is ignored); values beyond `u64` saturate.
//! - At end of stream the event in progress (and a partial line) is discarded, never dispatched.
//! - No allocation or copy per byte: line ends are found with `memchr`, `data` values are
//!   appended to one reused buffer (the bounded scanner frees it between events once it grew
//!   past 512 bytes), names are matched in a fixed array.
//! - A bounded scanner ([`SseScanner::bounded`], the proxy's observer) keeps a `data` value
//!   only while it is short; of a longer one, its streaming hash, length and JSON-RPC facts
//!   (see `sse_data`). It gives up for
//!   good on a line longer than its line limit ([`SseScanner::gave_up`]): it then dispatches
//!   and classifies nothing more. Its memory does not depend on event or line size.
//!
//! Encoding: [`SseEvent::data`] is the raw bytes of the data buffer; consumers decode it lossily
//! (invalid UTF-8 → U+FFFD). Because line ends are ASCII, decoding each event's data lossily gives
//! exactly what decoding the whole stream first would. `event` and `id` values are decoded
//! lossily by the scanner. Classification of cut points (see `sse_class`) is optional and costs
//! nothing when unused.

use memchr::{memchr2, memchr3};

use super::SseClass;
use super::llm::{LlmEventFacts, LlmTracker};
use super::position::LlmPos;
use super::sse_class::{Classified, Last, Tracker};
use super::sse_data::DataBuf;
use crate::vocab::LlmApi;

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
const NAME_CAP: usize = 8;

/// The longest id text a bounded scanner reads from data longer than its head (a longer id:
/// no JSON-RPC facts for that event).
pub const ID_LIMIT: usize = 1024;

/// Where a dispatched event lies in the payload (classifying feeds only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSpan {
    /// Payload offset of the first byte of the event's block (comments before it included).
    pub start: u64,
    /// Payload offset after the line-end byte that dispatched it.
    pub end: u64,
}

/// One dispatched event, borrowed from the scanner's buffers for the duration of the callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The event type (`message` unless an `event` field set another non-empty value).
    pub event_type: &'a str,
    /// The data buffer without its final LF (raw bytes; decode lossily). From a bounded
    /// scanner, when `data_len` exceeds its head: the minimal JSON-RPC head of the data's facts
    /// (`{"id":7,"result":0}`), or empty.
    pub data: &'a [u8],
    /// This event's own `id` field (the value of the last valid `id` line of this event), if any.
    pub id: Option<&'a str>,
    /// The last event ID string after this dispatch (sticky across events).
    pub last_event_id: &'a str,
    /// Length of the whole data (a bounded scanner's `data` may be only its facts' head).
    pub data_len: u64,
    /// XXH3-64 of the whole data, when a bounded scanner computed it while streaming (`None`
    /// from a whole-data scanner: hash `data` if needed).
    pub data_hash: Option<u64>,
    /// How many `data` field lines the event had (on the wire).
    pub data_lines: u32,
    /// What the event contributed to an LLM answer, when the scanner follows an LLM stream
    /// ([`SseScanner::set_llm`]).
    pub llm: Option<&'a LlmEventFacts>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Line {
    /// At the first byte of a line.
    Start,
    /// Inside a field name.
    Name,
    /// Right after the colon; an optional space may follow.
    Colon,
    /// Inside a field value (possibly empty so far).
    Value,
    /// Inside a comment line.
    Comment,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Field {
    Data,
    Event,
    Id,
    Retry,
    Unknown,
}

/// Incremental WHATWG event-stream parser. See the module doc for its invariants.
#[derive(Debug, Clone)]
pub struct SseScanner {
    /// Bytes of the BOM matched so far at payload start; `None` once decided.
    pub(super) bom: Option<u8>,
    pub(super) pending_cr: bool,
    pub(super) line: Line,
    pub(super) field: Field,
    name: [u8; NAME_CAP],
    name_len: usize,
    /// Value of the current `event`/`id`/`retry` line.
    value: Vec<u8>,
    data: DataBuf,
    /// Bytes of the current line so far.
    line_len: u64,
    /// A line longer than this makes the scanner give up (bounded scanners only).
    line_limit: Option<u64>,
    gave_up: bool,
    event_type: String,
    /// The WHATWG "last event ID buffer".
    pub(super) id_buf: String,
    /// A valid `id` line of the event in progress set `id_buf`.
    pub(super) id_set: bool,
    /// The WHATWG "last event ID string" (committed at dispatch).
    pub(super) last_event_id: String,
    retry: Option<u64>,
    /// Field lines or a partial field line arrived since the last blank line.
    pub(super) in_event: bool,
    pub(super) dispatched: u64,
    /// Payload bytes consumed (BOM included).
    pub(super) pos: u64,
    /// Classification state; inert unless a classifying feed is used.
    pub(super) tr: Tracker,
    /// The LLM reader, when the stream is one of a known LLM API.
    llm: Option<Box<LlmTracker>>,
}

impl Default for SseScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl SseScanner {
    /// A scanner at the start of a stream.
    pub fn new() -> Self {
        SseScanner {
            bom: Some(0),
            pending_cr: false,
            line: Line::Start,
            field: Field::Unknown,
            name: [0; NAME_CAP],
            name_len: 0,
            value: Vec::new(),
            data: DataBuf::whole(),
            line_len: 0,
            line_limit: None,
            gave_up: false,
            event_type: String::new(),
            id_buf: String::new(),
            id_set: false,
            last_event_id: String::new(),
            retry: None,
            in_event: false,
            dispatched: 0,
            pos: 0,
            tr: Tracker::default(),
            llm: None,
        }
    }

    /// A scanner that keeps each event's data only up to `head` bytes (of a longer one, its hash,
    /// length and JSON-RPC head facts, read as it streams) and gives up on a line longer than
    /// `line_limit` bytes.
    pub fn bounded(head: usize, line_limit: u64) -> Self {
        SseScanner {
            data: DataBuf::bounded(head),
            line_limit: Some(line_limit),
            ..Self::new()
        }
    }

    /// Follows the stream as an answer of `api` too: events carry their LLM facts and
    /// classified cut points their LLM position (see `wire::llm`). Call before the first byte.
    pub fn set_llm(&mut self, api: LlmApi) {
        self.llm = Some(Box::new(LlmTracker::new(api)));
    }

    /// [`SseScanner::set_llm`] with a reader whose JSON reader reports every path (see
    /// `LlmTracker::reading_every_path`): for checking that the path filter changes nothing.
    #[cfg(any(test, feature = "harness"))]
    pub(crate) fn set_llm_reading_every_path(&mut self, api: LlmApi) {
        self.llm = Some(Box::new(LlmTracker::reading_every_path(api)));
    }

    /// The LLM reader, if the stream is followed as an LLM answer.
    pub fn llm(&self) -> Option<&LlmTracker> {
        self.llm.as_deref()
    }

    /// The LLM position of the cut point after the last byte read (LLM streams only).
    pub fn llm_mark(&self) -> Option<LlmPos> {
        self.llm.as_ref().and_then(|l| l.mark())
    }

    fn sync_llm(&mut self) {
        if let Some(l) = &self.llm {
            self.tr.llm_mark = l.mark();
        }
    }

    /// True if and only if a line exceeded the line limit: the scanner has stopped following
    /// the stream (nothing more is dispatched or classified).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Bytes the scanner holds beyond its fixed size (buffers' capacities).
    pub fn held_bytes(&self) -> usize {
        self.data.held() + self.value.capacity() + self.id_buf.capacity()
    }

    /// Consumes the next bytes of the stream, calling `on_event` for every dispatched event.
    pub fn feed(&mut self, bytes: &[u8], on_event: &mut dyn FnMut(&SseEvent<'_>)) {
        self.run::<false>(bytes, &mut |e, _| {
            on_event(e);
            false
        });
    }

    /// Ends the stream: the event in progress and any partial line are discarded.
    pub fn finish(&mut self, on_event: &mut dyn FnMut(&SseEvent<'_>)) {
        let _ = on_event;
        if let Some(l) = self.llm.as_deref_mut() {
            l.discard();
        }
        self.sync_llm();
        self.tr.discard_pending();
        self.bom = None;
        self.line = Line::Start;
        self.in_event = false;
        self.id_set = false;
        self.data.clear();
        self.event_type.clear();
        self.value.clear();
        self.id_buf.clear();
        self.id_buf.push_str(&self.last_event_id);
    }

    /// Like [`feed`](Self::feed), and also classifies every payload cut point whose class is
    /// known after these bytes into `out` (appended). `on_event` returns true when the event is
    /// the final JSON-RPC response of the stream's call; every later cut point is `after-final`.
    pub fn feed_classified(
        &mut self,
        bytes: &[u8],
        on_event: &mut dyn FnMut(&SseEvent<'_>, EventSpan) -> bool,
        out: &mut Classified,
    ) {
        self.tr.begin(out);
        self.run::<true>(bytes, on_event);
        self.tr.end(out);
    }

    /// The WHATWG "last event ID string": the id committed by the last dispatch.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// The reconnection time in milliseconds, once a valid `retry` field set it.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The id set by a complete `id` line of the event in progress, not yet committed.
    pub fn pending_id(&self) -> Option<&str> {
        self.id_set.then_some(self.id_buf.as_str())
    }

    /// True if and only if field lines or a partial field line (not only comments) arrived since
    /// the last blank line.
    pub fn has_partial_event(&self) -> bool {
        self.in_event
    }

    /// Number of events dispatched (blank lines that found a non-empty data buffer).
    pub fn events_dispatched(&self) -> u64 {
        self.dispatched
    }

    /// Payload bytes consumed so far, BOM included.
    pub fn payload_offset(&self) -> u64 {
        self.pos
    }

    /// Payload offset where the event block in progress (or the next one) begins, comments
    /// before its first field included. Kept by classifying feeds only (0 otherwise).
    pub fn event_block_start(&self) -> u64 {
        self.tr.block_start()
    }

    fn run<const C: bool>(
        &mut self,
        mut buf: &[u8],
        on_event: &mut dyn FnMut(&SseEvent<'_>, EventSpan) -> bool,
    ) {
        if self.gave_up {
            return;
        }
        if C && self.tr.at_start() {
            self.emit(0, SseClass::Boundary);
        }
        if let Some(matched) = self.bom {
            let mut k = usize::from(matched);
            while k < 3 {
                let Some((&b, rest)) = buf.split_first() else {
                    self.bom = Some(k as u8);
                    // The held bytes were consumed: chunk-relative cut points count them.
                    self.pos = k as u64;
                    return;
                };
                if b != BOM[k] {
                    break;
                }
                buf = rest;
                k += 1;
                if C {
                    let class = if k < 3 {
                        SseClass::Bom
                    } else {
                        SseClass::Boundary
                    };
                    self.emit(k as u64, class);
                }
            }
            self.bom = None;
            if k == 3 {
                self.pos = 3;
            } else if k > 0 {
                // Not a BOM: the held bytes are content (their cut points are already labelled),
                // read again from payload offset 0.
                self.pos = 0;
                self.lines::<C>(&BOM[..k], on_event);
            }
        }
        self.lines::<C>(buf, on_event);
    }

    fn lines<const C: bool>(
        &mut self,
        buf: &[u8],
        on_event: &mut dyn FnMut(&SseEvent<'_>, EventSpan) -> bool,
    ) {
        let mut i = 0;
        while i < buf.len() {
            if C && self.tr.has_pending() {
                let eol = matches!(buf[i], b'\r' | b'\n');
                self.resolve_pending(eol);
            }
            if self.pending_cr {
                self.pending_cr = false;
                if buf[i] == b'\n' {
                    i += 1;
                    self.pos += 1;
                    if C {
                        self.mark_line_end(false);
                    }
                    continue;
                }
            }
            if self.line_limit.is_some_and(|limit| self.line_len > limit) {
                self.gave_up = true;
                return;
            }
            if self.line == Line::Start {
                self.line_len = 0;
            }
            match self.line {
                Line::Start => match buf[i] {
                    b @ (b'\r' | b'\n') => {
                        i += 1;
                        self.pos += 1;
                        let ended_event = self.in_event;
                        self.dispatch::<C>(on_event);
                        self.pending_cr = b == b'\r';
                        if C {
                            self.mark_blank_end(b == b'\r', ended_event);
                        }
                    }
                    b':' => {
                        if C {
                            self.mark_line_start();
                        }
                        i += 1;
                        self.pos += 1;
                        self.line = Line::Comment;
                        if C {
                            self.mark_text(&buf[i - 1..i], SseClass::FieldName, Last::Same);
                        }
                    }
                    _ => {
                        self.line = Line::Name;
                        self.name_len = 0;
                        self.in_event = true;
                        if C {
                            self.mark_line_start();
                        }
                    }
                },
                Line::Name => {
                    let rest = &buf[i..];
                    let n = memchr3(b':', b'\r', b'\n', rest).unwrap_or(rest.len());
                    self.push_name(&rest[..n]);
                    self.line_len += n as u64;
                    i += n;
                    self.pos += n as u64;
                    if C {
                        self.mark_text(&rest[..n], SseClass::FieldName, Last::Same);
                    }
                    if let Some(&b) = rest.get(n) {
                        i += 1;
                        self.pos += 1;
                        self.field = self.lookup_name();
                        self.value.clear();
                        self.tr.field_recognized(self.field);
                        if b == b':' {
                            self.line = Line::Colon;
                            if C {
                                self.mark_simple(SseClass::AfterColon);
                            }
                        } else {
                            self.end_field_line();
                            self.pending_cr = b == b'\r';
                            if C {
                                self.mark_line_end(b == b'\r');
                            }
                        }
                    }
                }
                Line::Colon => {
                    self.line = Line::Value;
                    if buf[i] == b' ' {
                        i += 1;
                        self.pos += 1;
                        if C {
                            self.mark_simple(SseClass::AfterColon);
                        }
                    }
                }
                Line::Value => {
                    let rest = &buf[i..];
                    let eol = memchr2(b'\r', b'\n', rest);
                    let n = eol.unwrap_or(rest.len());
                    let seg = &rest[..n];
                    match self.field {
                        Field::Data => {
                            self.data.push(seg);
                            if let Some(l) = self.llm.as_deref_mut() {
                                l.data(seg, self.pos);
                            }
                        }
                        Field::Event | Field::Id | Field::Retry => {
                            self.value.extend_from_slice(seg)
                        }
                        Field::Unknown => {}
                    }
                    i += n;
                    self.pos += n as u64;
                    self.line_len += n as u64;
                    if n > 0 {
                        if self.field == Field::Data {
                            self.tr.data_value_seen();
                        }
                        if C {
                            let mid = if self.field == Field::Id {
                                SseClass::MidId
                            } else {
                                SseClass::MidValue
                            };
                            let last = if eol.is_some() {
                                Last::BeforeEol
                            } else {
                                Last::Pending
                            };
                            let moved = self.field == Field::Data
                                && self
                                    .llm
                                    .as_ref()
                                    .is_some_and(|l| !l.transitions().is_empty());
                            if moved {
                                self.mark_data_moves(seg, mid, last);
                            } else {
                                self.mark_text(seg, mid, last);
                            }
                        }
                    }
                    if let Some(&b) = rest.get(n) {
                        i += 1;
                        self.pos += 1;
                        self.end_field_line();
                        self.pending_cr = b == b'\r';
                        if C {
                            self.mark_line_end(b == b'\r');
                        }
                    }
                }
                Line::Comment => {
                    let rest = &buf[i..];
                    let eol = memchr2(b'\r', b'\n', rest);
                    let n = eol.unwrap_or(rest.len());
                    i += n;
                    self.pos += n as u64;
                    self.line_len += n as u64;
                    if C {
                        self.mark_text(&rest[..n], SseClass::FieldName, Last::Same);
                    }
                    if let Some(&b) = rest.get(n) {
                        i += 1;
                        self.pos += 1;
                        self.line = Line::Start;
                        self.pending_cr = b == b'\r';
                        if C {
                            self.mark_line_end(b == b'\r');
                        }
                    }
                }
            }
        }
    }

    fn push_name(&mut self, bytes: &[u8]) {
        let end = self.name_len.saturating_add(bytes.len());
        if end <= NAME_CAP {
            self.name[self.name_len..end].copy_from_slice(bytes);
        }
        self.name_len = end;
    }

    fn lookup_name(&self) -> Field {
        if self.name_len > NAME_CAP {
            return Field::Unknown;
        }
        match &self.name[..self.name_len] {
            b"data" => Field::Data,
            b"event" => Field::Event,
            b"id" => Field::Id,
            b"retry" => Field::Retry,
            _ => Field::Unknown,
        }
    }

    /// Classifies the cut points after each byte of the data segment `seg` (just consumed)
    /// where the LLM position changes inside it: each piece with the position that holds there.
    fn mark_data_moves(&mut self, seg: &[u8], mid: SseClass, last: Last) {
        let mut moves = [(0u64, None::<LlmPos>); 4];
        let mut n = 0;
        if let Some(l) = &self.llm {
            for &m in l.transitions().iter().take(moves.len()) {
                moves[n] = m;
                n += 1;
            }
        }
        let end = self.pos;
        let start = end - seg.len() as u64;
        let mut at = start;
        for &(t, mark) in &moves[..n] {
            // Cut points before offset `t` keep the position they had; from `t` on, `mark`.
            let cut = t.saturating_sub(1).clamp(at, end);
            if cut > at {
                self.pos = cut;
                self.mark_text(
                    &seg[(at - start) as usize..(cut - start) as usize],
                    mid,
                    Last::Same,
                );
                at = cut;
            }
            self.tr.llm_mark = mark;
        }
        self.pos = end;
        self.mark_text(&seg[(at - start) as usize..], mid, last);
        self.sync_llm();
    }

    /// Applies the completed field line (its value is in `value`, or already in `data`).
    fn end_field_line(&mut self) {
        self.line = Line::Start;
        match self.field {
            Field::Data => {
                self.data.line_end();
                if let Some(l) = self.llm.as_deref_mut() {
                    l.data_line_end();
                }
            }
            Field::Event => {
                self.event_type.clear();
                self.event_type
                    .push_str(&String::from_utf8_lossy(&self.value));
                if let Some(l) = self.llm.as_deref_mut() {
                    l.event_name(&self.value);
                }
                self.sync_llm();
            }
            Field::Id => {
                if !self.value.contains(&0) {
                    self.id_buf.clear();
                    self.id_buf.push_str(&String::from_utf8_lossy(&self.value));
                    self.id_set = true;
                    self.tr.id_line_done(true);
                } else {
                    self.tr.id_line_done(false);
                }
            }
            Field::Retry => {
                if !self.value.is_empty() && self.value.iter().all(u8::is_ascii_digit) {
                    let ms = self.value.iter().fold(0u64, |acc, d| {
                        acc.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                    });
                    self.retry = Some(ms);
                }
            }
            Field::Unknown => {}
        }
        if self.field != Field::Id {
            self.tr.other_line_done();
        }
    }

    /// The WHATWG dispatch steps, run at a blank line.
    fn dispatch<const C: bool>(
        &mut self,
        on_event: &mut dyn FnMut(&SseEvent<'_>, EventSpan) -> bool,
    ) {
        self.last_event_id.clear();
        self.last_event_id.push_str(&self.id_buf);
        let id_set = std::mem::replace(&mut self.id_set, false);
        let data_lines = self.tr.data_lines();
        let span = EventSpan {
            start: self.tr.block_start(),
            end: self.pos,
        };
        self.tr
            .block_done(std::mem::replace(&mut self.in_event, false), self.pos);
        if self.data.is_empty() {
            self.event_type.clear();
            if let Some(l) = self.llm.as_deref_mut() {
                l.discard();
            }
            self.sync_llm();
            return;
        }
        if let Some(l) = self.llm.as_deref_mut() {
            l.dispatch();
        }
        self.sync_llm();
        let event_type = if self.event_type.is_empty() {
            "message"
        } else {
            self.event_type.as_str()
        };
        self.data.finish();
        let event = SseEvent {
            event_type,
            data: self.data.kept(),
            id: id_set.then_some(self.id_buf.as_str()),
            last_event_id: &self.last_event_id,
            data_len: self.data.len(),
            data_hash: self.line_limit.map(|_| self.data.hash()),
            data_lines,
            llm: self.llm.as_deref().map(LlmTracker::last_event),
        };
        let is_final = on_event(&event, span);
        self.dispatched += 1;
        self.data.clear();
        self.event_type.clear();
        if C && is_final {
            self.tr.final_seen();
        }
    }
}

#[cfg(test)]
#[path = "sse_tests.rs"]
mod tests;
