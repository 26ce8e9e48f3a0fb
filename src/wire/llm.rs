//! The provider-aware reader of LLM token streams: it follows one SSE response stream of a
//! known API ([`LlmApi`], recognised by the request path and a `text/event-stream` response,
//! never guessed from bytes) as the SSE scanner hands it each event's name and data, and says
//! per dispatched event what it contributed ([`LlmEventFacts`]: a text delta, a tool call's
//! start or argument piece with the arguments' parse status, the completion signal, the
//! terminal event, usage, an error) and, per cut point, its LLM position ([`LlmPos`]).
//!
//! What each API's events mean (DESIGN.md; the lab's `src/lab/llm/` writes them):
//! - Chat Completions: `data:` chunks; text at `choices[].delta.content`; tool calls at
//!   `choices[].delta.tool_calls[]` (`index`, `function.name`, `function.arguments` pieces);
//!   the completion signal is a non-null `choices[].finish_reason` once every choice seen
//!   (`choices[].index`, several with `n > 1`) has one; `usage` (an object) may follow; the
//!   terminal event is `data: [DONE]`; a top-level `error` object is an error.
//! - Responses: typed events (the `event:` field, else the data's `type`):
//!   `response.output_text.delta` (text), `response.output_item.added` with a
//!   `function_call` item (a tool call at `output_index`, named `item.name`),
//!   `response.function_call_arguments.delta` (`delta` pieces), `response.completed |
//!   incomplete | failed` (the completion signal and the last event), `error`.
//! - Messages: `content_block_start` (a `tool_use` block at `index`, named
//!   `content_block.name`, or a `text` block), `content_block_delta` (`delta.text`, or
//!   `delta.partial_json` pieces), `message_delta` with a non-null `delta.stop_reason` (the
//!   completion signal), `message_stop` (the terminal event), `error`.
//!
//! Invariants: no allocation or copy per byte (strings are read through [`JsonPath`] as slices;
//! tool names and finish reasons keep their first 64 bytes, allocated once per event that
//! carries them); bounded memory per stream (at most [`MAX_TOOLS`] tool calls followed, each a
//! fixed-size [`ArgsJson`]; more are counted); what an event contributes is committed only at
//! its dispatch (a torn event contributes nothing); positions depend only on the bytes up to
//! the cut point; data that is not the API's JSON contributes nothing and changes nothing.
//! Known limits: within one Chat Completions chunk, argument pieces of a second tool call are
//! not followed (providers send one call's piece per chunk), and a chunk's choices count as
//! one, its last `index` (providers send one choice per chunk, `n > 1` included); a choice
//! first seen after every earlier one finished is not awaited (OpenAI opens every choice with
//! a role chunk first); choices from index 127 up share one slot.

use std::sync::OnceLock;

use super::llm_args::{ArgsJson, ArgsStatus, Unescape};
use super::llm_json::{JsonPath, Key, Path, PathSet, Seg, Tok};
use super::position::LlmPos;
use crate::vocab::LlmApi;

/// Tool calls followed per stream; later ones are counted, not followed.
pub const MAX_TOOLS: usize = 8;
const CAP: usize = 64;

/// A tool call began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolStart {
    /// Its index (`tool_calls[].index`, `output_index`, content block `index`).
    pub index: u32,
    /// Its name (first 64 bytes), if the event carried it.
    pub name: Option<String>,
}

/// A tool call's arguments grew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgsProgress {
    /// The tool call's index.
    pub index: u32,
    /// Argument bytes received so far (decoded), this event included.
    pub bytes: u64,
    /// Whether they parse, as far as they arrived.
    pub status: ArgsStatus,
}

/// What one dispatched event of an LLM stream contributed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmEventFacts {
    /// A non-empty text delta.
    pub text: bool,
    /// A tool call began.
    pub tool_start: Option<ToolStart>,
    /// Argument text of a tool call.
    pub args: Option<ArgsProgress>,
    /// The completion signal, with its reason (`stop`, `tool_calls`, `end_turn`, `completed`,
    /// `incomplete`, `failed`, …; first 64 bytes).
    pub completion: Option<String>,
    /// The terminal event (`[DONE]`, `message_stop`; for Responses the completion signal).
    pub terminal: bool,
    /// A usage block (Chat Completions' usage chunk).
    pub usage: bool,
    /// An error event.
    pub error: bool,
}

