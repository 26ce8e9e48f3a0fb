//! `X-Toxiproxy-Request-Id`: the id Toxiproxy puts on every API answer (zerolog's
//! `hlog.RequestIDHandler`), so clients and logs that carry it keep working.
//!
//! The ids have Toxiproxy's shape, an [xid](https://github.com/rs/xid): 12 bytes — seconds since
//! the Unix epoch (4, big-endian), a per-process random value (5), a counter (3) — written as 20
//! characters of lowercase base32hex (`0-9a-v`). Invariant: ids of one process are distinct
//! until the 24-bit counter wraps within one second (16.7 M requests a second).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rand::RngExt;

/// The response header's name.
pub const HEADER: &str = "x-toxiproxy-request-id";

const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";

/// Makes request ids for one API server.
#[derive(Debug)]
pub struct RequestIds {
    process: [u8; 5],
    counter: AtomicU32,
}

impl Default for RequestIds {
    fn default() -> Self {
        let mut rng = rand::rng();
        RequestIds {
            process: rng.random(),
            counter: AtomicU32::new(rng.random()),
        }
    }
}

impl RequestIds {
    /// The next id.
    pub fn next(&self) -> String {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let count = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut raw = [0u8; 12];
        raw[..4].copy_from_slice(&(secs as u32).to_be_bytes());
        raw[4..9].copy_from_slice(&self.process);
        raw[9..].copy_from_slice(&count.to_be_bytes()[1..]);
        encode(&raw)
    }
}

/// Base32hex (lowercase, no padding) of 12 bytes: 20 characters.
fn encode(raw: &[u8; 12]) -> String {
    let mut out = String::with_capacity(20);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for &b in raw {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(char::from(ALPHABET[((acc >> bits) & 31) as usize]));
        }
    }
    if bits > 0 {
        out.push(char::from(ALPHABET[((acc << (5 - bits)) & 31) as usize]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_xids_shape_and_differ() {
        let ids = RequestIds::default();
        let (a, b) = (ids.next(), ids.next());
        assert_eq!(a.len(), 20);
        assert!(a.bytes().all(|c| ALPHABET.contains(&c)), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn encoding_matches_base32hex() {
        // The example of xid's README.
        let raw = [
            0x4d, 0x88, 0xe1, 0x5b, 0x60, 0xf4, 0x86, 0xe4, 0x28, 0x41, 0x2d, 0xc9,
        ];
        assert_eq!(encode(&raw), "9m4e2mr0ui3e8a215n4g");
    }
}
