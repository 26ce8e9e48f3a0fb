//! HTTP/2 frame headers and the few frames the proxy writes itself (RFC 9113 §4.1, §6).
//!
//! Why hand-written: the relay must split a `DATA` frame at a byte, inject `RST_STREAM`,
//! `GOAWAY` and `WINDOW_UPDATE`, and otherwise forward every frame byte for byte; it needs the
//! 9-byte header and these encoders, not a client or server stack.
//!
//! Invariants: parsing never fails on a value a peer may send (unknown frame types and flags are
//! kept as numbers, reserved bits are masked); encoders write exactly the frame RFC 9113 defines.

/// The client connection preface (RFC 9113 §3.4), the first 24 bytes of every h2 connection
/// (h2c with prior knowledge or after TLS ALPN `h2`).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Length of a frame header.
pub const HEADER_LEN: usize = 9;

/// The largest frame payload every peer must accept before SETTINGS say otherwise.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The initial flow-control window of a stream and of the connection (RFC 9113 §6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;

/// Flags (RFC 9113 §6): their meaning depends on the frame type.
pub mod flags {
    /// `DATA`, `HEADERS`: the sender's last frame on the stream.
    pub const END_STREAM: u8 = 0x1;
    /// `SETTINGS`, `PING`: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// `HEADERS`, `PUSH_PROMISE`, `CONTINUATION`: the header block ends in this frame.
    pub const END_HEADERS: u8 = 0x4;
    /// `DATA`, `HEADERS`, `PUSH_PROMISE`: a pad length byte leads the payload.
    pub const PADDED: u8 = 0x8;
    /// `HEADERS`: stream dependency and weight lead the payload (after the pad length).
    pub const PRIORITY: u8 = 0x20;
}

/// A frame type (RFC 9113 §6; unknown types are kept, as the RFC requires them ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameType {
    Data,
    Headers,
    Priority,
    RstStream,
    Settings,
    PushPromise,
    Ping,
    GoAway,
    WindowUpdate,
    Continuation,
    /// An extension frame type (e.g. `ALTSVC` 0xa, `ORIGIN` 0xc, `PRIORITY_UPDATE` 0x10).
    Unknown(u8),
}

impl FrameType {
    /// The type of the wire value `v`.
    pub fn from_u8(v: u8) -> FrameType {
        match v {
            0x0 => FrameType::Data,
            0x1 => FrameType::Headers,
            0x2 => FrameType::Priority,
            0x3 => FrameType::RstStream,
            0x4 => FrameType::Settings,
            0x5 => FrameType::PushPromise,
            0x6 => FrameType::Ping,
            0x7 => FrameType::GoAway,
            0x8 => FrameType::WindowUpdate,
            0x9 => FrameType::Continuation,
            other => FrameType::Unknown(other),
        }
    }

    /// The wire value.
    pub fn as_u8(self) -> u8 {
        match self {
            FrameType::Data => 0x0,
            FrameType::Headers => 0x1,
            FrameType::Priority => 0x2,
            FrameType::RstStream => 0x3,
            FrameType::Settings => 0x4,
            FrameType::PushPromise => 0x5,
            FrameType::Ping => 0x6,
            FrameType::GoAway => 0x7,
            FrameType::WindowUpdate => 0x8,
            FrameType::Continuation => 0x9,
            FrameType::Unknown(v) => v,
        }
    }
}

/// An HTTP/2 error code (RFC 9113 §7); unknown codes are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// Every defined code with its name in profiles and reports (`cancel`, `no_error`, …).
    pub const NAMED: [(&'static str, ErrorCode); 14] = [
        ("no_error", ErrorCode::NO_ERROR),
        ("protocol_error", ErrorCode::PROTOCOL_ERROR),
        ("internal_error", ErrorCode::INTERNAL_ERROR),
        ("flow_control_error", ErrorCode::FLOW_CONTROL_ERROR),
        ("settings_timeout", ErrorCode::SETTINGS_TIMEOUT),
        ("stream_closed", ErrorCode::STREAM_CLOSED),
        ("frame_size_error", ErrorCode::FRAME_SIZE_ERROR),
        ("refused_stream", ErrorCode::REFUSED_STREAM),
        ("cancel", ErrorCode::CANCEL),
        ("compression_error", ErrorCode::COMPRESSION_ERROR),
        ("connect_error", ErrorCode::CONNECT_ERROR),
        ("enhance_your_calm", ErrorCode::ENHANCE_YOUR_CALM),
        ("inadequate_security", ErrorCode::INADEQUATE_SECURITY),
        ("http_1_1_required", ErrorCode::HTTP_1_1_REQUIRED),
    ];

    /// The code named `name` (lower case, as in [`ErrorCode::NAMED`]).
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        Self::NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| *c)
    }

    /// The code's name, or `0x…` for an unknown one.
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match Self::NAMED.iter().find(|(_, c)| *c == self) {
            Some((n, _)) => std::borrow::Cow::Borrowed(n),
            None => std::borrow::Cow::Owned(format!("{:#x}", self.0)),
        }
    }
}