impl LlmEventFacts {
    /// True if and only if the event contributed nothing.
    pub fn is_empty(&self) -> bool {
        *self == LlmEventFacts::default()
    }
}

/// What an event is, as far as its bytes showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Unknown,
    Text,
    Args,
    ItemAdded,
    BlockStart,
    BlockDelta,
    Completion(&'static str),
    MessageDelta,
    MessageStop,
    Error,
    Other,
}

fn kind_of(api: LlmApi, name: &[u8]) -> Kind {
    match (api, name) {
        (LlmApi::Responses, b"response.output_text.delta") => Kind::Text,
        (LlmApi::Responses, b"response.function_call_arguments.delta") => Kind::Args,
        (LlmApi::Responses, b"response.output_item.added") => Kind::ItemAdded,
        (LlmApi::Responses, b"response.completed") => Kind::Completion("completed"),
        (LlmApi::Responses, b"response.incomplete") => Kind::Completion("incomplete"),
        (LlmApi::Responses, b"response.failed") => Kind::Completion("failed"),
        (LlmApi::Messages, b"content_block_start") => Kind::BlockStart,
        (LlmApi::Messages, b"content_block_delta") => Kind::BlockDelta,
        (LlmApi::Messages, b"message_delta") => Kind::MessageDelta,
        (LlmApi::Messages, b"message_stop") => Kind::MessageStop,
        (LlmApi::Responses | LlmApi::Messages, b"error") => Kind::Error,
        (LlmApi::ChatCompletions, _) => Kind::Unknown,
        _ => Kind::Other,
    }
}

/// Which string value is being captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Capture {
    None,
    ToolName,
    Finish,
    Type,
    ItemType,
    BlockType,
}

/// A small inline string buffer (first [`CAP`] bytes).
#[derive(Debug, Clone, Copy)]
struct Small {
    buf: [u8; CAP],
    len: usize,
}

impl Default for Small {
    fn default() -> Self {
        Small {
            buf: [0; CAP],
            len: 0,
        }
    }
}

