//! Stream surgery as pure functions: what the relay writes when a positioned fault cuts a
//! stream inside one `DATA` frame, and what it credits back to the server.
//!
//! Invariants (RFC 9113 §6.1, §6.4, §6.9): the written `DATA` frame carries exactly the first
//! `k` body bytes, unpadded; the credit is every payload byte of the frame the client never
//! receives (the rest of the body and the padding with its length byte), so that, with the
//! client's own `WINDOW_UPDATE` for the `k` bytes, the server's connection window gets back
//! all it spent.

use std::ops::Range;

use crate::vocab::CutAction;
use crate::wire::h2::frame::{HEADER_LEN, data_header, rst_stream};
use crate::wire::h2::{ErrorCode, FrameHeader};

/// What a stream-scope cut of one `DATA` frame writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamCut {
    /// To the client, in order: the `DATA` frame of the bytes before the cut (absent at body
    /// byte 0), then the end — `RST_STREAM(client_code)` for a reset, an empty `DATA` with
    /// `END_STREAM` for a clean end — as its own frame, [`StreamCut::end_len`] bytes, so that it
    /// can leave later than the bytes before it (`stall_ms`).
    pub(crate) to_client: Vec<u8>,
    /// To the server: `RST_STREAM(CANCEL)`.
    pub(crate) to_server: [u8; HEADER_LEN + 4],
    /// Connection-level credit owed to the server for the payload bytes not delivered.
    pub(crate) credit: u32,
    /// The client sees `END_STREAM` (a clean end) rather than a reset.
    pub(crate) clean: bool,
}

/// Cuts the `DATA` frame `header` + `payload` of `body` (its body range in `payload`) after
/// `k` body bytes. `action` is `Reset` or `CleanEnd` (`Fin` is a connection cut, never a
/// stream's; it is treated as `Reset` here).
pub(crate) fn cut_data(
    header: &FrameHeader,
    payload: &[u8],
    body: Range<usize>,
    k: usize,
    action: CutAction,
    client_code: ErrorCode,
) -> StreamCut {
    let k = k.min(body.len());
    let clean = action == CutAction::CleanEnd;
    let kept = &payload[body.start..body.start + k];
    let mut to_client = Vec::with_capacity(2 * HEADER_LEN + 4 + k);
    if k > 0 {
        to_client.extend_from_slice(&data_header(header.stream, k as u32, false));
        to_client.extend_from_slice(kept);
    }
    if clean {
        to_client.extend_from_slice(&data_header(header.stream, 0, true));
    } else {
        to_client.extend_from_slice(&rst_stream(header.stream, client_code));
    }
    StreamCut {
        to_client,
        to_server: rst_stream(header.stream, ErrorCode::CANCEL),
        credit: (payload.len() - k) as u32,
        clean,
    }
}

impl StreamCut {
    /// Length of the frame that ends the stream, the last of [`StreamCut::to_client`].
    pub(crate) fn end_len(&self) -> usize {
        if self.clean {
            HEADER_LEN
        } else {
            HEADER_LEN + 4
        }
    }
}

