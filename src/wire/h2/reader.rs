//! The incremental HTTP/2 frame reader of one direction: bytes in any chunking, frame events
//! out, without buffering `DATA` payloads.
//!
//! Why: the pump hands the observer whatever one `read` returned (a frame split anywhere, down
//! to one byte per read, or hundreds of frames in one). The reader keeps only the 9-byte header
//! in progress and, for frames the observer must read whole (header blocks, `SETTINGS`,
//! `RST_STREAM`, `GOAWAY`, …), their payload up to a limit; `DATA` bodies are walked in place
//! and reported as slices of the chunk.
//!
//! Invariants:
//! - Chunking never changes the events: the same frames, the same `DATA` bytes (possibly in
//!   more pieces), at the same raw offsets.
//! - Memory: at most [`BLOCK_LIMIT`] bytes of one buffered payload. A header-block frame
//!   (`HEADERS`, `PUSH_PROMISE`, `CONTINUATION`) longer than that, or a `DATA` frame whose pad
//!   length exceeds its payload, is a [`ReadError`]; the reader then stops for good. Other
//!   frames keep only their first bytes (the fields the observer reads) and skip the rest;
//!   unknown frame types are skipped whole.
//! - Upstream, the 24-byte client preface comes first; anything else is an error.

use super::frame::{FrameHeader, FrameType, HEADER_LEN, PREFACE, flags};

/// The longest header-block fragment frame read (payload bytes).
pub const BLOCK_LIMIT: usize = 64 * 1024;

/// Bytes kept of a control frame's payload (`SETTINGS` entries beyond are skipped).
const CONTROL_KEEP: usize = 6 * 64;

/// What the reader found, with chunk offsets (`at`, `end`: indexes into the chunk just fed).
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// The client preface ended at chunk offset `end`.
    Preface { end: usize },
    /// A `DATA` frame's header was read (its body follows; `at` is just after the header and
    /// the pad length byte, if any).
    DataStart { header: FrameHeader, at: usize },
    /// Body bytes of the current `DATA` frame (padding excluded), starting at chunk offset `at`.
    Data {
        header: FrameHeader,
        body: &'a [u8],
        at: usize,
    },
    /// The current `DATA` frame's body ended at chunk offset `at` (its padding may follow).
    DataEnd { header: FrameHeader, at: usize },
    /// A frame ended at chunk offset `end`; for frames other than `DATA`, `payload` is the
    /// payload (whole for header blocks, its first bytes for control frames, empty for unknown
    /// types).
    Frame {
        header: FrameHeader,
        payload: &'a [u8],
        end: usize,
    },
}

/// Why the reader stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("not an HTTP/2 connection: the client preface \"PRI * HTTP/2.0\" is missing")]
    NoPreface,
    #[error(
        "{kind:?} frame of {len} bytes on stream {stream}: header blocks over {BLOCK_LIMIT} bytes are not followed"
    )]
    BlockTooLong {
        kind: FrameType,
        len: u32,
        stream: u32,
    },
    #[error("DATA frame on stream {stream}: pad length {pad} does not fit its {len}-byte payload")]
    BadPadding { stream: u32, pad: u8, len: u32 },
}

#[derive(Debug)]
enum State {
    Preface(usize),
    Header,
    /// A `PADDED` `DATA` frame's pad length byte is next.
    PadLen,
    Body,
    Padding,
    /// A buffered (`keep` of `left`) or skipped payload.
    Payload,
    Failed,
}

/// The reader of one direction (see the module doc).
#[derive(Debug)]
pub struct FrameReader {
    state: State,
    head: [u8; HEADER_LEN],
    head_len: usize,
    header: FrameHeader,
    /// Payload bytes of the current frame not read yet (body bytes in `Body`, pad bytes in
    /// `Padding`).
    left: usize,
    pad: usize,
    buf: Vec<u8>,
    keep: usize,
}

impl FrameReader {
    /// A reader that expects the client preface first (the upstream direction) or not.
    pub fn new(preface: bool) -> Self {
        FrameReader {
            state: if preface {
                State::Preface(0)
            } else {
                State::Header
            },
            head: [0; HEADER_LEN],
            head_len: 0,
            header: FrameHeader {
                len: 0,
                kind: FrameType::Data,
                flags: 0,
                stream: 0,
            },
            left: 0,
            pad: 0,
            buf: Vec::new(),
            keep: 0,
        }
    }

    /// True once the reader stopped for good.
    pub fn failed(&self) -> bool {
        matches!(self.state, State::Failed)
    }

