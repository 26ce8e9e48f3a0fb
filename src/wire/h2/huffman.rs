//! The HPACK Huffman code (RFC 7541 Appendix B), decoding only.
//!
//! Why this shape: the code is canonical (codes of one length are consecutive, in symbol
//! order, and shorter codes sort first), so the code lengths alone define it; decoding walks
//! the bits and asks, per length, whether the code read so far falls in that length's range.
//! Header strings are short and decoded once, so a bit-at-a-time walk costs nothing that
//! matters and needs no 4 KiB state table.
//!
//! Invariants: decoding never panics; it fails on the EOS symbol inside a string and on padding
//! longer than 7 bits or not all ones (RFC 7541 §5.2); output is appended, never more than
//! 8/5 of the input length (the shortest code is 5 bits).

use std::sync::OnceLock;

/// Code length of every symbol (0..=255, then EOS = 256), from RFC 7541 Appendix B.
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// The canonical code, by length: the first code of each length, how many symbols have it, and
/// where they start in `symbols` (sorted by length, then symbol).
struct Canonical {
    first: [u32; MAX_LEN + 1],
    count: [u16; MAX_LEN + 1],
    offset: [u16; MAX_LEN + 1],
    symbols: [u16; 257],
    codes: [u32; 257],
}

fn canonical() -> &'static Canonical {
    static C: OnceLock<Canonical> = OnceLock::new();
    C.get_or_init(|| {
        let mut c = Canonical {
            first: [0; MAX_LEN + 1],
            count: [0; MAX_LEN + 1],
            offset: [0; MAX_LEN + 1],
            symbols: [0; 257],
            codes: [0; 257],
        };
        for &l in &LENGTHS {
            c.count[l as usize] += 1;
        }
        let (mut code, mut at) = (0u32, 0u16);
        for len in 1..=MAX_LEN {
            c.first[len] = code;
            c.offset[len] = at;
            at += c.count[len];
            code = (code + u32::from(c.count[len])) << 1;
        }
        let mut next = c.offset;
        let mut next_code = c.first;
        for (sym, &l) in LENGTHS.iter().enumerate() {
            let l = l as usize;
            c.symbols[next[l] as usize] = sym as u16;
            c.codes[sym] = next_code[l];
            next[l] += 1;
            next_code[l] += 1;
        }
        c
    })
}

/// A Huffman-coded string was invalid (RFC 7541 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HuffmanError;

/// Decodes `src`, appending the symbols to `out`.
pub fn decode(src: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let c = canonical();
    out.reserve(src.len() * 8 / 5);
    let (mut code, mut len) = (0u32, 0usize);
    for &byte in src {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            let k = code.wrapping_sub(c.first[len]);
            if k < u32::from(c.count[len]) {
                let sym = c.symbols[(c.offset[len] as u32 + k) as usize];
                if sym == EOS {
                    return Err(HuffmanError);
                }
                out.push(sym as u8);
                (code, len) = (0, 0);
            } else if len == MAX_LEN {
                return Err(HuffmanError);
            }
        }
    }
    // Padding: the most significant bits of EOS (all ones), strictly shorter than 8 bits.
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError);
    }
    Ok(())
}

/// Encodes `src` (for tests that build header blocks).
#[cfg(test)]
pub fn encode(src: &[u8]) -> Vec<u8> {
    let c = canonical();
    let (mut acc, mut bits, mut out) = (0u64, 0u32, Vec::new());
    for &b in src {
        let l = u32::from(LENGTHS[b as usize]);
        acc = (acc << l) | u64::from(c.codes[b as usize]);
        bits += l;
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        out.push(((acc << (8 - bits)) | ((1 << (8 - bits)) - 1)) as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_string_round_trips_and_known_codes_match_the_rfc() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        decode(&encode(&all), &mut out).unwrap();
        assert_eq!(out, all);
        // RFC 7541 C.4.1: "www.example.com".
        assert_eq!(
            encode(b"www.example.com"),
            [
                0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff
            ]
        );
        assert_eq!(canonical().codes[256], 0x3fff_ffff);
    }

    #[test]
    fn eos_and_bad_padding_are_refused() {
        let mut out = Vec::new();
        // Padding of 8 one-bits.
        assert_eq!(decode(&[0xff], &mut out), Err(HuffmanError));
        // '0' (00000) followed by zero padding bits.
        assert_eq!(decode(&[0x00], &mut out), Err(HuffmanError));
        // The EOS symbol itself (30 ones) plus padding.
        assert_eq!(
            decode(&[0xff, 0xff, 0xff, 0xff], &mut out),
            Err(HuffmanError)
        );
        out.clear();
        // '0' then 3 one-bits of padding.
        assert_eq!(decode(&[0x07], &mut out), Ok(()));
        assert_eq!(out, b"0");
    }
}
