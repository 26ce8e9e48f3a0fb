//! The whole requests a client sends on an HTTP/2 connection, counted off its bytes (client to
//! server) without an h2 stack: the ground truth of "retried or not" over h2, where no
//! `POST ` is on the wire (HPACK) — independent of tearline's own h2 observer.
//!
//! Why whole requests: an h2 client writes a request's `HEADERS` and its body apart, and a
//! server may answer (and a reset may end the connection) between the two; a request whose
//! body never reached the server was not sent again, whatever the client tried.
//!
//! Invariants: the 24-byte connection preface is skipped, then every frame is walked by its
//! 9-byte header, however the bytes are split across reads; a request counts when its client
//! stream (odd id) ends (`END_STREAM` on its `HEADERS` or `DATA`), once per stream.

/// `DATA` and `HEADERS` (RFC 9113 §6.1, §6.2), and their `END_STREAM` flag.
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const END_STREAM: u8 = 0x1;
const PREFACE_LEN: usize = 24;
const FRAME_HEADER_LEN: usize = 9;

/// A client-to-server byte stream's request counter.
#[derive(Debug, Default)]
pub struct H2Requests {
    /// Bytes consumed of the preface and the frame header being read.
    head: Vec<u8>,
    preface_done: bool,
    /// Payload bytes of the current frame still to skip.
    skip: usize,
    /// The client streams ended so far (a test connection carries a handful).
    ended: std::collections::BTreeSet<u32>,
    /// Requests seen.
    pub requests: u64,
}

impl H2Requests {
    /// Feeds the next bytes the client sent; returns how many requests they opened.
    pub fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let before = self.requests;
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let want = if self.preface_done {
                FRAME_HEADER_LEN
            } else {
                PREFACE_LEN
            };
            let n = (want - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.head.len() < want {
                break;
            }
            if !self.preface_done {
                self.preface_done = true;
            } else {
                let h = &self.head;
                self.skip = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                let ends = matches!(h[3], DATA | HEADERS) && h[4] & END_STREAM != 0;
                if ends && stream % 2 == 1 && self.ended.insert(stream) {
                    self.requests += 1;
                }
            }
            self.head.clear();
        }
        self.requests - before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u32;
        let mut f = len.to_be_bytes()[1..].to_vec();
        f.extend([kind, flags]);
        f.extend(stream.to_be_bytes());
        f.extend(payload);
        f
    }

    fn connection() -> Vec<u8> {
        let mut b = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        b.extend(frame(0x4, 0, 0, &[0; 6])); // SETTINGS
        b.extend(frame(HEADERS, 0x4, 1, &[0x83; 20])); // POST on stream 1
        b.extend(frame(DATA, 0, 1, b"{\"model\":")); // its body, in two frames
        b.extend(frame(DATA, 0, 1, b"\"x\"}"));
        b.extend(frame(HEADERS, 0x5, 1, &[0x40; 5])); // trailers end it: one request
        b.extend(frame(0x8, 0, 0, &[0, 0, 1, 0])); // WINDOW_UPDATE
        b.extend(frame(HEADERS, 0x5, 3, &[0x83; 7])); // stream 3: a GET, whole at once
        b.extend(frame(HEADERS, 0x4, 5, &[0x83; 7])); // stream 5: its body never came
        b.extend(frame(DATA, 0, 5, b"{\"model\""));
        b
    }

    #[test]
    fn counts_each_client_stream_that_ended_once_and_no_unfinished_one() {
        let mut c = H2Requests::default();
        assert_eq!(c.feed(&connection()), 2);
    }

    #[test]
    fn counts_the_same_however_the_bytes_are_split() {
        let bytes = connection();
        for size in [1, 2, 5, 9, 10, 24, 25, 33] {
            let mut c = H2Requests::default();
            let total: u64 = bytes.chunks(size).map(|ch| c.feed(ch)).sum();
            assert_eq!(total, 2, "split into {size}-byte reads");
        }
    }
}
