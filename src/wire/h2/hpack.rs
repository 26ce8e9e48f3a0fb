//! The HPACK decoder (RFC 7541) of one direction of an HTTP/2 connection.
//!
//! Why our own: the observer must follow the dynamic table exactly as the receiving endpoint
//! does (every header block, in order, whatever stream it is on), with hard bounds on memory and
//! no panic on any input; the `h2` crate exposes its decoder only behind its `unstable` feature
//! (no semver promise), and the other HPACK crates are unmaintained. Decoding is small: integers
//! (§5.1), strings with optional Huffman coding (§5.2, `huffman`), the static table (Appendix
//! A), the dynamic table with size updates (§4, §6.3).
//!
//! Invariants:
//! - Never panics; an invalid block is an [`HpackError`] naming what was wrong, after which the
//!   table is no longer trusted (the observer goes opaque for the connection; bytes pass).
//! - Memory is bounded: the dynamic table holds at most its size limit ([`TABLE_CAP`] at most,
//!   counted as RFC 7541 §4.1 does: name + value + 32 per entry), one decoded header list at
//!   most [`LIST_LIMIT`] bytes, and two scratch buffers reused across fields.
//! - A size update larger than what the receiver allowed (its `SETTINGS_HEADER_TABLE_SIZE`,
//!   [`Decoder::allow_max_size`]) or than [`TABLE_CAP`] is an error, as is one after the first
//!   field of a block.

use std::collections::VecDeque;

use super::huffman;

/// The dynamic table size every endpoint starts with (RFC 9113 §6.5.2).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// The largest dynamic table the observer follows; a peer allowing more makes it opaque.
pub const TABLE_CAP: usize = 64 * 1024;

/// The largest decoded header list (RFC 7541 §4.1 sizes) the observer reads.
pub const LIST_LIMIT: usize = 64 * 1024;

/// An invalid or oversized header block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("header block ends inside a field (a truncated integer or string)")]
    Truncated,
    #[error("HPACK integer over 2^32 (RFC 7541 §5.1)")]
    IntegerOverflow,
    #[error(
        "index {index} names no entry: the static table has 1..=61, the dynamic table {dynamic} more"
    )]
    BadIndex { index: u64, dynamic: usize },
    #[error(
        "invalid Huffman string: the EOS symbol, or padding not 1 to 7 one-bits (RFC 7541 §5.2)"
    )]
    Huffman,
    #[error("dynamic table size update to {size} bytes, over the {max} allowed")]
    TableSize { size: u64, max: usize },
    #[error("dynamic table size update after the block's first field (RFC 7541 §4.2)")]
    LateSizeUpdate,
    #[error("header list over {LIST_LIMIT} bytes (name + value + 32 per field)")]
    ListTooLarge,
}

/// RFC 7541 Appendix A.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// One dynamic table entry: name and value in one allocation.
#[derive(Debug)]
struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }
    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }
    fn size(&self) -> usize {
        self.bytes.len() + 32
    }
}

/// The decoder of one direction (see the module doc).
#[derive(Debug)]
pub struct Decoder {
    /// Newest first (index 62 is `table[0]`).
    table: VecDeque<Entry>,
    size: usize,
    max_size: usize,
    /// The largest size update the receiver allows (its `SETTINGS_HEADER_TABLE_SIZE`).
    allowed: usize,
    name: Vec<u8>,
    value: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a field's name comes from.
enum NameRef {
    Indexed(u64),
    Literal,
}

impl Decoder {
    /// A decoder with the default table size (4096).
    pub fn new() -> Self {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: DEFAULT_TABLE_SIZE,
            allowed: DEFAULT_TABLE_SIZE,
            name: Vec::new(),
            value: Vec::new(),
        }
    }

    /// The receiver announced `SETTINGS_HEADER_TABLE_SIZE = size`: size updates up to it are
    /// allowed. The observer raises it only (a lowered setting takes effect when acknowledged;
    /// the endpoint, not the observer, polices that).
    pub fn allow_max_size(&mut self, size: u32) {
        self.allowed = self.allowed.max(size as usize);
    }

    /// The dynamic table's size (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// Bytes held beyond the struct (entries and scratch buffers).
    pub fn held_bytes(&self) -> usize {
        self.size + self.name.capacity() + self.value.capacity()
    }