impl Small {
    fn push(&mut self, b: &[u8]) {
        let n = b.len().min(CAP - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }

    fn get(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    fn string(&self) -> String {
        String::from_utf8_lossy(self.get()).into_owned()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    index: u32,
    args: ArgsJson,
}

/// The event in progress (reset at each dispatch or discard).
#[derive(Debug, Clone, Copy)]
struct Event {
    kind: Kind,
    text: bool,
    /// `index` / `output_index` of the event, or of the tool-call entry in progress (chat).
    index: Option<u32>,
    /// Chat: the `choices[].index` of the chunk (its last).
    choice: Option<u32>,
    /// A chat `tool_calls` entry was seen.
    tool_entry: bool,
    tool_name: Option<Small>,
    /// The argument pieces of this event: (tool index, the arguments with them).
    args: Option<(u32, ArgsJson)>,
    finish: Option<Small>,
    usage: bool,
    error: bool,
    /// The Responses item / Messages block type says function call / tool use.
    tool_item: bool,
    /// The Messages block type says text.
    text_block: bool,
    capture: Capture,
    cap: Small,
    /// Bytes of `[DONE]` matched at the start of the data (`u8::MAX`: not `[DONE]`).
    done: u8,
    data_len: u64,
    pending_lf: bool,
}

impl Event {
    /// Back to [`Event::default`] without rewriting the capture buffers (the event is reset
    /// at every dispatch; only their lengths make ~200 bytes of buffers readable). The pattern
    /// names every field, so a new one cannot be left out.
    fn clear(&mut self) {
        let Event {
            kind,
            text,
            index,
            choice,
            tool_entry,
            tool_name,
            args,
            finish,
            usage,
            error,
            tool_item,
            text_block,
            capture,
            cap,
            done,
            data_len,
            pending_lf,
        } = self;
        *kind = Kind::Unknown;
        *text = false;
        *index = None;
        *choice = None;
        *tool_entry = false;
        *tool_name = None;
        *args = None;
        *finish = None;
        *usage = false;
        *error = false;
        *tool_item = false;
        *text_block = false;
        *capture = Capture::None;
        cap.len = 0;
        *done = 0;
        *data_len = 0;
        *pending_lf = false;
    }
}

impl Default for Event {
    fn default() -> Self {
        Event {
            kind: Kind::Unknown,
            text: false,
            index: None,
            choice: None,
            tool_entry: false,
            tool_name: None,
            args: None,
            finish: None,
            usage: false,
            error: false,
            tool_item: false,
            text_block: false,
            capture: Capture::None,
            cap: Small::default(),
            done: 0,
            data_len: 0,
            pending_lf: false,
        }
    }
}

/// What the stream's dispatched events established.
#[derive(Debug, Clone, Copy, Default)]
struct Stream {
    events: u64,
    deltas: u64,
    arg_events: u64,
    completed: bool,
    terminal: bool,
    /// Chat: the choices seen (bit `index`, see [`choice_bit`]) and those with a finish reason.
    choices_seen: u128,
    choices_done: u128,
    /// Messages: the open content block is a tool call at this index.
    tool_block: Option<u32>,
    /// Messages: the open content block is text.
    text_block: bool,
    /// The last tool call argument pieces went to.
    last_tool: Option<u32>,
    tools: [Slot; MAX_TOOLS],
    tools_len: usize,
    tools_over: u64,
}

/// Follows one LLM stream (see the module doc).
#[derive(Debug, Clone)]
pub struct LlmTracker {
    api: LlmApi,
    json: JsonPath,
    unescape: Unescape,
    ev: Event,
    st: Stream,
    /// The position of the cut point after the last byte read.
    mark: Option<LlmPos>,
    /// Position changes inside the data read by the last [`LlmTracker::data`]: (payload offset
    /// from which it holds, position).
    transitions: Vec<(u64, Option<LlmPos>)>,
    /// The facts of the last dispatched event.
    last: LlmEventFacts,
}

impl LlmTracker {
    /// A reader for a stream of `api`.
    pub fn new(api: LlmApi) -> Self {
        LlmTracker {
            api,
            json: JsonPath::only(wanted(api)),
            unescape: Unescape::default(),
            ev: Event::default(),
            st: Stream::default(),
            mark: None,
            transitions: Vec::new(),
            last: LlmEventFacts::default(),
        }
    }

    /// A reader whose JSON reader reports every path, not only [`wanted`]'s: the same facts and
    /// positions, more slowly (what the tests and the fuzz target compare the filter with).
    #[cfg(any(test, feature = "harness"))]
    pub(crate) fn reading_every_path(api: LlmApi) -> Self {
        LlmTracker {
            json: JsonPath::default(),
            ..LlmTracker::new(api)
        }
    }

    /// The API followed.
    pub fn api(&self) -> LlmApi {
        self.api
    }

    /// The position of the cut point after the last byte read.
    pub fn mark(&self) -> Option<LlmPos> {
        self.mark
    }

    /// Position changes inside the data of the last [`LlmTracker::data`] call, in order.
    pub fn transitions(&self) -> &[(u64, Option<LlmPos>)] {
        &self.transitions
    }

    /// The facts of the last dispatched event.
    pub fn last_event(&self) -> &LlmEventFacts {
        &self.last
    }

    /// Text deltas dispatched so far.
    pub fn deltas(&self) -> u64 {
        self.st.deltas
    }

    /// Whether the completion signal was dispatched.
    pub fn completed(&self) -> bool {
        self.st.completed
    }

    /// Whether the terminal event was dispatched.
    pub fn terminated(&self) -> bool {
        self.st.terminal
    }

    /// Tool calls begun beyond the [`MAX_TOOLS`] followed.
    pub fn tools_over(&self) -> u64 {
        self.st.tools_over
    }

    /// The `event:` field of the event in progress ended with this value.
    pub fn event_name(&mut self, name: &[u8]) {
        if self.api != LlmApi::ChatCompletions {
            self.ev.kind = kind_of(self.api, name);
            self.refresh();
        }
    }

    /// `seg`, payload bytes at offset `at`, belong to the current `data` line's value.
    pub fn data(&mut self, seg: &[u8], at: u64) {
        self.transitions.clear();
        if self.ev.pending_lf {
            self.ev.pending_lf = false;
            self.feed_json(b"\n", None);
        }
        self.feed_json(seg, Some(at));
    }

    /// A `data` line ended (a later one continues the data after an LF).
    pub fn data_line_end(&mut self) {
        if self.ev.pending_lf {
            self.feed_json(b"\n", None);
        }
        self.ev.pending_lf = true;
    }

    fn feed_json(&mut self, seg: &[u8], at: Option<u64>) {
        if self.ev.done != u8::MAX {
            for &b in seg {
                let i = self.ev.done as usize;
                self.ev.done = if b"[DONE]".get(i) == Some(&b) {
                    self.ev.done + 1
                } else {
                    u8::MAX
                };
                if self.ev.done == u8::MAX {
                    break;
                }
            }
        }
        self.ev.data_len += seg.len() as u64;
        let (base, len) = (seg.as_ptr() as usize, seg.len());
        let Self {
            api,
            json,
            unescape,
            ev,
            st,
            mark,
            transitions,
            ..
        } = self;
        let mut on = |tok: Tok<'_>, path: &Path| {
            // The cut point after the first byte of `s` (a slice of `seg`).
            let pos = |s: &[u8]| {
                let d = (s.as_ptr() as usize)
                    .checked_sub(base)
                    .filter(|d| *d < len)?;
                at.map(|a| a + d as u64 + 1)
            };
            let hit = read(*api, ev, st, unescape, tok, path);
            if hit {
                let new = position(*api, ev, st);
                if new != *mark {
                    *mark = new;
                    let offset = match tok {
                        Tok::Str(s) | Tok::StrEnd(s) => pos(s),
                        Tok::Scalar(_) | Tok::Open | Tok::Close | Tok::StrStart => None,
                    };
                    if let Some(o) = offset {
                        transitions.push((o, new));
                    }
                }
            }
        };
        json.feed(seg, &mut on);
    }

    /// The blank line dispatched the event in progress (its data buffer was not empty).
    pub fn dispatch(&mut self) -> &LlmEventFacts {
        let mut f = LlmEventFacts::default();
        self.json.finish(&mut |_, _| {});
        let ev = &self.ev;
        let st = &mut self.st;
        st.events += 1;
        if self.api == LlmApi::ChatCompletions && ev.done == 6 && ev.data_len == 6 {
            f.terminal = true;
        }
        let mut kind = ev.kind;
        if kind == Kind::BlockDelta {
            kind = if st.tool_block.is_some() {
                Kind::Args
            } else {
                Kind::Text
            };
        }
        // Text.
        if ev.text || (kind == Kind::Text && self.api == LlmApi::Responses) {
            f.text = true;
            st.deltas += 1;
        }
        // Tool-call starts.
        let start = match (self.api, kind) {
            (LlmApi::ChatCompletions, _) if ev.tool_entry => Some(ev.index.unwrap_or(0)),
            (LlmApi::Responses, Kind::ItemAdded) if ev.tool_item => Some(ev.index.unwrap_or(0)),
            (LlmApi::Messages, Kind::BlockStart) if ev.tool_item => Some(ev.index.unwrap_or(0)),
            _ => None,
        };
        if let Some(index) = start
            && !st.has(index)
        {
            if st.slot(index).is_some() {
                f.tool_start = Some(ToolStart {
                    index,
                    name: ev.tool_name.as_ref().map(Small::string),
                });
            } else {
                st.tools_over += 1;
            }
        }
        if self.api == LlmApi::Messages && kind == Kind::BlockStart {
            st.tool_block = start.filter(|_| ev.tool_item);
            st.text_block = ev.text_block;
        }
        // Argument pieces: committed now.
        if let Some((index, args)) = ev.args
            && let Some(slot) = st.slot(index)
        {
            slot.args = args;
            st.last_tool = Some(index);
            st.arg_events += 1;
            f.args = Some(ArgsProgress {
                index,
                bytes: args.bytes(),
                status: args.status(),
            });
        }
        // Completion and terminal.
        match kind {
            Kind::Completion(reason) => f.completion = Some(reason.to_owned()),
            Kind::MessageStop => f.terminal = true,
            Kind::Error => f.error = true,
            _ => {}
        }
        if self.api == LlmApi::ChatCompletions
            && (ev.choice.is_some() || ev.finish.is_some() || ev.text || ev.tool_entry)
        {
            let bit = choice_bit(ev.choice);
            st.choices_seen |= bit;
            if ev.finish.is_some() {
                st.choices_done |= bit;
            }
        }
        if f.completion.is_none()
            && let Some(r) = &ev.finish
            && st.choices_done == st.choices_seen
        {
            f.completion = Some(r.string());
        }
        if self.api == LlmApi::Responses && f.completion.is_some() {
            f.terminal = true;
        }
        if f.completion.as_deref() == Some("failed") {
            f.error = true;
        }
        f.usage = ev.usage;
        f.error |= ev.error;
        st.completed |= f.completion.is_some();
        st.terminal |= f.terminal;
        self.last = f;
        self.reset_event();
        &self.last
    }

    /// The event in progress ended without dispatch (no data, or the stream ended).
    pub fn discard(&mut self) {
        self.reset_event();
    }

    fn reset_event(&mut self) {
        self.ev.clear();
        self.json.reset();
        self.unescape = Unescape::default();
        self.refresh();
    }

    fn refresh(&mut self) {
        self.mark = position(self.api, &self.ev, &self.st);
    }
}

impl Stream {
    fn has(&self, index: u32) -> bool {
        self.tools[..self.tools_len]
            .iter()
            .any(|s| s.index == index)
    }

    /// The slot of tool call `index`, created if there is room.
    fn slot(&mut self, index: u32) -> Option<&mut Slot> {
        if let Some(i) = self.tools[..self.tools_len]
            .iter()
            .position(|s| s.index == index)
        {
            return Some(&mut self.tools[i]);
        }
        if self.tools_len == MAX_TOOLS {
            return None;
        }
        self.tools[self.tools_len] = Slot {
            index,
            args: ArgsJson::default(),
        };
        self.tools_len += 1;
        Some(&mut self.tools[self.tools_len - 1])
    }

    fn args_of(&self, index: u32) -> ArgsJson {
        self.tools[..self.tools_len]
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.args)
            .unwrap_or_default()
    }
}

/// The LLM position of the cut point after the bytes read so far.
fn position(api: LlmApi, ev: &Event, st: &Stream) -> Option<LlmPos> {
    if st.terminal {
        return None;
    }
    if st.completed {
        return (api != LlmApi::Responses).then_some(LlmPos::AfterCompletion);
    }
    let kind = match ev.kind {
        Kind::BlockDelta if st.tool_block.is_some() => Kind::Args,
        Kind::BlockDelta if st.text_block => Kind::Text,
        k => k,
    };
    let ends_the_answer = match api {
        // A finish reason completes the answer only for the last unfinished choice.
        LlmApi::ChatCompletions => {
            let bit = choice_bit(ev.choice);
            (st.choices_seen | bit) == (st.choices_done | bit)
        }
        LlmApi::Responses | LlmApi::Messages => true,
    };
    if (ev.finish.is_some() && ends_the_answer)
        || matches!(kind, Kind::Completion(_) | Kind::MessageDelta)
    {
        return Some(LlmPos::BeforeCompletion);
    }
    let args_begun = ev.args.is_some_and(|(_, a)| a.bytes() > 0);
    if args_begun || kind == Kind::Args {
        return Some(LlmPos::MidToolArgs);
    }
    if ev.text || kind == Kind::Text {
        return Some(LlmPos::MidDelta);
    }
    if st.tools[..st.tools_len]
        .iter()
        .any(|s| s.args.status() == ArgsStatus::Partial)
    {
        return Some(LlmPos::MidToolArgs);
    }
    (st.events > 0 && st.deltas == 0 && st.arg_events == 0).then_some(LlmPos::BeforeFirstDelta)
}

use Key as K;
use Seg::{Elem as E, Key as S};

/// Every path [`read`] acts on, per API (the captures of `capture_for` and the matches of
/// `read_chat`, `read_responses` and `read_messages`): the JSON reader reports tokens at these
/// paths only, since `read` changes nothing for a token anywhere else. A path missing here
/// would silently blind the reader: `llm_tests`' `the_path_filter_changes_no_fact` compares a
/// filtered reader with an unfiltered one over every test stream.
fn wanted(api: LlmApi) -> &'static PathSet {
    static SETS: [OnceLock<PathSet>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let i = match api {
        LlmApi::ChatCompletions => 0,
        LlmApi::Responses => 1,
        LlmApi::Messages => 2,
    };
    SETS[i].get_or_init(|| PathSet::new(wanted_paths(api)))
}

/// The paths of [`wanted`].
fn wanted_paths(api: LlmApi) -> &'static [&'static [Seg]] {
    match api {
        LlmApi::ChatCompletions => &[
            &[S(K::Choices), E, S(K::Delta), S(K::Content)],
            &[S(K::Choices), E, S(K::Delta), S(K::ToolCalls), E],
            &[
                S(K::Choices),
                E,
                S(K::Delta),
                S(K::ToolCalls),
                E,
                S(K::Index),
            ],
            &[
                S(K::Choices),
                E,
                S(K::Delta),
                S(K::ToolCalls),
                E,
                S(K::Function),
                S(K::Name),
            ],
            &[
                S(K::Choices),
                E,
                S(K::Delta),
                S(K::ToolCalls),
                E,
                S(K::Function),
                S(K::Arguments),
            ],
            &[S(K::Choices), E, S(K::FinishReason)],
            &[S(K::Choices), E, S(K::Index)],
            &[S(K::Usage)],
            &[S(K::Error)],
        ],
        LlmApi::Responses => &[
            &[S(K::Type)],
            &[S(K::Item), S(K::Type)],
            &[S(K::Item), S(K::Name)],
            &[S(K::OutputIndex)],
            &[S(K::Delta)],
        ],
        LlmApi::Messages => &[
            &[S(K::Type)],
            &[S(K::ContentBlock), S(K::Type)],
            &[S(K::ContentBlock), S(K::Name)],
            &[S(K::Delta), S(K::StopReason)],
            &[S(K::Index)],
            &[S(K::Delta), S(K::Text)],
            &[S(K::Delta), S(K::PartialJson)],
        ],
    }
}

