//! Reads a JSON-RPC message's top-level `id` and whether it is a response (`result` or
//! `error`) from its bytes as they stream past, holding nothing but the id's text.
//!
//! Why: the observer must classify an SSE event whatever its size, and its memory must not
//! depend on event size or on how many streams are open. Keeping the first 4 KiB of every event
//! in flight cost 4 KiB per stream (40 MB for 10,000 streams carrying large results) and still
//! missed the id of a large result written after it (the TypeScript SDK writes
//! `{"result":…,"jsonrpc":"2.0","id":7}`). This scanner sees every byte of the data and keeps
//! only the id.
//!
//! Invariants:
//! - Fed the data in any chunking, [`RpcScan::facts`] equals `audit::rpc::parse_head` of the
//!   whole data (same first-level reading: raw keys, the same value ends, the id parsed as JSON
//!   and rendered canonically, stop as soon as both facts are known) — except that an id whose
//!   text is longer than the limit given yields `None`.
//! - Constant work per byte (strings are skipped with `memchr`), state of a few words plus the
//!   id; never panics on any input.

use memchr::memchr2;

/// What the first level of a JSON-RPC message says about it being a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadFacts {
    /// The id, canonical JSON text (`7`, `"a"`).
    pub id: String,
    /// True for `error`, false for `result`.
    pub error: bool,
}

impl HeadFacts {
    /// A minimal JSON-RPC head carrying these facts (`{"id":7,"result":0}`), which
    /// `rpc::parse_head` and `rpc_head::is_response_head` read back as the same facts.
    pub fn to_head(&self) -> Vec<u8> {
        let kind = if self.error { "error" } else { "result" };
        format!(r#"{{"id":{},"{kind}":0}}"#, self.id).into_bytes()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Id,
    Result,
    Error,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the opening `{`.
    Start,
    /// Before a key's opening quote.
    KeyStart,
    /// Inside a key (`esc`: after a backslash).
    InKey { esc: bool },
    /// Before the `:`.
    Colon,
    /// Before a value.
    ValueStart,
    /// Inside a first-level string value.
    Str { esc: bool },
    /// Inside an object or array value.
    Nested {
        depth: usize,
        in_str: bool,
        esc: bool,
    },
    /// Inside a number, `true`, `false` or `null` (ends at `,`, `}`, `]` or whitespace).
    Scalar,
    /// After a value: `,` begins the next key, anything else ends the reading.
    AfterValue,
    /// Nothing more is read: the facts are final (or absent).
    Stopped,
}

/// The streaming reader (see the module doc).
#[derive(Debug, Clone)]
pub struct RpcScan {
    state: State,
    key: Key,
    /// Raw bytes of the key in progress (only its first 7 are needed to tell `id`, `result`,
    /// `error` from the rest).
    key_buf: [u8; 7],
    key_len: usize,
    /// Raw text of the `id` value in progress, then the canonical id.
    id_raw: Vec<u8>,
    id: Option<String>,
    kind: Option<bool>,
    id_limit: usize,
    failed: bool,
}

impl RpcScan {
    /// A reader keeping at most `id_limit` bytes of id text.
    pub fn new(id_limit: usize) -> Self {
        RpcScan {
            state: State::Start,
            key: Key::Other,
            key_buf: [0; 7],
            key_len: 0,
            id_raw: Vec::new(),
            id: None,
            kind: None,
            id_limit,
            failed: false,
        }
    }

    /// The facts, once the data ended: `Some` if and only if the first level showed an id and
    /// a `result` or `error` key (see the module doc for what counts).
    pub fn facts(&self) -> Option<HeadFacts> {
        if self.failed {
            return None;
        }
        Some(HeadFacts {
            id: self.id.clone()?,
            error: self.kind?,
        })
    }

    /// Bytes held beyond the struct.
    pub fn held(&self) -> usize {
        self.id_raw.capacity() + self.id.as_ref().map_or(0, String::capacity)
    }

    fn fail(&mut self) {
        self.failed = true;
        self.state = State::Stopped;
    }

    fn stop(&mut self) {
        self.state = State::Stopped;
        self.id_raw = Vec::new();
    }

    /// Reads the next bytes of the data.
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            if self.state == State::Stopped {
                return;
            }
            let c = bytes[i];
            match self.state {
                State::Start => {
                    if c == b'{' {
                        self.state = State::KeyStart;
                    } else if !c.is_ascii_whitespace() {
                        self.fail();
                    }
                }
                State::KeyStart => {
                    if c == b'"' {
                        self.key_len = 0;
                        self.state = State::InKey { esc: false };
                    } else if !c.is_ascii_whitespace() {
                        self.fail();
                    }
                }
                State::InKey { esc } => {
                    if esc {
                        self.push_key(c);
                        self.state = State::InKey { esc: false };
                    } else if c == b'"' {
                        self.key = self.key_kind();
                        self.state = State::Colon;
                    } else {
                        self.push_key(c);
                        self.state = State::InKey { esc: c == b'\\' };
                    }
                }
                State::Colon => {
                    if c == b':' {
                        self.state = State::ValueStart;
                        if matches!(self.key, Key::Result | Key::Error) {
                            self.kind = Some(self.key == Key::Error);
                            if self.id.is_some() {
                                // The value is the large part: what follows it is not needed.
                                self.stop();
                                return;
                            }
                        }
                    } else if !c.is_ascii_whitespace() {
                        self.fail();
                    }
                }
                State::ValueStart => {
                    if c.is_ascii_whitespace() {
                        i += 1;
                        continue;
                    }
                    self.id_raw.clear();
                    self.state = match c {
                        b'"' => State::Str { esc: false },
                        b'{' | b'[' => State::Nested {
                            depth: 1,
                            in_str: false,
                            esc: false,
                        },
                        // parse_head's scalar ends at these: an empty value.
                        b',' | b'}' | b']' => {
                            self.value_done();
                            continue;
                        }
                        _ => State::Scalar,
                    };
                    self.keep(&bytes[i..=i]);
                }
                State::Str { esc } => {
                    if esc {
                        self.keep(&bytes[i..=i]);
                        self.state = State::Str { esc: false };
                    } else {
                        // Skip to the next quote or backslash.
                        let rest = &bytes[i..];
                        let Some(j) = memchr2(b'"', b'\\', rest) else {
                            self.keep(rest);
                            return;
                        };
                        self.keep(&rest[..=j]);
                        i += j;
                        if rest[j] == b'"' {
                            self.value_done();
                        } else {
                            self.state = State::Str { esc: true };
                        }
                    }
                }
                State::Nested { depth, in_str, esc } => {
                    i += self.nested(&bytes[i..], depth, in_str, esc);
                    continue;
                }
                State::Scalar => {
                    if matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace() {
                        self.value_done();
                        continue;
                    }
                    self.keep(&bytes[i..=i]);
                }
                State::AfterValue => {
                    if c == b',' {
                        self.state = State::KeyStart;
                    } else if !c.is_ascii_whitespace() {
                        self.stop();
                    }
                }
                State::Stopped => return,
            }
            i += 1;
        }
    }

