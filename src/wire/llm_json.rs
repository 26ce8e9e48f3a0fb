//! A streaming JSON reader that reports, for every value it passes, where the value sits (the
//! path of known keys from the root), so the LLM interpreter can pick `choices[].delta.content`
//! or `delta.partial_json` out of an event's data as it streams, without keeping the data.
//!
//! Invariants: constant work per byte outside strings, string contents skipped with `memchr`
//! and handed on as raw (still escaped) slices of the input; fixed-size state (paths deeper
//! than [`MAX_DEPTH`] are reported as [`Path::deep`] and match nothing; the depth itself is
//! counted to any level, so closing brackets are still matched); keys are recognised from a
//! fixed table ([`Key`]), any other key is [`Key::Other`]; fed the same bytes in any split, it
//! reports the same tokens (string contents possibly in more pieces); invalid JSON stops the
//! reading for the rest of the value (no token after the error), never panics.

use memchr::memchr2;

/// Levels of the path kept; deeper values are reported with [`Path::deep`] set.
pub const MAX_DEPTH: usize = 8;

const KEY_CAP: usize = 20;
const SCALAR_CAP: usize = 24;

/// The keys the LLM interpreter reads (any other key is [`Key::Other`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// `choices`
    Choices,
    /// `delta`
    Delta,
    /// `content`
    Content,
    /// `tool_calls`
    ToolCalls,
    /// `index`
    Index,
    /// `id`
    Id,
    /// `function`
    Function,
    /// `name`
    Name,
    /// `arguments`
    Arguments,
    /// `finish_reason`
    FinishReason,
    /// `usage`
    Usage,
    /// `error`
    Error,
    /// `type`
    Type,
    /// `item`
    Item,
    /// `output_index`
    OutputIndex,
    /// `response`
    Response,
    /// `status`
    Status,
    /// `content_block`
    ContentBlock,
    /// `partial_json`
    PartialJson,
    /// `text`
    Text,
    /// `stop_reason`
    StopReason,
    /// Any other key (keep it last: [`PathSet`]'s table has a column per variant up to it).
    Other,
}

/// A set of paths, as a tree of their steps, for [`JsonPath::only`]: stepping into a value
/// finds the step among its parent's few children (no comparison of whole paths).
#[derive(Debug, Clone)]
pub struct PathSet {
    nodes: Vec<Node>,
    /// `next[node * SEGS + seg_index(step)]`: the child of `node` reached by `step` ([`NONE`]:
    /// none), so stepping into a value is one load, not a walk of the siblings.
    next: Vec<u8>,
}

/// Distinct steps: every [`Key`] and [`Seg::Elem`].
const SEGS: usize = Key::Other as usize + 2;

/// The column of `s` in [`PathSet::next`].
fn seg_index(s: Seg) -> usize {
    match s {
        Seg::Key(k) => k as usize,
        Seg::Elem => SEGS - 1,
    }
}

/// One step of a [`PathSet`]'s tree (node 0 is the root, the empty path).
#[derive(Debug, Clone, Copy)]
struct Node {
    step: Seg,
    first_child: u8,
    next_sibling: u8,
    /// The path from the root to here is in the set.
    wanted: bool,
}

/// No node (also: the current path leaves the set's tree).
const NONE: u8 = u8::MAX;

impl PathSet {
    /// The set of `paths` (paths deeper than [`MAX_DEPTH`], and any beyond the tree's 254
    /// nodes, are left out: they could never match).
    pub fn new(paths: &[&[Seg]]) -> Self {
        let root = Node {
            step: Seg::Elem,
            first_child: NONE,
            next_sibling: NONE,
            wanted: false,
        };
        let mut nodes = vec![root];
        'paths: for p in paths.iter().filter(|p| p.len() <= MAX_DEPTH) {
            let mut at = 0;
            for &step in *p {
                at = match child(&nodes, at, step) {
                    Some(c) => c,
                    None if nodes.len() < usize::from(NONE) => {
                        // Appended after the last sibling: children are tried in the order
                        // the paths name them.
                        let new = nodes.len() as u8;
                        nodes.push(Node {
                            step,
                            first_child: NONE,
                            next_sibling: NONE,
                            wanted: false,
                        });
                        let mut link = &mut nodes[usize::from(at)].first_child;
                        while *link != NONE {
                            let c = usize::from(*link);
                            link = &mut nodes[c].next_sibling;
                        }
                        *link = new;
                        new
                    }
                    None => continue 'paths,
                };
            }
            nodes[usize::from(at)].wanted = true;
        }
        let mut next = vec![NONE; nodes.len() * SEGS];
        for (at, n) in nodes.iter().enumerate() {
            let mut c = n.first_child;
            while let Some(child) = nodes.get(usize::from(c)) {
                next[at * SEGS + seg_index(child.step)] = c;
                c = child.next_sibling;
            }
        }
        PathSet { nodes, next }
    }

    /// The node reached from node `at` by `step` ([`NONE`]: the path leaves the tree, as it
    /// does from [`NONE`]).
    fn step(&self, at: u8, step: Seg) -> u8 {
        self.next
            .get(usize::from(at) * SEGS + seg_index(step))
            .copied()
            .unwrap_or(NONE)
    }
}