    /// Bytes held (the payload buffer's capacity).
    pub fn held_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Reads `chunk`, calling `on` for every event in order.
    pub fn feed(&mut self, chunk: &[u8], on: &mut dyn FnMut(Event<'_>)) -> Result<(), ReadError> {
        let mut i = 0;
        loop {
            match self.state {
                State::Failed => return Ok(()),
                State::Preface(n) => {
                    let take = (PREFACE.len() - n).min(chunk.len() - i);
                    if chunk[i..i + take] != PREFACE[n..n + take] {
                        self.state = State::Failed;
                        return Err(ReadError::NoPreface);
                    }
                    i += take;
                    if n + take == PREFACE.len() {
                        self.state = State::Header;
                        on(Event::Preface { end: i });
                    } else {
                        self.state = State::Preface(n + take);
                    }
                }
                State::Header => {
                    let take = (HEADER_LEN - self.head_len).min(chunk.len() - i);
                    self.head[self.head_len..self.head_len + take]
                        .copy_from_slice(&chunk[i..i + take]);
                    self.head_len += take;
                    i += take;
                    if self.head_len < HEADER_LEN {
                        return Ok(());
                    }
                    self.head_len = 0;
                    if let Err(e) = self.start(i, on) {
                        self.state = State::Failed;
                        return Err(e);
                    }
                }
                State::PadLen => {
                    let Some(&pad) = chunk.get(i) else {
                        return Ok(());
                    };
                    i += 1;
                    let h = self.header;
                    if u32::from(pad) >= h.len {
                        self.state = State::Failed;
                        return Err(ReadError::BadPadding {
                            stream: h.stream,
                            pad,
                            len: h.len,
                        });
                    }
                    self.pad = pad as usize;
                    self.left = h.len as usize - 1 - self.pad;
                    self.state = State::Body;
                    on(Event::DataStart { header: h, at: i });
                }
                State::Body => {
                    let take = self.left.min(chunk.len() - i);
                    if take > 0 {
                        on(Event::Data {
                            header: self.header,
                            body: &chunk[i..i + take],
                            at: i,
                        });
                    }
                    i += take;
                    self.left -= take;
                    if self.left > 0 {
                        return Ok(());
                    }
                    on(Event::DataEnd {
                        header: self.header,
                        at: i,
                    });
                    self.left = self.pad;
                    self.state = State::Padding;
                }
                State::Padding => {
                    let take = self.left.min(chunk.len() - i);
                    i += take;
                    self.left -= take;
                    if self.left > 0 {
                        return Ok(());
                    }
                    self.state = State::Header;
                    on(Event::Frame {
                        header: self.header,
                        payload: &[],
                        end: i,
                    });
                }
                State::Payload => {
                    let take = self.left.min(chunk.len() - i);
                    let want = self.keep.saturating_sub(self.buf.len()).min(take);
                    let whole = self.buf.is_empty() && want == self.keep && take == self.left;
                    if !whole {
                        self.buf.extend_from_slice(&chunk[i..i + want]);
                    }
                    i += take;
                    self.left -= take;
                    if self.left > 0 {
                        return Ok(());
                    }
                    self.state = State::Header;
                    // A payload wholly inside this chunk is handed over in place.
                    let payload = if whole {
                        &chunk[i - take..i - take + want]
                    } else {
                        &self.buf[..]
                    };
                    on(Event::Frame {
                        header: self.header,
                        payload,
                        end: i,
                    });
                    self.buf.clear();
                    if self.buf.capacity() > 4 * 1024 {
                        self.buf = Vec::new();
                    }
                }
            }
            if i == chunk.len() && !self.ends_at_boundary() {
                return Ok(());
            }
        }
    }

    /// True while an event may still be due with no more input (an empty body or payload).
    fn ends_at_boundary(&self) -> bool {
        match self.state {
            State::Body | State::Padding | State::Payload => self.left == 0,
            _ => false,
        }
    }

    /// A frame header was read; its payload starts at chunk offset `at`.
    fn start(&mut self, at: usize, on: &mut dyn FnMut(Event<'_>)) -> Result<(), ReadError> {
        let Some(h) = FrameHeader::parse(&self.head) else {
            return Ok(());
        };
        self.header = h;
        let len = h.len as usize;
        match h.kind {
            FrameType::Data if h.has(flags::PADDED) => {
                if len == 0 {
                    return Err(ReadError::BadPadding {
                        stream: h.stream,
                        pad: 0,
                        len: 0,
                    });
                }
                self.state = State::PadLen;
            }
            FrameType::Data => {
                self.pad = 0;
                self.left = len;
                self.state = State::Body;
                on(Event::DataStart { header: h, at });
            }
            FrameType::Headers | FrameType::PushPromise | FrameType::Continuation => {
                if len > BLOCK_LIMIT {
                    return Err(ReadError::BlockTooLong {
                        kind: h.kind,
                        len: h.len,
                        stream: h.stream,
                    });
                }
                self.keep = len;
                self.left = len;
                self.state = State::Payload;
            }
            FrameType::Unknown(_) => {
                self.keep = 0;
                self.left = len;
                self.state = State::Payload;
            }
            _ => {
                self.keep = len.min(CONTROL_KEEP);
                self.left = len;
                self.state = State::Payload;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::h2::ErrorCode;
    use crate::wire::h2::frame::{data_header, goaway, rst_stream};

    /// Events of `input` fed in pieces cut at `cuts`, as owned records (DATA bodies joined).
    fn events(input: &[u8], cuts: &[usize], preface: bool) -> (Vec<String>, Option<ReadError>) {
        let mut r = FrameReader::new(preface);
        let mut out: Vec<String> = Vec::new();
        let (mut start, mut base) = (0, 0);
        let mut err = None;
        for &end in cuts.iter().chain(std::iter::once(&input.len())) {
            let chunk = &input[start..end];
            let res = r.feed(chunk, &mut |e| {
                let s = match e {
                    Event::Preface { end } => format!("preface@{}", base + end),
                    Event::DataStart { header, at } => {
                        format!("start {}@{}", header.stream, base + at)
                    }
                    Event::Data { body, at, .. } => {
                        // Join adjacent pieces so that chunking does not show.
                        let text = String::from_utf8_lossy(body).into_owned();
                        if let Some(last) = out.last_mut().filter(|l| l.starts_with("data ")) {
                            last.push_str(&text);
                            return;
                        }
                        format!("data @{} {text}", base + at)
                    }
                    Event::DataEnd { at, .. } => format!("end@{}", base + at),
                    Event::Frame {
                        header,
                        payload,
                        end,
                    } => {
                        format!(
                            "{:?} {} {:?}@{}",
                            header.kind,
                            header.stream,
                            payload,
                            base + end
                        )
                    }
                };
                out.push(s);
            });
            if let Err(e) = res {
                err = Some(e);
                break;
            }
            base += chunk.len();
            start = end;
        }
        (out, err)
    }

    fn conversation() -> Vec<u8> {
        let mut v = PREFACE.to_vec();
        v.extend_from_slice(
            &FrameHeader {
                len: 6,
                kind: FrameType::Settings,
                flags: 0,
                stream: 0,
            }
            .encode(),
        );
        v.extend_from_slice(&[0, 1, 0, 0, 0x10, 0]);
        v.extend_from_slice(
            &FrameHeader {
                len: 3,
                kind: FrameType::Headers,
                flags: flags::END_HEADERS,
                stream: 1,
            }
            .encode(),
        );
        v.extend_from_slice(&[0x82, 0x86, 0x84]);
        v.extend_from_slice(&data_header(1, 5, false));
        v.extend_from_slice(b"hello");
        // Padded DATA: pad length 2, body "ab".
        v.extend_from_slice(
            &FrameHeader {
                len: 5,
                kind: FrameType::Data,
                flags: flags::PADDED | flags::END_STREAM,
                stream: 1,
            }
            .encode(),
        );
        v.extend_from_slice(&[2, b'a', b'b', 0, 0]);
        v.extend_from_slice(
            &FrameHeader {
                len: 4,
                kind: FrameType::Unknown(0x42),
                flags: 0,
                stream: 0,
            }
            .encode(),
        );
        v.extend_from_slice(b"junk");
        v.extend_from_slice(&data_header(3, 0, true));
        v.extend_from_slice(&rst_stream(3, ErrorCode::CANCEL));
        v.extend_from_slice(&goaway(3, ErrorCode::NO_ERROR));
        v
    }

    #[test]
    fn every_split_and_one_byte_reads_give_the_same_frames() {
        let input = conversation();
        let (whole, err) = events(&input, &[], true);
        assert_eq!(err, None);
        assert_eq!(whole.len(), 17, "{whole:#?}");
        assert!(whole.contains(&"data @60 hello".to_string()), "{whole:#?}");
        for cut in 1..input.len() {
            assert_eq!(events(&input, &[cut], true).0, whole, "split at {cut}");
        }
        let bytes: Vec<usize> = (1..input.len()).collect();
        assert_eq!(events(&input, &bytes, true).0, whole, "one byte per read");
    }

    #[test]
    fn a_missing_preface_bad_padding_and_long_blocks_stop_the_reader() {
        assert_eq!(
            events(b"GET / HTTP/1.1\r\n", &[], true).1,
            Some(ReadError::NoPreface)
        );
        let bad_pad = [
            FrameHeader {
                len: 2,
                kind: FrameType::Data,
                flags: flags::PADDED,
                stream: 1,
            }
            .encode()
            .as_slice(),
            &[5, 0],
        ]
        .concat();
        assert!(matches!(
            events(&bad_pad, &[], false).1,
            Some(ReadError::BadPadding { pad: 5, .. })
        ));
        let long = FrameHeader {
            len: BLOCK_LIMIT as u32 + 1,
            kind: FrameType::Headers,
            flags: 0,
            stream: 1,
        }
        .encode();
        assert!(matches!(
            events(&long, &[], false).1,
            Some(ReadError::BlockTooLong { .. })
        ));
        let mut r = FrameReader::new(false);
        let _ = r.feed(&long, &mut |_| {});
        assert!(r.failed());
        assert_eq!(r.held_bytes(), 0, "nothing buffered for a refused frame");
    }
}