    /// Reads inside an object or array value; returns how many bytes it consumed.
    fn nested(&mut self, rest: &[u8], mut depth: usize, mut in_str: bool, mut esc: bool) -> usize {
        let mut j = 0;
        while j < rest.len() {
            if in_str {
                if esc {
                    esc = false;
                    j += 1;
                    continue;
                }
                match memchr2(b'"', b'\\', &rest[j..]) {
                    None => j = rest.len(),
                    Some(k) => {
                        j += k;
                        if rest[j] == b'"' {
                            in_str = false;
                        } else {
                            esc = true;
                        }
                        j += 1;
                    }
                }
                continue;
            }
            match rest[j] {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth -= 1;
                    if depth == 0 {
                        self.keep(&rest[..=j]);
                        self.value_done();
                        return j + 1;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        self.keep(rest);
        self.state = State::Nested { depth, in_str, esc };
        rest.len()
    }

    /// Keeps id text (only while the value is the id's).
    fn keep(&mut self, bytes: &[u8]) {
        if self.key != Key::Id || self.failed {
            return;
        }
        if self.id_raw.len() + bytes.len() > self.id_limit {
            self.fail();
            return;
        }
        self.id_raw.extend_from_slice(bytes);
    }

    /// A first-level value ended (the byte after it is not consumed).
    fn value_done(&mut self) {
        if self.failed {
            return;
        }
        if self.key == Key::Id {
            match serde_json::from_slice::<serde_json::Value>(&self.id_raw) {
                Ok(v) => self.id = Some(v.to_string()),
                Err(_) => return self.fail(),
            }
        }
        if self.id.is_some() && self.kind.is_some() {
            return self.stop();
        }
        self.state = State::AfterValue;
    }

    fn push_key(&mut self, c: u8) {
        if let Some(slot) = self.key_buf.get_mut(self.key_len) {
            *slot = c;
        }
        self.key_len += 1;
    }

    fn key_kind(&self) -> Key {
        match self.key_buf.get(..self.key_len) {
            Some(b"id") => Key::Id,
            Some(b"result") => Key::Result,
            Some(b"error") => Key::Error,
            _ => Key::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::rpc::{RpcMessage, parse_head};

    /// What `parse_head` reads from the whole data, as facts.
    fn reference(data: &[u8]) -> Option<HeadFacts> {
        match parse_head(data)? {
            RpcMessage::Response { id, error, .. } => Some(HeadFacts { id, error }),
            _ => None,
        }
    }

    /// The scanner's facts for `data` cut at every split point (and byte by byte).
    fn scanned_every_way(data: &[u8]) -> Vec<Option<HeadFacts>> {
        let mut out = Vec::new();
        for cut in 0..=data.len() {
            let mut s = RpcScan::new(1 << 20);
            s.feed(&data[..cut]);
            s.feed(&data[cut..]);
            out.push(s.facts());
        }
        let mut s = RpcScan::new(1 << 20);
        for b in data {
            s.feed(std::slice::from_ref(b));
        }
        out.push(s.facts());
        out
    }

    #[test]
    fn streamed_facts_equal_parse_head_of_the_whole_data_under_every_split() {
        let cases: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"aaaa"}]}}"#,
            br#"{"result":{"id":9,"s":"}\"]"},"jsonrpc":"2.0","id":"a\"b"}"#,
            br#" { "id" : 7 , "error" : { "code" : -1 } } "#,
            br#"{"id":1e2,"result":null}"#,
            br#"{"id":7,"result":"#,
            br#"{"result":1,"id":7"#,
            br#"{"result":1,"id":7}"#,
            br#"{"result":[1,2,"]"],"id":[1,{"a":2}]}"#,
            br#"{"method":"notifications/progress","params":{"progressToken":1}}"#,
            br#"{"id":7,"method":"tools/call","params":{}}"#,
            br#"{"i\u0064":7,"result":1}"#,
            br#"{"id":tru,"result":1}"#,
            br#"{"id":,"result":1}"#,
            br#"{"x":,"id":3,"result":1}"#,
            br#"{"id":7 "result":1}"#,
            br#"{"id":7,"id":8,"result":1}"#,
            br#"{"error":1,"result":2,"id":7}"#,
            br#"{"idx":7,"resultx":1}"#,
            br#"{}"#,
            br#"[{"id":7,"result":1}]"#,
            br#"{"id":"\"#,
            b"not json",
            b"",
            b"\n{\"id\":7,\n\"result\":1}",
        ];
        for data in cases {
            let want = reference(data);
            for (i, got) in scanned_every_way(data).into_iter().enumerate() {
                assert_eq!(
                    got,
                    want,
                    "split {i} of {:?}",
                    String::from_utf8_lossy(data)
                );
            }
        }
    }

