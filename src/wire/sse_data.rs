//! The `data` buffer of the SSE scanner: the whole value for consumers that read events (the
//! load client, the lab's tests), or — for the proxy's observer — a streaming XXH3 hash, the
//! length and only the first `head` bytes, so that memory does not depend on event size.
//!
//! Invariants: in both modes the event's data is the WHATWG data buffer without its final LF;
//! `hash()` equals `xxh3_64` of that data and `len()` its length; in bounded mode the kept
//! bytes are exactly its first `min(len, head)` bytes. The LF that ends a data line is held
//! back until another data line begins, so the final LF is never hashed and never needs undoing.

use xxhash_rust::xxh3::{Xxh3, xxh3_64};

/// One event's data, whole or bounded.
#[derive(Clone)]
pub(super) struct DataBuf {
    /// `Some(n)`: keep only the first `n` bytes (and hash as they pass).
    head_limit: Option<usize>,
    kept: Vec<u8>,
    hasher: Option<Box<Xxh3>>,
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
            hasher: None,
            len: 0,
            pending_lf: false,
            any: false,
        }
    }

    /// Keeps the first `head` bytes, hashes and counts the rest.
    pub(super) fn bounded(head: usize) -> Self {
        DataBuf {
            head_limit: Some(head),
            hasher: Some(Box::new(Xxh3::new())),
            ..Self::whole()
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        match self.head_limit {
            None => self.kept.extend_from_slice(bytes),
            Some(limit) => {
                if let Some(h) = self.hasher.as_mut() {
                    h.update(bytes);
                }
                let room = limit.saturating_sub(self.kept.len());
                self.kept.extend_from_slice(&bytes[..room.min(bytes.len())]);
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

    /// The data (bounded mode: its first bytes).
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
            Some(h) => h.digest(),
            None => xxh3_64(&self.kept),
        }
    }

    /// Bytes held (for the `bytes_buffered` gauge).
    pub(super) fn held(&self) -> usize {
        self.kept.capacity()
    }

    /// Empties the buffer for the next event.
    pub(super) fn clear(&mut self) {
        self.kept.clear();
        if let Some(h) = self.hasher.as_mut() {
            h.reset();
        }
        self.len = 0;
        self.pending_lf = false;
        self.any = false;
    }
}
