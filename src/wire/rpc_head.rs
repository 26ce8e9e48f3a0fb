//! Reads, from the first bytes of an SSE event's data, whether it is the JSON-RPC response to a
//! given request id — without parsing (or holding) the whole message.
//!
//! It exists because the observer keeps only a head of each `data` value (memory must not depend
//! on event size) and still has to know where a call's final response ends its stream
//! (`after-final`). Invariants: only the top level of the object is read; `true` if and only if
//! a top-level `"id"` equal to `id` (JSON text, compared token for token) and a top-level
//! `"result"` or `"error"` key are both inside the head; a head that ends before both are seen
//! answers `false`. Never panics on any input.

/// True if and only if the head shows a JSON-RPC response (result or error) with id `id`.
pub fn is_response_head(head: &[u8], id: &str) -> bool {
    let mut r = Reader { b: head, i: 0 };
    r.ws();
    if !r.eat(b'{') {
        return false;
    }
    let (mut id_match, mut answer) = (false, false);
    loop {
        r.ws();
        let Some(key) = r.string() else {
            return false;
        };
        r.ws();
        if !r.eat(b':') {
            return false;
        }
        r.ws();
        let start = r.i;
        if matches!(key, b"result" | b"error") {
            answer = true;
        }
        if !r.skip_value() {
            // The head ends inside this value (a long result): decide with what was seen.
            return id_match && answer;
        }
        if key == b"id" {
            id_match = same_token(&head[start..r.i], id.as_bytes());
        }
        if id_match && answer {
            return true;
        }
        r.ws();
        if !r.eat(b',') {
            return false;
        }
    }
}

fn same_token(value: &[u8], id: &[u8]) -> bool {
    value.trim_ascii() == id.trim_ascii()
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            return true;
        }
        false
    }

    /// A JSON string; returns its raw content (escapes not decoded).
    fn string(&mut self) -> Option<&'a [u8]> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.i;
        loop {
            match self.b.get(self.i)? {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Some(&self.b[start..self.i - 1]);
                }
                _ => self.i += 1,
            }
        }
    }

    /// Skips one value; false if the head ends inside it.
    fn skip_value(&mut self) -> bool {
        let mut depth = 0usize;
        loop {
            let Some(&c) = self.b.get(self.i) else {
                return false;
            };
            match c {
                b'"' => {
                    if self.string().is_none() {
                        return false;
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    self.i += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        return true;
                    }
                    depth -= 1;
                    self.i += 1;
                }
                b',' if depth == 0 => return true,
                _ => self.i += 1,
            }
            if depth == 0 && matches!(c, b'"' | b'}' | b']') {
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_response_head;

    #[test]
    fn response_heads_are_recognised_from_their_first_level() {
        let full = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"aaaa"#;
        assert!(is_response_head(full, "7"));
        assert!(!is_response_head(full, "8"));
        assert!(is_response_head(
            br#" {"id":"a","error":{"code":1}}"#,
            r#""a""#
        ));
        assert!(!is_response_head(
            br#"{"id":7,"method":"x","params":{"id":7}}"#,
            "7"
        ));
        assert!(!is_response_head(br#"{"result":{"id":7},"id":8}"#, "7"));
        assert!(is_response_head(
            br#"{"result":{"id":7, "s":"}\""},"id":8}"#,
            "8"
        ));
        assert!(!is_response_head(
            br#"{"jsonrpc":"2.0","result":{"a":"#,
            "7"
        ));
        assert!(!is_response_head(b"not json", "7"));
        assert!(!is_response_head(b"", "7"));
    }
}