/// Reads one token of an event's data; true if and only if it may change the position.
fn read(
    api: LlmApi,
    ev: &mut Event,
    st: &Stream,
    unescape: &mut Unescape,
    tok: Tok<'_>,
    path: &Path,
) -> bool {
    let Some(p) = path.segs() else {
        return false;
    };
    // Captures of short string values.
    match tok {
        Tok::StrStart => {
            ev.capture = capture_for(api, ev, p);
            ev.cap.len = 0;
            return false;
        }
        Tok::Str(s) if ev.capture != Capture::None => {
            ev.cap.push(s);
            // A finish reason counts from its first character; its text is all that arrived
            // of it (a string cut before its quote says as much under every split).
            if ev.capture == Capture::Finish && !s.is_empty() {
                let first = ev.finish.is_none();
                ev.finish = Some(ev.cap);
                if first {
                    return true;
                }
            }
        }
        Tok::StrEnd(_) => {
            let what = std::mem::replace(&mut ev.capture, Capture::None);
            return end_capture(api, ev, what);
        }
        _ => {}
    }
    match api {
        LlmApi::ChatCompletions => read_chat(ev, st, unescape, tok, p),
        LlmApi::Responses => read_responses(ev, st, unescape, tok, p),
        LlmApi::Messages => read_messages(ev, st, unescape, tok, p),
    }
}

