//! The `data` buffer of the SSE scanner: the whole value for consumers that read events (the
//! load client, the lab's tests), or — for the proxy's observer — the length, the value itself
//! while it is at most `head` bytes (hashed whole at its end), and for a longer one a streaming
//! XXH3 hash and only its JSON-RPC first-level facts read as it streams ([`RpcScan`]), so that
//! memory depends neither on event size nor, for the events in flight on many streams, on
//! `head`.
//!
//! Invariants: in both modes the event's data is the WHATWG data buffer without its final LF;
//! `hash()` equals `xxh3_64` of that data and `len()` its length. In bounded mode, after
//! [`DataBuf::finish`], the kept bytes are the whole data if `len ≤ head`, else the minimal
//! head of its facts ([`HeadFacts::to_head`], empty when it shows no response id) — what
//! `audit::rpc::parse_head` reads from either. The LF that ends a data line is held back until
//! another data line begins, so the final LF is never hashed and never needs undoing.

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

use super::rpc_scan::{HeadFacts, RpcScan};

use super::sse::ID_LIMIT;

/// A kept buffer larger than this is freed between events rather than reused.
const KEEP_CAPACITY: usize = 512;

/// One event's data, whole or bounded.
#[derive(Clone)]
pub(super) struct DataBuf {
    /// `Some(n)`: keep only the first `n` bytes (and hash as they pass).
    head_limit: Option<usize>,
    kept: Vec<u8>,
    /// Bounded mode, once the value outgrew `head_limit` (`kept` is then freed).
    long: Option<RpcScan>,
    /// The streaming hash of a long value (kept across events for its allocation): a value
    /// within the head limit is hashed whole at its end, in one pass over `kept`.
    hasher: Option<Box<Xxh3>>,
    /// The value outgrew the head limit: `hasher` holds its hash so far.
    streaming: bool,
    len: u64,
    /// A data line ended; its LF is written when another data line begins.
    pending_lf: bool,
    /// A data line was seen since the last dispatch (the WHATWG buffer is not empty).
    any: bool,
}

impl std::fmt::Debug for DataBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataBuf")
            .field("head_limit", &self.head_limit)
            .field("len", &self.len)
            .finish()
    }
}

impl DataBuf {
    /// Keeps the whole value.
    pub(super) fn whole() -> Self {
        DataBuf {
            head_limit: None,
            kept: Vec::new(),
            long: None,
            hasher: None,
            streaming: false,
            len: 0,
            pending_lf: false,
            any: false,
        }
    }

    /// Keeps the first `head` bytes, hashes and counts the rest.
    pub(super) fn bounded(head: usize) -> Self {
        DataBuf {
            head_limit: Some(head),
            ..Self::whole()
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        match self.head_limit {
            None => self.kept.extend_from_slice(bytes),
            Some(limit) => {
                if let Some(scan) = self.long.as_mut() {
                    if let Some(h) = self.hasher.as_mut() {
                        h.update(bytes);
                    }
                    scan.feed(bytes);
                } else if self.kept.len() + bytes.len() <= limit {
                    let want = self.kept.len() + bytes.len();
                    if want > self.kept.capacity() {
                        // Grow by doubling, never past the limit.
                        let cap = (2 * self.kept.capacity()).clamp(want, limit);
                        self.kept.reserve_exact(cap - self.kept.len());
                    }
                    self.kept.extend_from_slice(bytes);
                } else {
                    let h = self.hasher.get_or_insert_with(|| Box::new(Xxh3::new()));
                    h.reset();
                    h.update(&self.kept);
                    h.update(bytes);
                    self.streaming = true;
                    let mut scan = RpcScan::new(ID_LIMIT);
                    scan.feed(&self.kept);
                    scan.feed(bytes);
                    self.kept = Vec::new();
                    self.long = Some(scan);
                }
            }
        }
    }

    /// Value bytes of the current data line.
    pub(super) fn push(&mut self, seg: &[u8]) {
        if self.pending_lf {
            self.pending_lf = false;
            self.write(b"\n");
        }
        self.write(seg);
    }

    /// The current data line ended.
    pub(super) fn line_end(&mut self) {
        if self.pending_lf {
            self.write(b"\n");
        }
        self.pending_lf = true;
        self.any = true;
    }

    /// True if and only if no data line was seen (the event is not dispatched).
    pub(super) fn is_empty(&self) -> bool {
        !self.any
    }

    /// The value ended (its event is dispatched): a long value's kept bytes become the head of
    /// its facts.
    pub(super) fn finish(&mut self) {
        if let Some(scan) = self.long.take() {
            self.kept = scan
                .facts()
                .as_ref()
                .map(HeadFacts::to_head)
                .unwrap_or_default();
        }
    }

    /// The data (bounded mode, after [`DataBuf::finish`]: see the module doc).
    pub(super) fn kept(&self) -> &[u8] {
        &self.kept
    }

    /// Length of the whole data.
    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// XXH3-64 of the whole data.
    pub(super) fn hash(&self) -> u64 {
        match &self.hasher {
            Some(h) if self.streaming => h.digest(),
            _ => xxh3_64(&self.kept),
        }
    }

    /// Bytes held (for the `bytes_buffered` gauge).
    pub(super) fn held(&self) -> usize {
        self.kept.capacity() + self.long.as_ref().map_or(0, RpcScan::held)
    }

    /// Empties the buffer for the next event.
    pub(super) fn clear(&mut self) {
        if self.kept.capacity() > KEEP_CAPACITY && self.head_limit.is_some() {
            self.kept = Vec::new();
        }
        self.kept.clear();
        self.long = None;
        self.streaming = false;
        self.len = 0;
        self.pending_lf = false;
        self.any = false;
    }
}