/// A parsed 9-byte frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length (24 bits).
    pub len: u32,
    pub kind: FrameType,
    pub flags: u8,
    /// Stream identifier (31 bits; the reserved bit masked off). 0 is the connection.
    pub stream: u32,
}

impl FrameHeader {
    /// Parses the first [`HEADER_LEN`] bytes of `b`; `None` if `b` is shorter.
    pub fn parse(b: &[u8]) -> Option<FrameHeader> {
        let h: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: FrameType::from_u8(h[3]),
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        })
    }

    /// The header's 9 bytes. `len` must fit 24 bits.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        debug_assert!(self.len < 1 << 24, "frame length over 24 bits");
        let l = self.len.to_be_bytes();
        let s = self.stream.to_be_bytes();
        [
            l[1],
            l[2],
            l[3],
            self.kind.as_u8(),
            self.flags,
            s[0] & 0x7f,
            s[1],
            s[2],
            s[3],
        ]
    }

    /// True if flag `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }

    /// Bytes of the whole frame, header included.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.len as usize
    }
}

/// The application payload of a `DATA` frame's payload `p` (padding removed): `None` if the pad
/// length is larger than the payload allows (a `PROTOCOL_ERROR` the endpoint will raise).
pub fn data_body(header: &FrameHeader, p: &[u8]) -> Option<std::ops::Range<usize>> {
    if !header.has(flags::PADDED) {
        return Some(0..p.len());
    }
    let pad = *p.first()? as usize;
    (pad < p.len()).then(|| 1..p.len() - pad)
}

/// The header block fragment of a `HEADERS` frame's payload `p` (padding and priority removed).
pub fn headers_block(header: &FrameHeader, p: &[u8]) -> Option<std::ops::Range<usize>> {
    let (mut start, mut end) = (0, p.len());
    if header.has(flags::PADDED) {
        let pad = *p.first()? as usize;
        start = 1;
        end = end.checked_sub(pad)?;
    }
    if header.has(flags::PRIORITY) {
        start += 5;
    }
    (start <= end).then_some(start..end)
}

/// A `DATA` frame header for `len` payload bytes on `stream`.
pub fn data_header(stream: u32, len: u32, end_stream: bool) -> [u8; HEADER_LEN] {
    FrameHeader {
        len,
        kind: FrameType::Data,
        flags: if end_stream { flags::END_STREAM } else { 0 },
        stream,
    }
    .encode()
}

/// A whole `RST_STREAM` frame.
pub fn rst_stream(stream: u32, code: ErrorCode) -> [u8; HEADER_LEN + 4] {
    let mut f = [0; HEADER_LEN + 4];
    f[..HEADER_LEN].copy_from_slice(
        &FrameHeader {
            len: 4,
            kind: FrameType::RstStream,
            flags: 0,
            stream,
        }
        .encode(),
    );
    f[HEADER_LEN..].copy_from_slice(&code.0.to_be_bytes());
    f
}

/// A whole `PING` frame (not an acknowledgement) carrying `payload`.
pub fn ping(payload: [u8; 8]) -> [u8; HEADER_LEN + 8] {
    let mut f = [0; HEADER_LEN + 8];
    f[..HEADER_LEN].copy_from_slice(
        &FrameHeader {
            len: 8,
            kind: FrameType::Ping,
            flags: 0,
            stream: 0,
        }
        .encode(),
    );
    f[HEADER_LEN..].copy_from_slice(&payload);
    f
}

/// A whole `WINDOW_UPDATE` frame (`increment` in 1..=2^31-1; 0 is a protocol error).
pub fn window_update(stream: u32, increment: u32) -> [u8; HEADER_LEN + 4] {
    debug_assert!(increment > 0 && increment < 1 << 31);
    let mut f = [0; HEADER_LEN + 4];
    f[..HEADER_LEN].copy_from_slice(
        &FrameHeader {
            len: 4,
            kind: FrameType::WindowUpdate,
            flags: 0,
            stream,
        }
        .encode(),
    );
    f[HEADER_LEN..].copy_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
    f
}