    /// Decodes one complete header block, calling `field(name, value)` for every field in order.
    pub fn decode(
        &mut self,
        mut block: &[u8],
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let (mut list, mut first) = (0usize, true);
        while let Some(&b) = block.first() {
            if b & 0x80 != 0 {
                let index = int(&mut block, 7)?;
                let (n, v) = self.get(index)?;
                list += n.len() + v.len() + 32;
                if list > LIST_LIMIT {
                    return Err(HpackError::ListTooLarge);
                }
                field(n, v);
            } else if b & 0xe0 == 0x20 {
                if !first {
                    return Err(HpackError::LateSizeUpdate);
                }
                let size = int(&mut block, 5)?;
                let max = self.allowed.min(TABLE_CAP);
                if size > max as u64 {
                    return Err(HpackError::TableSize { size, max });
                }
                self.max_size = size as usize;
                self.evict(0);
                continue;
            } else {
                // 01xxxxxx incremental indexing; 0000xxxx without; 0001xxxx never indexed.
                let (prefix, index_it) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                let name = match int(&mut block, prefix)? {
                    0 => NameRef::Literal,
                    i => NameRef::Indexed(i),
                };
                let mut n = std::mem::take(&mut self.name);
                n.clear();
                let read = match name {
                    NameRef::Literal => string(&mut block, &mut n),
                    NameRef::Indexed(i) => self.get(i).map(|(name, _)| n.extend_from_slice(name)),
                };
                let mut v = std::mem::take(&mut self.value);
                v.clear();
                let read = read.and_then(|()| string(&mut block, &mut v));
                let len = n.len() + v.len() + 32;
                list += len;
                let res = read.and_then(|()| {
                    if list > LIST_LIMIT {
                        return Err(HpackError::ListTooLarge);
                    }
                    field(&n, &v);
                    if index_it {
                        self.insert(&n, &v);
                    }
                    Ok(())
                });
                self.name = n;
                self.value = v;
                res?;
            }
            first = false;
        }
        Ok(())
    }

    fn get(&self, index: u64) -> Result<(&[u8], &[u8]), HpackError> {
        let bad = || HpackError::BadIndex {
            index,
            dynamic: self.table.len(),
        };
        match index {
            0 => Err(bad()),
            1..=61 => {
                let (n, v) = STATIC[index as usize - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => {
                let e = usize::try_from(index - 62)
                    .ok()
                    .and_then(|i| self.table.get(i))
                    .ok_or_else(bad)?;
                Ok((e.name(), e.value()))
            }
        }
    }

    /// Adds an entry (RFC 7541 §4.4: evict first; an entry larger than the table empties it
    /// and is not added).
    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        if size > self.max_size {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        self.table.push_front(Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        });
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some(e) = self.table.pop_back() else {
                self.size = 0;
                return;
            };
            self.size -= e.size();
        }
    }
}

/// Reads an integer with an `n`-bit prefix (RFC 7541 §5.1), at most 2^32.
fn int(block: &mut &[u8], n: u32) -> Result<u64, HpackError> {
    let (&first, mut rest) = block.split_first().ok_or(HpackError::Truncated)?;
    let max = (1u64 << n) - 1;
    let mut v = u64::from(first) & max;
    if v == max {
        let mut shift = 0;
        loop {
            if shift > 28 {
                return Err(HpackError::IntegerOverflow);
            }
            let (&b, r) = rest.split_first().ok_or(HpackError::Truncated)?;
            rest = r;
            v += u64::from(b & 0x7f) << shift;
            if v > u64::from(u32::MAX) {
                return Err(HpackError::IntegerOverflow);
            }
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
    }
    *block = rest;
    Ok(v)
}

/// Reads a string literal (RFC 7541 §5.2), appending it to `out`.
fn string(block: &mut &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let huffman = block.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = int(block, 7)?;
    if len > LIST_LIMIT as u64 {
        return Err(HpackError::ListTooLarge);
    }
    let len = len as usize;
    let s = block.get(..len).ok_or(HpackError::Truncated)?;
    *block = &block[len..];
    if huffman {
        huffman::decode(s, out).map_err(|_| HpackError::Huffman)
    } else {
        out.extend_from_slice(s);
        Ok(())
    }
}

#[cfg(test)]
#[path = "hpack_tests.rs"]
mod tests;