/// The child of node `at` reached by `step`, if any.
fn child(nodes: &[Node], at: u8, step: Seg) -> Option<u8> {
    let mut c = nodes.get(usize::from(at))?.first_child;
    while let Some(n) = nodes.get(usize::from(c)) {
        if n.step == step {
            return Some(c);
        }
        c = n.next_sibling;
    }
    None
}

/// One step of a path: a member under a key, or an array element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seg {
    /// The member under this key.
    Key(Key),
    /// An element of an array.
    Elem,
}

/// Where a value sits: the steps from the root (the data's top-level value is the empty path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Path {
    segs: [Seg; MAX_DEPTH],
    len: u8,
    /// Levels beyond [`MAX_DEPTH`] (their steps are not kept).
    deep: u32,
}

impl Path {
    const EMPTY: Path = Path {
        segs: [Seg::Elem; MAX_DEPTH],
        len: 0,
        deep: 0,
    };

    /// The steps, when the path is not deeper than [`MAX_DEPTH`].
    pub fn segs(&self) -> Option<&[Seg]> {
        (self.deep == 0).then(|| &self.segs[..self.len as usize])
    }

    /// True if and only if the path is exactly `want`.
    pub fn is(&self, want: &[Seg]) -> bool {
        self.segs() == Some(want)
    }

    fn push(&mut self, s: Seg) {
        if self.deep == 0 && (self.len as usize) < MAX_DEPTH {
            self.segs[self.len as usize] = s;
            self.len += 1;
        } else {
            self.deep += 1;
        }
    }

    fn pop(&mut self) {
        if self.deep > 0 {
            self.deep -= 1;
        } else {
            self.len = self.len.saturating_sub(1);
        }
    }
}

