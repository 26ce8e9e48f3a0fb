//! Whether a tool call's arguments, as far as they arrived, are a complete JSON value, a valid
//! prefix of one, or not JSON — decided incrementally as the argument text streams past.
//!
//! Why: an LLM streams a tool call's arguments as pieces of JSON text inside string fields
//! (`function.arguments`, `partial_json`, `delta`); a cut leaves the client with a prefix, and
//! whether that prefix parses is what separates a visible failure from a plausible wrong call.
//! The observer must know it without keeping the text.
//!
//! Invariants: constant work per byte, a fixed-size state (nesting kept as a 128-bit stack:
//! deeper text is [`ArgsStatus::Unknown`], never a guess); fed the same text in any split, the
//! status is the same; never panics; bytes from 0x80 up are string content, never checked as
//! UTF-8 (a client reads the stream through the WHATWG decoder, which replaces an invalid
//! sequence with U+FFFD, so its JSON parser sees valid text there). [`Unescape`] turns the
//! JSON-string-escaped form in which the pieces travel into the argument text itself (`\"` →
//! `"`, `\uXXXX` → the character, or a non-ASCII stand-in byte), one byte at a time, with state
//! across splits.

/// What the argument text seen so far is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ArgsStatus {
    /// Nothing but whitespace yet.
    Empty,
    /// A valid prefix of a JSON value, not yet complete (a cut here leaves invalid JSON).
    Partial,
    /// One complete JSON value (trailing whitespace allowed).
    Complete,
    /// Not a prefix of any JSON value.
    Invalid,
    /// Nested deeper than the tracker follows (128 levels).
    Unknown,
}