/// A whole `GOAWAY` frame without debug data.
pub fn goaway(last_stream: u32, code: ErrorCode) -> [u8; HEADER_LEN + 8] {
    let mut f = [0; HEADER_LEN + 8];
    f[..HEADER_LEN].copy_from_slice(
        &FrameHeader {
            len: 8,
            kind: FrameType::GoAway,
            flags: 0,
            stream: 0,
        }
        .encode(),
    );
    f[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    f[HEADER_LEN + 4..].copy_from_slice(&code.0.to_be_bytes());
    f
}

/// `RST_STREAM`'s error code, from its 4-byte payload.
pub fn rst_code(p: &[u8]) -> Option<ErrorCode> {
    Some(ErrorCode(u32::from_be_bytes(p.get(..4)?.try_into().ok()?)))
}

/// `GOAWAY`'s last stream id and error code, from its payload.
pub fn goaway_fields(p: &[u8]) -> Option<(u32, ErrorCode)> {
    let last = u32::from_be_bytes(p.get(..4)?.try_into().ok()?) & 0x7fff_ffff;
    Some((
        last,
        ErrorCode(u32::from_be_bytes(p.get(4..8)?.try_into().ok()?)),
    ))
}

/// `WINDOW_UPDATE`'s increment, from its payload.
pub fn window_increment(p: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(p.get(..4)?.try_into().ok()?) & 0x7fff_ffff)
}

/// The (identifier, value) pairs of a `SETTINGS` payload (a trailing partial entry is ignored).
pub fn settings(p: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    p.chunks_exact(6).map(|e| {
        (
            u16::from_be_bytes([e[0], e[1]]),
            u32::from_be_bytes([e[2], e[3], e[4], e[5]]),
        )
    })
}

/// `SETTINGS` identifiers the relay reads.
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_the_reserved_bit_is_masked() {
        let h = FrameHeader {
            len: 0x01_02_03,
            kind: FrameType::Headers,
            flags: flags::END_HEADERS | flags::END_STREAM,
            stream: 0x7fff_fffe,
        };
        assert_eq!(FrameHeader::parse(&h.encode()), Some(h));
        let mut raw = h.encode();
        raw[5] |= 0x80;
        assert_eq!(FrameHeader::parse(&raw).unwrap().stream, 0x7fff_fffe);
        assert_eq!(FrameHeader::parse(&raw[..8]), None);
    }

    #[test]
    fn unknown_types_and_codes_are_kept_as_numbers() {
        assert_eq!(FrameType::from_u8(0x10), FrameType::Unknown(0x10));
        assert_eq!(FrameType::Unknown(0x10).as_u8(), 0x10);
        assert_eq!(ErrorCode(0x99).name(), "0x99");
        assert_eq!(ErrorCode::from_name("cancel"), Some(ErrorCode::CANCEL));
        assert_eq!(ErrorCode::CANCEL.name(), "cancel");
    }

    #[test]
    fn written_frames_read_back() {
        let r = rst_stream(5, ErrorCode::CANCEL);
        let h = FrameHeader::parse(&r).unwrap();
        assert_eq!((h.kind, h.stream, h.len), (FrameType::RstStream, 5, 4));
        assert_eq!(rst_code(&r[HEADER_LEN..]), Some(ErrorCode::CANCEL));
        let g = goaway(7, ErrorCode::NO_ERROR);
        assert_eq!(
            goaway_fields(&g[HEADER_LEN..]),
            Some((7, ErrorCode::NO_ERROR))
        );
        let w = window_update(0, 1000);
        assert_eq!(window_increment(&w[HEADER_LEN..]), Some(1000));
        let d = FrameHeader::parse(&data_header(3, 10, true)).unwrap();
        assert!(d.has(flags::END_STREAM) && d.len == 10 && d.kind == FrameType::Data);
    }

    #[test]
    fn padding_and_priority_are_stripped_and_bad_padding_is_refused() {
        let padded = FrameHeader {
            len: 6,
            kind: FrameType::Data,
            flags: flags::PADDED,
            stream: 1,
        };
        assert_eq!(data_body(&padded, &[2, b'h', b'i', b'!', 0, 0]), Some(1..4));
        assert_eq!(data_body(&padded, &[9, 0, 0]), None);
        let headers = FrameHeader {
            len: 0,
            kind: FrameType::Headers,
            flags: flags::PADDED | flags::PRIORITY,
            stream: 1,
        };
        let p = [1, 0, 0, 0, 3, 16, 0x82, 0];
        assert_eq!(headers_block(&headers, &p), Some(6..7));
        let s: Vec<_> = settings(&[0, 4, 0, 1, 0, 0, 0]).collect();
        assert_eq!(s, vec![(4, 65536)]);
    }
}
