//! The exact bytes of the lab's SSE output and the HTTP body that carries them.
//!
//! Why not a library encoder: tests and the proxy's position classifier need every byte under
//! our control (line endings, field order, chunk boundaries). Invariants:
//! - Every line ends with the configured line ending; every event ends with one blank line.
//! - A message event is `event: message`, then `id: <id>` (omitted in 2026-07-28 mode), then
//!   one `data: ` line per data line; the priming event is `id: <id>`, `retry: <ms>` (2025-11-25
//!   only), `data: ` (empty value); `error`/`end` events carry no id (they never move a cursor).
//! - [`LabBody`] yields each frame it is handed as one HTTP chunk, unchanged, in order; its
//!   end is the end of the HTTP body (`0\r\n\r\n`).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use super::config::LineEnding;

/// Builds SSE event bytes with one line ending.
#[derive(Debug, Clone, Copy)]
pub struct SseEncoder {
    eol: &'static [u8],
}

impl SseEncoder {
    /// An encoder for `line_ending`.
    pub fn new(line_ending: LineEnding) -> Self {
        SseEncoder {
            eol: line_ending.bytes(),
        }
    }

    /// A `message` event whose data is `lines` joined by LF (each line is one `data:` field).
    /// No line may contain CR or LF (JSON text from serde_json never does).
    pub fn message(&self, id: Option<&str>, lines: &[&[u8]]) -> Bytes {
        let eol = self.eol.len();
        let mut len = b"event: message".len() + eol + eol;
        if let Some(id) = id {
            len += b"id: ".len() + id.len() + eol;
        }
        len += lines
            .iter()
            .map(|l| b"data: ".len() + l.len() + eol)
            .sum::<usize>();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(b"event: message");
        out.extend_from_slice(self.eol);
        if let Some(id) = id {
            out.extend_from_slice(b"id: ");
            out.extend_from_slice(id.as_bytes());
            out.extend_from_slice(self.eol);
        }
        for line in lines {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line);
            out.extend_from_slice(self.eol);
        }
        out.extend_from_slice(self.eol);
        Bytes::from(out)
    }

    /// Bytes at the end of a [`message`](Self::message) whose last data line has a value of
    /// `last` bytes, from the middle of that value on: the value's second half (`last -
    /// last / 2` bytes), its line end and the blank line. A delivery split there is mid-value.
    pub fn tail_after_mid_value(&self, last: usize) -> usize {
        (last - last / 2) + 2 * self.eol.len()
    }

    /// The priming event: an id, optionally `retry:`, and an empty `data:` line.
    pub fn priming(&self, id: &str, retry: Option<Duration>) -> Bytes {
        let mut out = Vec::with_capacity(64 + id.len());
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(self.eol);
        if let Some(retry) = retry {
            out.extend_from_slice(format!("retry: {}", retry.as_millis()).as_bytes());
            out.extend_from_slice(self.eol);
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(self.eol);
        out.extend_from_slice(self.eol);
        Bytes::from(out)
    }

    /// An event of type `event` (`error`, `end`) with one data line and no id.
    pub fn named(&self, event: &str, data: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(32 + event.len() + data.len());
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(event.as_bytes());
        out.extend_from_slice(self.eol);
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(data);
        out.extend_from_slice(self.eol);
        out.extend_from_slice(self.eol);
        Bytes::from(out)
    }

    /// A comment line followed by a blank line (`: keepalive`).
    pub fn comment(&self, text: &str) -> Bytes {
        let mut out = Vec::with_capacity(4 + text.len() + 2 * self.eol.len());
        out.extend_from_slice(b": ");
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(self.eol);
        out.extend_from_slice(self.eol);
        Bytes::from(out)
    }
}

/// Splits encoded SSE bytes after every LF (one slice per line, the blank line included).
pub fn lines(bytes: &Bytes) -> impl Iterator<Item = Bytes> + '_ {
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes).map(move |i| {
        let line = bytes.slice(start..=i);
        start = i + 1;
        line
    })
}

/// The response body of every lab response: empty, one buffer, or a stream of SSE frames.
#[derive(Debug)]
pub enum LabBody {
    /// No body.
    Empty,
    /// A body known in full (sent with `Content-Length`).
    Full(Option<Bytes>),
    /// A body of unknown length (sent chunked): each received frame is one HTTP chunk; the
    /// body ends when the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
}

impl LabBody {
    /// A body holding `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        LabBody::Full(Some(bytes.into()))
    }
}

impl Body for LabBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            LabBody::Empty => Poll::Ready(None),
            LabBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            LabBody::Stream(rx) => rx.poll_recv(cx).map(|f| f.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            LabBody::Empty | LabBody::Full(None) => true,
            LabBody::Full(Some(_)) | LabBody::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            LabBody::Empty | LabBody::Full(None) => SizeHint::with_exact(0),
            LabBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            LabBody::Stream(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_exact_in_both_line_endings() {
        let lf = SseEncoder::new(LineEnding::Lf).message(Some("1-2"), &[b"{\"a\":", b"1}"]);
        assert_eq!(
            &lf[..],
            b"event: message\nid: 1-2\ndata: {\"a\":\ndata: 1}\n\n"
        );
        let crlf = SseEncoder::new(LineEnding::Crlf).message(None, &[b"{}"]);
        assert_eq!(&crlf[..], b"event: message\r\ndata: {}\r\n\r\n");
    }

    #[test]
    fn the_tail_after_mid_value_starts_inside_the_last_data_value() {
        for ending in [LineEnding::Lf, LineEnding::Crlf] {
            let enc = SseEncoder::new(ending);
            let ev = enc.message(Some("1-4"), &[b"first", b"0123456789"]);
            let at = ev.len() - enc.tail_after_mid_value(10);
            let eol = ending.bytes();
            let tail = [&b"56789"[..], eol, eol].concat();
            assert_eq!(&ev[at..], &tail[..]);
        }
    }

    #[test]
    fn priming_has_id_retry_and_empty_data() {
        let p = SseEncoder::new(LineEnding::Lf).priming("3-0", Some(Duration::from_millis(1500)));
        assert_eq!(&p[..], b"id: 3-0\nretry: 1500\ndata: \n\n");
    }

    #[test]
    fn lines_split_after_each_lf() {
        let b = Bytes::from_static(b"a: 1\r\nb\n\n");
        let got: Vec<Bytes> = lines(&b).collect();
        assert_eq!(got, [&b"a: 1\r\n"[..], b"b\n", b"\n"]);
    }
}