impl ArgsStatus {
    /// `empty`, `partial`, `complete`, `invalid` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ArgsStatus::Empty => "empty",
            ArgsStatus::Partial => "partial",
            ArgsStatus::Complete => "complete",
            ArgsStatus::Invalid => "invalid",
            ArgsStatus::Unknown => "unknown",
        }
    }

    /// True if and only if the text parses as JSON.
    pub fn parses(self) -> bool {
        self == ArgsStatus::Complete
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S {
    /// A value is expected (after `:`, `,` in an array, or at the start).
    Value,
    /// After `[`: a value or `]`.
    ArrayFirst,
    /// After `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    Key,
    /// Inside a string (`key`: an object key), after a backslash (`esc`), in `\u` (hex left).
    Str { key: bool, esc: bool, hex: u8 },
    /// After a key: `:`.
    Colon,
    /// After a value: `,`, a closer, or (at depth 0) only whitespace.
    After,
    /// Inside `true`/`false`/`null`: the literal and how many bytes matched.
    Lit { which: u8, at: u8 },
    /// Inside a number.
    Num(N),
    /// Done: invalid or too deep.
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum N {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

impl N {
    fn accepting(self) -> bool {
        matches!(self, N::Zero | N::Int | N::Frac | N::Exp)
    }
}

const LITS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// The incremental JSON validity tracker (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgsJson {
    state: S,
    /// Bit `i` set: level `i` is an object (else an array).
    stack: u128,
    depth: u8,
    started: bool,
    invalid: bool,
    too_deep: bool,
    bytes: u64,
}

impl Default for ArgsJson {
    fn default() -> Self {
        ArgsJson {
            state: S::Value,
            stack: 0,
            depth: 0,
            started: false,
            invalid: false,
            too_deep: false,
            bytes: 0,
        }
    }
}

impl ArgsJson {
    /// Bytes of argument text fed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The status of the text fed so far.
    pub fn status(&self) -> ArgsStatus {
        if self.too_deep {
            ArgsStatus::Unknown
        } else if self.invalid {
            ArgsStatus::Invalid
        } else if !self.started {
            ArgsStatus::Empty
        } else if self.depth == 0
            && (self.state == S::After || matches!(self.state, S::Num(n) if n.accepting()))
        {
            ArgsStatus::Complete
        } else {
            ArgsStatus::Partial
        }
    }

    /// Feeds argument text.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        for &b in bytes {
            if self.state == S::Stop {
                return;
            }
            self.byte(b);
        }
    }

    fn fail(&mut self) {
        self.invalid = true;
        self.state = S::Stop;
    }

    fn push(&mut self, object: bool) {
        if self.depth >= 128 {
            self.too_deep = true;
            self.state = S::Stop;
            return;
        }
        if object {
            self.stack |= 1 << self.depth;
        } else {
            self.stack &= !(1 << self.depth);
        }
        self.depth += 1;
        self.state = if object {
            S::ObjectFirst
        } else {
            S::ArrayFirst
        };
    }

    fn top_is_object(&self) -> bool {
        self.depth > 0 && self.stack & (1 << (self.depth - 1)) != 0
    }

    fn close(&mut self, object: bool) {
        if self.depth == 0 || self.top_is_object() != object {
            return self.fail();
        }
        self.depth -= 1;
        self.state = S::After;
    }

    fn value(&mut self, b: u8) {
        self.started = true;
        self.state = match b {
            b'{' => return self.push(true),
            b'[' => return self.push(false),
            b'"' => S::Str {
                key: false,
                esc: false,
                hex: 0,
            },
            b't' => S::Lit { which: 0, at: 1 },
            b'f' => S::Lit { which: 1, at: 1 },
            b'n' => S::Lit { which: 2, at: 1 },
            b'-' => S::Num(N::Minus),
            b'0' => S::Num(N::Zero),
            b'1'..=b'9' => S::Num(N::Int),
            _ => return self.fail(),
        };
    }

    fn after(&mut self, b: u8) {
        match b {
            b',' if self.depth > 0 => {
                self.state = if self.top_is_object() {
                    S::Key
                } else {
                    S::Value
                };
            }
            b'}' => self.close(true),
            b']' => self.close(false),
            _ => self.fail(),
        }
    }

    fn byte(&mut self, b: u8) {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.state {
            S::Stop => {}
            S::Value => {
                if !ws {
                    self.value(b);
                }
            }
            S::ArrayFirst => match b {
                _ if ws => {}
                b']' => self.close(false),
                _ => self.value(b),
            },
            S::ObjectFirst | S::Key => match b {
                _ if ws => {}
                b'"' => {
                    self.state = S::Str {
                        key: true,
                        esc: false,
                        hex: 0,
                    }
                }
                b'}' if self.state == S::ObjectFirst => self.close(true),
                _ => self.fail(),
            },
            S::Str { key, esc, hex } => {
                if hex > 0 {
                    if b.is_ascii_hexdigit() {
                        self.state = S::Str {
                            key,
                            esc: false,
                            hex: hex - 1,
                        };
                    } else {
                        self.fail();
                    }
                } else if esc {
                    match b {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            self.state = S::Str {
                                key,
                                esc: false,
                                hex: 0,
                            }
                        }
                        b'u' => {
                            self.state = S::Str {
                                key,
                                esc: false,
                                hex: 4,
                            }
                        }
                        _ => self.fail(),
                    }
                } else {
                    match b {
                        b'"' => self.state = if key { S::Colon } else { S::After },
                        b'\\' => {
                            self.state = S::Str {
                                key,
                                esc: true,
                                hex: 0,
                            }
                        }
                        0x00..=0x1F => self.fail(),
                        _ => {}
                    }
                }
            }
            S::Colon => match b {
                _ if ws => {}
                b':' => self.state = S::Value,
                _ => self.fail(),
            },
            S::After => {
                if !ws {
                    self.after(b);
                }
            }
            S::Lit { which, at } => {
                let lit = LITS[which as usize];
                if lit.get(at as usize) == Some(&b) {
                    let at = at + 1;
                    self.state = if at as usize == lit.len() {
                        S::After
                    } else {
                        S::Lit { which, at }
                    };
                } else {
                    self.fail();
                }
            }
            S::Num(n) => {
                let next = match (n, b) {
                    (N::Minus, b'0') => Some(N::Zero),
                    (N::Minus, b'1'..=b'9') => Some(N::Int),
                    (N::Int, b'0'..=b'9') => Some(N::Int),
                    (N::Zero | N::Int, b'.') => Some(N::Dot),
                    (N::Dot | N::Frac, b'0'..=b'9') => Some(N::Frac),
                    (N::Zero | N::Int | N::Frac, b'e' | b'E') => Some(N::E),
                    (N::E, b'+' | b'-') => Some(N::ESign),
                    (N::E | N::ESign | N::Exp, b'0'..=b'9') => Some(N::Exp),
                    _ => None,
                };
                match next {
                    Some(n) => self.state = S::Num(n),
                    None if n.accepting() => {
                        self.state = S::After;
                        if !ws {
                            self.after(b);
                        }
                    }
                    None => self.fail(),
                }
            }
        }
    }
}

/// Decodes JSON string content (the escaped form between the quotes) into the text it stands
/// for, byte by byte, keeping state across splits. A `\uXXXX` escape becomes its character
/// when ASCII, else the byte 0x80 (a stand-in that only fits inside a string, as any non-ASCII
/// character does).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unescape {
    esc: bool,
    hex: u8,
    code: u32,
}