/// What the reader passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tok<'a> {
    /// An object or array opened (the path is the container's).
    Open,
    /// The container at the path closed.
    Close,
    /// A string value began.
    StrStart,
    /// Raw (escaped) content of the string value in progress.
    Str(&'a [u8]),
    /// The string value ended (the slice is its closing quote).
    StrEnd(&'a [u8]),
    /// A number, `true`, `false` or `null`, whole (its first 24 bytes).
    Scalar(&'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S {
    /// A value is expected.
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{` (`first`) or `,` in an object: a key.
    Key { first: bool },
    /// Inside a key.
    InKey { esc: bool },
    /// After a key: `:`.
    Colon,
    /// Inside a string value.
    InStr { esc: bool },
    /// Inside a scalar.
    Scalar,
    /// After a value.
    After,
    /// Invalid JSON: nothing more.
    Stop,
    /// The top-level value ended.
    Done,
}

/// The streaming reader (see the module doc). Reset it per value with [`JsonPath::reset`].
#[derive(Debug, Clone)]
pub struct JsonPath {
    state: S,
    path: Path,
    /// Open containers (the innermost is at nesting level `open - 1`).
    open: u32,
    /// Bit `i` set: the open container at nesting level `i` is an object.
    objects: u128,
    key: [u8; KEY_CAP],
    key_len: usize,
    scalar: [u8; SCALAR_CAP],
    scalar_len: usize,
    /// The paths whose tokens are reported ([`JsonPath::only`]); `None`: every path.
    wanted: Option<&'static PathSet>,
    /// `at[i]`: the node of `wanted`'s tree the current path's first `i` steps reach
    /// ([`NONE`]: they leave the tree).
    at: [u8; MAX_DEPTH + 1],
    /// Bit `i` set: the current path's first `i` steps are one of `wanted`.
    wanted_bits: u16,
}

impl Default for JsonPath {
    fn default() -> Self {
        JsonPath {
            state: S::Value,
            path: Path::EMPTY,
            open: 0,
            objects: 0,
            key: [0; KEY_CAP],
            key_len: 0,
            scalar: [0; SCALAR_CAP],
            scalar_len: 0,
            wanted: None,
            at: [0; MAX_DEPTH + 1],
            wanted_bits: 1,
        }
    }
}

impl JsonPath {
    /// A reader that reports only the tokens whose path is exactly one of `wanted` (it still
    /// reads everything else, to know where it is): a consumer that ignores every other path
    /// is spared a call per token it would ignore.
    pub fn only(wanted: &'static PathSet) -> Self {
        let mut r = JsonPath {
            wanted: Some(wanted),
            ..JsonPath::default()
        };
        r.reset();
        r
    }

    /// Back to the start of a new value.
    pub fn reset(&mut self) {
        self.state = S::Value;
        self.path = Path::EMPTY;
        self.open = 0;
        self.objects = 0;
        self.key_len = 0;
        self.scalar_len = 0;
        self.at[0] = 0;
        self.wanted_bits = match self.wanted {
            None => 1,
            Some(w) => u16::from(w.nodes.first().is_some_and(|n| n.wanted)),
        };
    }

    /// True if and only if tokens at the current path are reported.
    fn wants(&self) -> bool {
        match self.wanted {
            None => true,
            Some(_) => self.path.deep == 0 && self.wanted_bits & (1 << self.path.len) != 0,
        }
    }

    /// Steps into `s`, noting where the new path is in `wanted`'s tree.
    fn push(&mut self, s: Seg) {
        self.path.push(s);
        let Some(w) = self.wanted else {
            return;
        };
        if self.path.deep > 0 {
            return;
        }
        let len = usize::from(self.path.len);
        let bit = 1u16 << len;
        self.wanted_bits &= !bit;
        let node = w.step(self.at[len - 1], s);
        self.at[len] = node;
        if w.nodes.get(usize::from(node)).is_some_and(|n| n.wanted) {
            self.wanted_bits |= bit;
        }
    }

    /// True once the input stopped being JSON.
    pub fn failed(&self) -> bool {
        self.state == S::Stop
    }

    /// Ends the value: a scalar still open at the top level is reported.
    pub fn finish(&mut self, on: &mut impl FnMut(Tok<'_>, &Path)) {
        if self.state == S::Scalar {
            if self.wants() {
                on(Tok::Scalar(&self.scalar[..self.scalar_len]), &self.path);
            }
            self.state = S::Done;
        }
    }

    /// True if and only if the innermost open container is an object.
    fn in_object(&self) -> bool {
        self.open > 0 && self.objects & (1 << (self.open - 1)) != 0
    }

    /// Reads `bytes`, reporting tokens to `on`.
    pub fn feed(&mut self, bytes: &[u8], on: &mut impl FnMut(Tok<'_>, &Path)) {
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                S::Stop | S::Done => {
                    if self.state == S::Done && !matches!(bytes[i], b' ' | b'\t' | b'\n' | b'\r') {
                        self.state = S::Stop;
                    }
                    if self.state == S::Stop {
                        return;
                    }
                    i += 1;
                }
                S::InStr { esc } => {
                    let rest = &bytes[i..];
                    if esc {
                        // The escaped byte is content; `\"` does not end the string.
                        if self.wants() {
                            on(Tok::Str(&rest[..1]), &self.path);
                        }
                        self.state = S::InStr { esc: false };
                        i += 1;
                        continue;
                    }
                    match quote_or_escape(rest) {
                        None => {
                            if self.wants() {
                                on(Tok::Str(rest), &self.path);
                            }
                            i = bytes.len();
                        }
                        Some(n) if rest[n] == b'\\' => {
                            if self.wants() {
                                on(Tok::Str(&rest[..=n]), &self.path);
                            }
                            self.state = S::InStr { esc: true };
                            i += n + 1;
                        }
                        Some(n) => {
                            if n > 0 && self.wants() {
                                on(Tok::Str(&rest[..n]), &self.path);
                            }
                            if self.wants() {
                                on(Tok::StrEnd(&rest[n..=n]), &self.path);
                            }
                            i += n + 1;
                            self.end_value();
                        }
                    }
                }
                S::InKey { esc } => {
                    let rest = &bytes[i..];
                    if esc {
                        self.key_bytes(&rest[..1]);
                        self.state = S::InKey { esc: false };
                        i += 1;
                        continue;
                    }
                    match quote_or_escape(rest) {
                        None => {
                            self.key_bytes(rest);
                            i = bytes.len();
                        }
                        Some(n) if rest[n] == b'\\' => {
                            self.key_bytes(&rest[..=n]);
                            i += n + 1;
                            self.state = S::InKey { esc: true };
                        }
                        Some(n) => {
                            i += n + 1;
                            if bytes.get(i) == Some(&b':') {
                                // The usual `"key":` goes on at once to the value's first byte
                                // (a key read whole here is named from the input itself).
                                let key = if self.key_len == 0 {
                                    key_named(&rest[..n])
                                } else {
                                    self.key_bytes(&rest[..n]);
                                    self.current_key()
                                };
                                self.colon_key(key);
                                i += 1;
                                if let Some(&b) = bytes.get(i)
                                    && !is_ws(b)
                                {
                                    self.begin_value(b, on);
                                    i += 1;
                                }
                            } else {
                                self.key_bytes(&rest[..n]);
                                self.state = S::Colon;
                            }
                        }
                    }
                }
                S::Scalar => {
                    // The scalar's bytes up to its end, at once; the end by `byte`.
                    let rest = &bytes[i..];
                    let n = rest
                        .iter()
                        .position(|&b| matches!(b, b',' | b'}' | b']') || is_ws(b))
                        .unwrap_or(rest.len());
                    let from = self.scalar_len.min(SCALAR_CAP);
                    let keep = n.min(SCALAR_CAP - from);
                    self.scalar[from..from + keep].copy_from_slice(&rest[..keep]);
                    self.scalar_len = (self.scalar_len + n).min(SCALAR_CAP);
                    i += n;
                    if let Some(&b) = bytes.get(i) {
                        self.byte(b, on);
                        i += 1;
                    }
                }
                _ => {
                    self.byte(bytes[i], on);
                    i += 1;
                    // A key's opening quote right after `{` or `,`: into the key at once.
                    if matches!(self.state, S::Key { .. }) && bytes.get(i) == Some(&b'"') {
                        self.key_len = 0;
                        self.state = S::InKey { esc: false };
                        i += 1;
                    }
                }
            }
        }
    }

    /// Key bytes (the first [`KEY_CAP`] are kept; the length counts them all).
    fn key_bytes(&mut self, b: &[u8]) {
        let from = self.key_len.min(KEY_CAP);
        let n = b.len().min(KEY_CAP - from);
        self.key[from..from + n].copy_from_slice(&b[..n]);
        self.key_len = self.key_len.saturating_add(b.len());
    }

    fn current_key(&self) -> Key {
        if self.key_len > KEY_CAP {
            return Key::Other;
        }
        key_named(&self.key[..self.key_len])
    }

    /// The colon after a key: the value under it comes next.
    fn colon(&mut self) {
        self.colon_key(self.current_key());
    }

    /// The colon after `key`.
    fn colon_key(&mut self, key: Key) {
        self.push(Seg::Key(key));
        self.state = S::Value;
    }

    /// A value ended: back to its container (or done at the top level).
    fn end_value(&mut self) {
        if self.open == 0 {
            self.state = S::Done;
        } else {
            self.path.pop();
            self.state = S::After;
        }
    }

    /// A value begins with byte `b` (its step is already on the path).
    fn begin_value(&mut self, b: u8, on: &mut impl FnMut(Tok<'_>, &Path)) {
        match b {
            b'{' | b'[' => {
                if self.open >= 128 {
                    self.state = S::Stop;
                    return;
                }
                if self.wants() {
                    on(Tok::Open, &self.path);
                }
                if b == b'{' {
                    self.objects |= 1 << self.open;
                } else {
                    self.objects &= !(1 << self.open);
                }
                self.open += 1;
                self.state = if b == b'{' {
                    S::Key { first: true }
                } else {
                    S::ArrayFirst
                };
            }
            b'"' => {
                if self.wants() {
                    on(Tok::StrStart, &self.path);
                }
                self.state = S::InStr { esc: false };
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                self.scalar[0] = b;
                self.scalar_len = 1;
                self.state = S::Scalar;
            }
            _ => self.state = S::Stop,
        }
    }

    fn close(&mut self, object: bool, on: &mut impl FnMut(Tok<'_>, &Path)) {
        if self.open == 0 || self.in_object() != object {
            self.state = S::Stop;
            return;
        }
        self.open -= 1;
        if self.wants() {
            on(Tok::Close, &self.path);
        }
        self.end_value();
    }

    fn byte(&mut self, b: u8, on: &mut impl FnMut(Tok<'_>, &Path)) {
        let ws = is_ws(b);
        match self.state {
            S::Value => {
                if !ws {
                    self.begin_value(b, on);
                }
            }
            S::ArrayFirst => match b {
                _ if ws => {}
                b']' => self.close(false, on),
                _ => {
                    self.push(Seg::Elem);
                    self.begin_value(b, on);
                }
            },
            S::Key { first } => match b {
                _ if ws => {}
                b'"' => {
                    self.key_len = 0;
                    self.state = S::InKey { esc: false };
                }
                b'}' if first => self.close(true, on),
                _ => self.state = S::Stop,
            },
            S::Colon => match b {
                _ if ws => {}
                b':' => self.colon(),
                _ => self.state = S::Stop,
            },
            S::Scalar => {
                if matches!(b, b',' | b'}' | b']') || ws {
                    if self.wants() {
                        on(Tok::Scalar(&self.scalar[..self.scalar_len]), &self.path);
                    }
                    self.end_value();
                    if !ws && self.state == S::After {
                        self.after(b, on);
                    } else if !ws {
                        self.state = S::Stop;
                    }
                } else {
                    if self.scalar_len < SCALAR_CAP {
                        self.scalar[self.scalar_len] = b;
                    }
                    self.scalar_len = self.scalar_len.saturating_add(1).min(SCALAR_CAP);
                }
            }
            S::After => {
                if !ws {
                    self.after(b, on);
                }
            }
            S::InStr { .. } | S::InKey { .. } | S::Stop | S::Done => {}
        }
    }

    fn after(&mut self, b: u8, on: &mut impl FnMut(Tok<'_>, &Path)) {
        match b {
            b',' => {
                if self.in_object() {
                    self.state = S::Key { first: false };
                } else if self.open > 0 {
                    self.push(Seg::Elem);
                    self.state = S::Value;
                } else {
                    self.state = S::Stop;
                }
            }
            b'}' => self.close(true, on),
            b']' => self.close(false, on),
            _ => self.state = S::Stop,
        }
    }
}

/// The key named `name`: dispatched on the length first, then compared with the one to four
/// known keys of that length (a plain `match` on the bytes tries all 21 in turn).
fn key_named(name: &[u8]) -> Key {
    use Key::*;
    let of = |cands: &[(&[u8], Key)]| {
        cands
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(Other, |&(_, k)| k)
    };
    match name.len() {
        2 => of(&[(b"id", Id)]),
        4 => of(&[
            (b"name", Name),
            (b"type", Type),
            (b"item", Item),
            (b"text", Text),
        ]),
        5 => of(&[
            (b"delta", Delta),
            (b"index", Index),
            (b"usage", Usage),
            (b"error", Error),
        ]),
        6 => of(&[(b"status", Status)]),
        7 => of(&[(b"choices", Choices), (b"content", Content)]),
        8 => of(&[(b"function", Function), (b"response", Response)]),
        9 => of(&[(b"arguments", Arguments)]),
        10 => of(&[(b"tool_calls", ToolCalls)]),
        11 => of(&[(b"stop_reason", StopReason)]),
        12 => of(&[
            (b"output_index", OutputIndex),
            (b"partial_json", PartialJson),
        ]),
        13 => of(&[
            (b"finish_reason", FinishReason),
            (b"content_block", ContentBlock),
        ]),
        _ => Other,
    }
}

/// The first `"` or `\` in `s`: eight bytes at a time over the first 32 (keys and most token
/// strings end there, before `memchr2`'s setup would pay off), `memchr2` beyond.
fn quote_or_escape(s: &[u8]) -> Option<usize> {
    const SHORT: usize = 32;
    let mut i = 0;
    while i < SHORT {
        let Some(word) = s.get(i..i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
            return s[i..]
                .iter()
                .position(|&b| b == b'"' || b == b'\\')
                .map(|n| n + i);
        };
        let w = u64::from_le_bytes(word);
        let hits = zero_bytes(w ^ splat(b'"')) | zero_bytes(w ^ splat(b'\\'));
        if hits != 0 {
            return Some(i + hits.trailing_zeros() as usize / 8);
        }
        i += 8;
    }
    memchr2(b'"', b'\\', &s[SHORT..]).map(|n| n + SHORT)
}

/// `b` in every byte of a word.
const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// The high bit of each zero byte of `w` set, and possibly of bytes above the lowest zero byte
/// (a borrow): the lowest set bit is always the lowest zero byte's.
fn zero_bytes(w: u64) -> u64 {
    w.wrapping_sub(splat(1)) & !w & splat(0x80)
}

/// JSON whitespace.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: [(&[u8], Key); 21] = [
        (b"choices", Key::Choices),
        (b"delta", Key::Delta),
        (b"content", Key::Content),
        (b"tool_calls", Key::ToolCalls),
        (b"index", Key::Index),
        (b"id", Key::Id),
        (b"function", Key::Function),
        (b"name", Key::Name),
        (b"arguments", Key::Arguments),
        (b"finish_reason", Key::FinishReason),
        (b"usage", Key::Usage),
        (b"error", Key::Error),
        (b"type", Key::Type),
        (b"item", Key::Item),
        (b"output_index", Key::OutputIndex),
        (b"response", Key::Response),
        (b"status", Key::Status),
        (b"content_block", Key::ContentBlock),
        (b"partial_json", Key::PartialJson),
        (b"text", Key::Text),
        (b"stop_reason", Key::StopReason),
    ];

    /// (path, token) pairs as text, string pieces joined.
    fn tokens(parts: &[&[u8]]) -> Vec<String> {
        tokens_of(JsonPath::default(), parts)
    }

    fn tokens_of(mut r: JsonPath, parts: &[&[u8]]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut on = |t: Tok<'_>, p: &Path| {
            let path = match p.segs() {
                Some(s) => format!("{s:?}"),
                None => "deep".into(),
            };
            match t {
                Tok::Str(s) => {
                    let s = String::from_utf8_lossy(s).to_string();
                    match out.last_mut() {
                        Some(l) if l.starts_with(&format!("{path} str ")) => l.push_str(&s),
                        _ => out.push(format!("{path} str {s}")),
                    }
                }
                other => out.push(format!("{path} {other:?}")),
            }
        };
        for p in parts {
            r.feed(p, &mut on);
        }
        r.finish(&mut on);
        out
    }

    const CHUNK: &[u8] = br#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hi \"x\"","tool_calls":[{"index":2,"function":{"arguments":"{\"a\""}}]},"finish_reason":null}],"usage":{"n":[1,{"deep":{"a":{"b":{"c":{"d":{"e":1}}}}}}]}}"#;

    #[test]
    fn a_filtered_reader_reports_exactly_the_tokens_at_its_paths() {
        use Seg::{Elem as E, Key as K};
        let content: &[Seg] = &[K(Key::Choices), E, K(Key::Delta), K(Key::Content)];
        let tool: &[Seg] = &[K(Key::Choices), E, K(Key::Delta), K(Key::ToolCalls), E];
        let wanted: &'static PathSet = Box::leak(Box::new(PathSet::new(&[
            content,
            tool,
            &[K(Key::Usage)],
            &[],
        ])));
        let all = tokens(&[CHUNK]);
        let kept: Vec<&String> = all
            .iter()
            .filter(|t| {
                [
                    format!("{content:?} "),
                    format!("{tool:?} "),
                    "[Key(Usage)] ".to_owned(),
                    "[] ".to_owned(),
                ]
                .iter()
                .any(|p| t.starts_with(p.as_str()))
            })
            .collect();
        assert!(kept.len() >= 6 && kept.len() < all.len(), "{kept:?}");
        for k in 0..=CHUNK.len() {
            let got = tokens_of(JsonPath::only(wanted), &[&CHUNK[..k], &CHUNK[k..]]);
            assert_eq!(got.iter().collect::<Vec<_>>(), kept, "split at {k}");
        }
        // No path wanted: nothing reported, and the value is still read to its end.
        let mut none = JsonPath::only(Box::leak(Box::new(PathSet::new(&[]))));
        let mut n = 0;
        none.feed(CHUNK, &mut |_, _| n += 1);
        assert_eq!((n, none.state), (0, S::Done));
    }

    #[test]
    fn values_are_reported_at_their_paths() {
        let t = tokens(&[CHUNK]);
        use Key::*;
        let content = format!(
            "{:?} str Hi \\\"x\\\"",
            [
                Seg::Key(Choices),
                Seg::Elem,
                Seg::Key(Delta),
                Seg::Key(Content)
            ]
        );
        assert!(t.contains(&content), "{t:#?}");
        let args = format!(
            "{:?} str {{\\\"a\\\"",
            [
                Seg::Key(Choices),
                Seg::Elem,
                Seg::Key(Delta),
                Seg::Key(ToolCalls),
                Seg::Elem,
                Seg::Key(Function),
                Seg::Key(Arguments)
            ]
        );
        assert!(t.contains(&args), "{t:#?}");
        let index = format!(
            "{:?} Scalar([50])",
            [
                Seg::Key(Choices),
                Seg::Elem,
                Seg::Key(Delta),
                Seg::Key(ToolCalls),
                Seg::Elem,
                Seg::Key(Index)
            ]
        );
        assert!(t.contains(&index), "{t:#?}");
        let finish = format!(
            "{:?} Scalar([110, 117, 108, 108])",
            [Seg::Key(Choices), Seg::Elem, Seg::Key(FinishReason)]
        );
        assert!(t.contains(&finish), "{t:#?}");
        assert!(t.iter().any(|l| l.starts_with("deep")), "{t:#?}");
        assert_eq!(t.last().map(String::as_str), Some("[] Close"));
    }

    #[test]
    fn every_split_reports_the_same_tokens() {
        let whole = tokens(&[CHUNK]);
        for k in 0..=CHUNK.len() {
            assert_eq!(tokens(&[&CHUNK[..k], &CHUNK[k..]]), whole, "split at {k}");
        }
    }

    #[test]
    fn every_known_key_is_recognised_and_others_are_not() {
        let key = |name: &[u8]| {
            let mut r = JsonPath::default();
            for b in name.chunks(3) {
                r.key_bytes(b);
            }
            r.current_key()
        };
        for (name, k) in KEYS {
            assert_eq!(key(name), k, "{}", String::from_utf8_lossy(name));
        }
        for other in [
            &b""[..],
            b"Choices",
            b"choice",
            b"contents",
            b"content_blocks",
        ] {
            assert_eq!(key(other), Key::Other);
        }
        // A key longer than the kept bytes is another key, even if it begins with a known one.
        assert_eq!(key(b"finish_reason_and_then_some_more"), Key::Other);
    }

    #[test]
    fn the_word_scan_finds_the_first_quote_or_escape_at_every_length_and_place() {
        for len in 0..80 {
            for at in 0..=len {
                for (first, second) in [(b'"', b'\\'), (b'\\', b'"'), (b'"', b'"')] {
                    // Bytes just off the targets (`!` and `]`), and the high bytes that a
                    // borrow would flag wrongly were the lowest match not the first.
                    let mut s: Vec<u8> =
                        (0..len).map(|k| [b'!', b']', 0x80, 0xff][k % 4]).collect();
                    if at < len {
                        s[at] = first;
                        if at + 1 < len {
                            s[at + 1] = second;
                        }
                    }
                    let want = s.iter().position(|&b| b == b'"' || b == b'\\');
                    assert_eq!(quote_or_escape(&s), want, "len {len} at {at}");
                }
            }
        }
    }

    #[test]
    fn invalid_json_stops_without_panicking() {
        let t = tokens(&[b"[DONE]"]);
        assert_eq!(t, ["[] Open"]);
        for bad in [
            &b"{\"a\" 1}"[..],
            b"}",
            b"{\"a\":1]",
            b"[1,]x",
            b"{}x",
            b"\xff",
        ] {
            let mut r = JsonPath::default();
            r.feed(bad, &mut |_, _| {});
            assert!(r.failed(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