    #[test]
    fn an_id_written_after_a_large_result_is_found() {
        // The TypeScript SDK's order: the result first, the id last.
        let text = "x\\\"{[".repeat(300_000);
        let data =
            format!(r#"{{"result":{{"content":[{{"text":"{text}"}}]}},"jsonrpc":"2.0","id":42}}"#);
        let mut s = RpcScan::new(1024);
        for piece in data.as_bytes().chunks(4096) {
            s.feed(piece);
        }
        let facts = s.facts().expect("facts");
        assert_eq!((facts.id.as_str(), facts.error), ("42", false));
        assert!(s.held() <= 1024, "held {}", s.held());
        assert_eq!(reference(facts.to_head().as_slice()), Some(facts));
    }

    #[test]
    fn an_id_longer_than_the_limit_yields_no_facts() {
        let long = format!(r#"{{"id":"{}","result":1}}"#, "a".repeat(100));
        let mut s = RpcScan::new(64);
        s.feed(long.as_bytes());
        assert_eq!(s.facts(), None);
        let mut s = RpcScan::new(128);
        s.feed(long.as_bytes());
        assert!(s.facts().is_some());
    }

    #[test]
    fn the_facts_head_reads_back_as_the_same_facts() {
        for (id, error) in [("7", false), (r#""a\"b""#, true), ("[1,{\"x\":2}]", false)] {
            let f = HeadFacts {
                id: id.to_owned(),
                error,
            };
            assert_eq!(reference(&f.to_head()), Some(f.clone()));
            assert!(super::super::rpc_head::is_response_head(&f.to_head(), id));
        }
    }

    proptest::proptest! {
        /// Random JSON-ish text: the streamed facts equal the reference at any split.
        #[test]
        fn any_text_any_split_agrees_with_the_reference(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "{", "}", "[", "]", ",", ":", " ", "\"", "\\", "\"id\"", "\"result\"",
                    "\"error\"", "7", "\"a\"", "null", "tru", "\n", "x",
                ]),
                0..24,
            ),
            cut in 0usize..200,
        ) {
            let data = parts.concat();
            let cut = cut.min(data.len());
            let mut s = RpcScan::new(1 << 20);
            s.feed(&data.as_bytes()[..cut]);
            s.feed(&data.as_bytes()[cut..]);
            proptest::prop_assert_eq!(s.facts(), reference(data.as_bytes()), "{:?}", data);
        }
    }
}