fn capture_for(api: LlmApi, ev: &Event, p: &[Seg]) -> Capture {
    match (api, p) {
        (
            LlmApi::ChatCompletions,
            [
                S(K::Choices),
                E,
                S(K::Delta),
                S(K::ToolCalls),
                E,
                S(K::Function),
                S(K::Name),
            ],
        ) => Capture::ToolName,
        (LlmApi::ChatCompletions, [S(K::Choices), E, S(K::FinishReason)]) => Capture::Finish,
        (LlmApi::Responses | LlmApi::Messages, [S(K::Type)]) if ev.kind == Kind::Unknown => {
            Capture::Type
        }
        (LlmApi::Responses, [S(K::Item), S(K::Type)]) => Capture::ItemType,
        (LlmApi::Responses, [S(K::Item), S(K::Name)]) => Capture::ToolName,
        (LlmApi::Messages, [S(K::ContentBlock), S(K::Type)]) => Capture::BlockType,
        (LlmApi::Messages, [S(K::ContentBlock), S(K::Name)]) => Capture::ToolName,
        (LlmApi::Messages, [S(K::Delta), S(K::StopReason)]) if ev.kind == Kind::MessageDelta => {
            Capture::Finish
        }
        _ => Capture::None,
    }
}

fn end_capture(api: LlmApi, ev: &mut Event, what: Capture) -> bool {
    let v = ev.cap.get();
    match what {
        Capture::None => false,
        Capture::ToolName => {
            ev.tool_name = Some(ev.cap);
            false
        }
        Capture::Finish => {
            if !v.is_empty() {
                ev.finish = Some(ev.cap);
            }
            false
        }
        Capture::Type => {
            ev.kind = kind_of(api, v);
            true
        }
        Capture::ItemType => {
            ev.tool_item = v == b"function_call";
            false
        }
        Capture::BlockType => {
            ev.tool_item = v == b"tool_use";
            ev.text_block = v == b"text";
            false
        }
    }
}