impl Unescape {
    /// Decodes `raw` (escaped string content), handing each decoded byte to `out`.
    pub fn feed(&mut self, raw: &[u8], out: &mut impl FnMut(u8)) {
        for &b in raw {
            if self.hex > 0 {
                let d = (b as char).to_digit(16).unwrap_or(0);
                self.code = self.code * 16 + d;
                self.hex -= 1;
                if self.hex == 0 {
                    out(u8::try_from(self.code)
                        .ok()
                        .filter(u8::is_ascii)
                        .unwrap_or(0x80));
                }
            } else if self.esc {
                self.esc = false;
                match b {
                    b'u' => {
                        self.hex = 4;
                        self.code = 0;
                    }
                    b'n' => out(b'\n'),
                    b't' => out(b'\t'),
                    b'r' => out(b'\r'),
                    b'b' => out(0x08),
                    b'f' => out(0x0C),
                    other => out(other),
                }
            } else if b == b'\\' {
                self.esc = true;
            } else {
                out(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(text: &str) -> ArgsStatus {
        let mut a = ArgsJson::default();
        a.feed(text.as_bytes());
        a.status()
    }

    #[test]
    fn invalid_utf8_inside_a_string_is_content_and_outside_one_is_invalid() {
        // Found by the `llm` fuzz target: a key with a stray byte is complete JSON to a client,
        // whose SSE decoder made the byte U+FFFD before its JSON parser saw it.
        let feed = |b: &[u8]| {
            let mut a = ArgsJson::default();
            a.feed(b);
            a.status()
        };
        assert_eq!(feed(b"{\"d\xffays\": [1, 2.5e-3]}"), ArgsStatus::Complete);
        assert_eq!(feed(b"{\"city\": \"Par\xc3\"}"), ArgsStatus::Complete);
        assert_eq!(feed(b"{\"a\": 1}\xff"), ArgsStatus::Invalid);
        assert_eq!(feed(b"[\xff]"), ArgsStatus::Invalid);
    }

    #[test]
    fn complete_values_are_complete_and_every_proper_prefix_is_partial() {
        for text in [
            r#"{"city":"Paris","days":3,"tags":["a","b"],"x":null,"y":true,"z":-1.5e+3}"#,
            r#"{}"#,
            r#"[1, [2, {"a": "\u00e9\n\"q\""}], false]"#,
            r#""just a string""#,
        ] {
            assert_eq!(status(text), ArgsStatus::Complete, "{text}");
            for k in 1..text.len() {
                if !text.is_char_boundary(k) {
                    continue;
                }
                assert_eq!(status(&text[..k]), ArgsStatus::Partial, "{}", &text[..k]);
            }
        }
        assert_eq!(status("  "), ArgsStatus::Empty);
        assert_eq!(status(""), ArgsStatus::Empty);
        assert_eq!(status("{} "), ArgsStatus::Complete);
        assert_eq!(status("12"), ArgsStatus::Complete);
    }

    #[test]
    fn invalid_text_is_invalid_for_good() {
        for text in [
            r#"{"a" 1}"#,
            r#"{"a":1,}"#,
            r#"{a:1}"#,
            r#"[1 2]"#,
            r#"{}{}"#,
            r#"tru e"#,
            r#"01"#,
            r#"{"a":"x"]"#,
            "\"a\u{1}\"",
        ] {
            assert_eq!(status(text), ArgsStatus::Invalid, "{text}");
        }
        let mut a = ArgsJson::default();
        a.feed(b"{]");
        a.feed(br#""ok":1}"#);
        assert_eq!(a.status(), ArgsStatus::Invalid);
    }

    #[test]
    fn every_split_gives_the_same_status() {
        let text = br#"{"q":"a\"b","n":[1,2.5e-3,{"d":null}]}"#;
        for k in 0..=text.len() {
            let mut a = ArgsJson::default();
            a.feed(&text[..k]);
            a.feed(&text[k..]);
            assert_eq!(a.status(), ArgsStatus::Complete, "split at {k}");
            assert_eq!(a.bytes(), text.len() as u64);
        }
    }

    #[test]
    fn nesting_beyond_the_stack_is_unknown_not_a_guess() {
        let deep = "[".repeat(200);
        assert_eq!(status(&deep), ArgsStatus::Unknown);
        let ok = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(status(&ok), ArgsStatus::Complete);
    }

    #[test]
    fn unescape_decodes_across_splits() {
        let raw = br#"{\"city\":\"Par\u0069s \u00e9\"}\n"#;
        for k in 0..=raw.len() {
            let mut u = Unescape::default();
            let mut out = Vec::new();
            u.feed(&raw[..k], &mut |b| out.push(b));
            u.feed(&raw[k..], &mut |b| out.push(b));
            assert_eq!(out, b"{\"city\":\"Paris \x80\"}\n", "split at {k}");
        }
    }
}