/// What a connection-scope cut after `k` body bytes writes before the connection ends: the
/// first `k` body bytes as one whole `DATA` frame, unpadded and without `END_STREAM` (nothing
/// for `k` = 0). A whole frame, because an h2 stack hands on nothing of an incomplete one: a
/// raw prefix of the frame would move the tear the fault asked for back to the frame's start,
/// often an event boundary (one event per `DATA` frame is what SSE servers write).
pub(crate) fn connection_cut(
    header: &FrameHeader,
    payload: &[u8],
    body: Range<usize>,
    k: usize,
) -> Vec<u8> {
    let k = k.min(body.len());
    if k == 0 {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(HEADER_LEN + k);
    out.extend_from_slice(&data_header(header.stream, k as u32, false));
    out.extend_from_slice(&payload[body.start..body.start + k]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::h2::FrameType;
    use crate::wire::h2::frame::{flags, rst_code};

    fn frames(mut b: &[u8]) -> Vec<(FrameHeader, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(h) = FrameHeader::parse(b) {
            out.push((h, b[HEADER_LEN..h.frame_len()].to_vec()));
            b = &b[h.frame_len()..];
        }
        assert!(b.is_empty(), "trailing bytes");
        out
    }

    fn padded(stream: u32, body: &[u8], pad: u8) -> (FrameHeader, Vec<u8>) {
        let mut p = vec![pad];
        p.extend_from_slice(body);
        p.extend(std::iter::repeat_n(0, pad as usize));
        let h = FrameHeader {
            len: p.len() as u32,
            kind: FrameType::Data,
            flags: flags::PADDED,
            stream,
        };
        (h, p)
    }

    #[test]
    fn a_reset_mid_body_writes_the_first_bytes_unpadded_then_rst_and_credits_the_rest() {
        let (h, p) = padded(3, b"data: {\"a\":1}\n\n", 4);
        let cut = cut_data(&h, &p, 1..16, 9, CutAction::Reset, ErrorCode::CANCEL);
        let out = frames(&cut.to_client);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].0.kind, FrameType::Data);
        assert_eq!(out[0].0.stream, 3);
        assert_eq!(out[0].0.flags, 0, "no padding, no END_STREAM");
        assert_eq!(out[0].1, b"data: {\"a");
        assert_eq!(out[1].0.kind, FrameType::RstStream);
        assert_eq!(rst_code(&out[1].1), Some(ErrorCode::CANCEL));
        assert_eq!(frames(&cut.to_server)[0].0.stream, 3);
        assert_eq!(
            rst_code(&cut.to_server[HEADER_LEN..]),
            Some(ErrorCode::CANCEL)
        );
        // 20 payload bytes (pad length, 15 body, 4 padding) were sent by the server; the
        // client receives 9 and credits them itself.
        assert_eq!(p.len(), 20);
        assert_eq!(cut.credit, 20 - 9);
        assert!(!cut.clean);
    }

    #[test]
    fn a_reset_at_byte_zero_writes_only_the_rst_with_the_configured_code() {
        let h = FrameHeader {
            len: 5,
            kind: FrameType::Data,
            flags: flags::END_STREAM,
            stream: 1,
        };
        let cut = cut_data(
            &h,
            b"hello",
            0..5,
            0,
            CutAction::Reset,
            ErrorCode::INTERNAL_ERROR,
        );
        let out = frames(&cut.to_client);
        assert_eq!(out.len(), 1);
        assert_eq!(rst_code(&out[0].1), Some(ErrorCode::INTERNAL_ERROR));
        assert_eq!(cut.credit, 5);
    }

    #[test]
    fn a_clean_end_writes_the_bytes_with_end_stream_and_no_rst_to_the_client() {
        let h = FrameHeader {
            len: 5,
            kind: FrameType::Data,
            flags: 0,
            stream: 5,
        };
        for k in [0, 2, 5] {
            let cut = cut_data(
                &h,
                b"hello",
                0..5,
                k,
                CutAction::CleanEnd,
                ErrorCode::CANCEL,
            );
            let out = frames(&cut.to_client);
            // The bytes before the cut (none at 0), then the end as a frame of its own.
            assert_eq!(out.len(), if k == 0 { 1 } else { 2 }, "k = {k}");
            let (end, body) = out.split_last().unwrap();
            assert!(end.0.has(flags::END_STREAM) && end.1.is_empty());
            assert_eq!(end.0.frame_len(), cut.end_len());
            let sent: Vec<u8> = body.iter().flat_map(|(_, p)| p.clone()).collect();
            assert_eq!(sent, &b"hello"[..k]);
            assert!(body.iter().all(|(h, _)| !h.has(flags::END_STREAM)));
            assert_eq!(cut.credit as usize, 5 - k);
            assert!(cut.clean);
        }
    }

    #[test]
    fn a_connection_cut_writes_the_bytes_before_the_cut_as_one_whole_unpadded_frame() {
        let (h, p) = padded(3, b"data: hello\n\n", 4);
        let out = connection_cut(&h, &p, 1..14, 8);
        let got = frames(&out);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.stream, 3);
        assert_eq!(got[0].0.flags & flags::END_STREAM, 0);
        assert_eq!(got[0].0.flags & flags::PADDED, 0);
        assert_eq!(got[0].1, b"data: he");
        assert!(connection_cut(&h, &p, 1..14, 0).is_empty());
        assert_eq!(
            frames(&connection_cut(&h, &p, 1..14, 99))[0].1,
            b"data: hello\n\n"
        );
    }
}