/// The bit of chat choice `index` (absent: 0) in [`Stream::choices_seen`]; from 127 up one.
fn choice_bit(index: Option<u32>) -> u128 {
    1u128 << index.unwrap_or(0).min(127)
}

fn index_of(tok: Tok<'_>) -> Option<u32> {
    match tok {
        Tok::Scalar(s) => std::str::from_utf8(s).ok()?.parse().ok(),
        _ => None,
    }
}

/// Feeds an argument piece (raw, escaped) of tool call `index`.
fn args_piece(ev: &mut Event, st: &Stream, unescape: &mut Unescape, index: u32, raw: &[u8]) {
    let (i, args) = ev.args.get_or_insert_with(|| (index, st.args_of(index)));
    if *i != index {
        // A second tool call's piece in one event: not followed (see the module doc).
        return;
    }
    unescape.feed(raw, &mut |b| args.feed(&[b]));
}

fn read_chat(
    ev: &mut Event,
    st: &Stream,
    unescape: &mut Unescape,
    tok: Tok<'_>,
    p: &[Seg],
) -> bool {
    match (p, tok) {
        ([S(K::Choices), E, S(K::Delta), S(K::Content)], Tok::Str(s)) if !s.is_empty() => {
            let first = !ev.text;
            ev.text = true;
            first
        }
        ([S(K::Choices), E, S(K::Delta), S(K::ToolCalls), E], Tok::Open) => {
            // A new entry: its index is its own.
            ev.tool_entry = true;
            ev.index = None;
            false
        }
        (
            [
                S(K::Choices),
                E,
                S(K::Delta),
                S(K::ToolCalls),
                E,
                S(K::Index),
            ],
            t,
        ) => {
            ev.index = index_of(t).or(ev.index);
            false
        }
        (
            [
                S(K::Choices),
                E,
                S(K::Delta),
                S(K::ToolCalls),
                E,
                S(K::Function),
                S(K::Arguments),
            ],
            Tok::Str(s),
        ) => {
            let index = ev.index.or(st.last_tool).unwrap_or(0);
            let before = ev.args.is_some_and(|(_, a)| a.bytes() > 0);
            args_piece(ev, st, unescape, index, s);
            !before
        }
        ([S(K::Choices), E, S(K::Index)], t) => {
            ev.choice = index_of(t).or(ev.choice);
            // The position before a finish reason depends on which choice it ends.
            ev.finish.is_some()
        }
        ([S(K::Usage)], Tok::Open) => {
            ev.usage = true;
            false
        }
        ([S(K::Error)], Tok::Open) => {
            ev.error = true;
            false
        }
        _ => false,
    }
}

fn read_responses(
    ev: &mut Event,
    st: &Stream,
    unescape: &mut Unescape,
    tok: Tok<'_>,
    p: &[Seg],
) -> bool {
    match (p, tok) {
        ([S(K::OutputIndex)], t) => {
            ev.index = index_of(t).or(ev.index);
            false
        }
        ([S(K::Delta)], Tok::Str(s)) if ev.kind == Kind::Args => {
            let index = ev.index.or(st.last_tool).unwrap_or(0);
            let before = ev.args.is_some_and(|(_, a)| a.bytes() > 0);
            args_piece(ev, st, unescape, index, s);
            !before
        }
        _ => false,
    }
}

fn read_messages(
    ev: &mut Event,
    st: &Stream,
    unescape: &mut Unescape,
    tok: Tok<'_>,
    p: &[Seg],
) -> bool {
    match (p, tok) {
        ([S(K::Index)], t) => {
            ev.index = index_of(t).or(ev.index);
            false
        }
        ([S(K::Delta), S(K::Text)], Tok::Str(s)) if !s.is_empty() => {
            let first = !ev.text;
            ev.text = true;
            first
        }
        ([S(K::Delta), S(K::PartialJson)], Tok::Str(s)) => {
            let index = ev.index.or(st.tool_block).unwrap_or(0);
            let before = ev.args.is_some_and(|(_, a)| a.bytes() > 0);
            args_piece(ev, st, unescape, index, s);
            !before
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "llm_tests.rs"]
mod tests;
