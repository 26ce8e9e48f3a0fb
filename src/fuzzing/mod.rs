//! Fuzz entry points: one function per fuzz target, shared by the `fuzz/` crate (cargo-fuzz,
//! nightly) and by `tests/wire/fuzz_corpus.rs` (the corpus replay and a bounded pseudo-random run on
//! stable), so CI exercises exactly the code the fuzzers run.
//!
//! Every entry takes arbitrary bytes and panics if and only if an invariant of the code under
//! test is broken (a panic inside that code is a failure as well). Inputs are split into a few
//! control bytes (how to chunk, which operation) and the payload; [`Input`] does that split the
//! same way for every target so corpus files stay readable. Not a stable API: hidden from docs.

pub mod control;
pub mod http1;
pub mod lab;
pub mod llm;
pub mod load;
pub mod profile;
pub mod sse;

/// The names of the targets, in the order `fuzz/run.sh` and the corpus test run them.
pub const TARGETS: &[&str] = &["http1", "sse", "profile", "control", "lab", "load", "llm"];

/// Runs target `name` on `data`; false if no target has that name.
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "http1" => http1::fuzz(data),
        "sse" => sse::fuzz(data),
        "profile" => profile::fuzz(data),
        "control" => control::fuzz(data),
        "lab" => lab::fuzz(data),
        "load" => load::fuzz(data),
        "llm" => llm::fuzz(data),
        _ => return false,
    }
    true
}

/// A small deterministic generator (xorshift64*), seeded from input bytes: chunk sizes and
/// choices depend only on the input, so every crash reproduces from its file.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded from `seed` (any length; empty is fine).
    pub fn from_bytes(seed: &[u8]) -> Rng {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for &b in seed {
            s = (s ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
        Rng(s | 1)
    }

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// A fuzz input split into its control bytes and its payload.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The first [`Input::CONTROL`] bytes (fewer when the input is shorter).
    pub control: &'a [u8],
    /// The rest.
    pub payload: &'a [u8],
}

impl<'a> Input<'a> {
    /// Control bytes at the front of every input.
    pub const CONTROL: usize = 4;

    /// Splits `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        let (control, payload) = data.split_at(data.len().min(Self::CONTROL));
        Input { control, payload }
    }

    /// Control byte `i` (0 when absent).
    pub fn byte(&self, i: usize) -> u8 {
        self.control.get(i).copied().unwrap_or(0)
    }

    /// Chunk boundaries for `len` bytes, driven by the control bytes: control byte 0 picks the
    /// largest piece (1..=256 bytes; 0 means "whole"), the rest seed the sizes.
    pub fn splits(&self, len: usize) -> Vec<usize> {
        splits(self.control, len)
    }
}

/// Chunk boundaries (strictly increasing, inside `1..len`) for `len` bytes, from `seed`:
/// `seed[0]` picks the largest piece (1..=256 bytes; 0 means one piece).
pub fn splits(seed: &[u8], len: usize) -> Vec<usize> {
    let max = usize::from(seed.first().copied().unwrap_or(0));
    if max == 0 {
        return Vec::new();
    }
    let mut rng = Rng::from_bytes(seed);
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        at += 1 + rng.below(max);
        if at >= len {
            return out;
        }
        out.push(at);
    }
}

/// Every single split point `1..len`, plus the 1-byte chunking, for small payloads (bounded so
/// that a fuzz input stays fast): the chunkings each target compares against the whole feed.
pub fn chunkings(control: &[u8], len: usize) -> Vec<Vec<usize>> {
    let mut out = vec![splits(control, len)];
    if len <= 512 {
        out.push((1..len).collect());
    }
    if len <= 64 {
        out.extend((1..len).map(|k| vec![k]));
    }
    out
}

/// The pieces of `data` cut at `bounds` (as made by [`splits`]).
pub fn pieces<'a>(data: &'a [u8], bounds: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut prev = 0;
    for &b in bounds.iter().chain(std::iter::once(&data.len())) {
        out.push(&data[prev..b]);
        prev = b;
    }
    out
}

/// Runs `fut` to completion on this thread's single-threaded tokio runtime (one per thread, so
/// the corpus test's parallel threads never share one).
///
/// After `fut`, one yield lets the runtime turn its I/O driver: tokio frees the registration of
/// a dropped socket only on a driver turn, and an input whose future never waits on I/O would
/// otherwise leave each socket it bound (the `control` target binds listeners) registered
/// until the next turn — about 256 bytes an input, 240 MB over a fuzzing run, which is the
/// harness's growth, not the proxy's.
pub(crate) fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    thread_local! {
        static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("cannot build a tokio runtime for fuzzing: {e}"));
    }
    RT.with(|rt| {
        rt.block_on(async {
            let out = fut.await;
            tokio::task::yield_now().await;
            out
        })
    })
}

/// A mutation of `base` (byte flips, inserts of interesting bytes, deletions, splices with
/// `other`), for the bounded pseudo-random run of the corpus test.
pub fn mutate(base: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    const TOKENS: &[&[u8]] = &[
        b"\r",
        b"\n",
        b"\r\n",
        b":",
        b" ",
        b"data:",
        b"id:",
        b"\r\n\r\n",
        b"0\r\n\r\n",
        b"\xEF\xBB\xBF",
        b"\xC3",
        b"\x00",
        b"{",
        b"}",
        b"\"",
        b"[",
        b"]",
        b"-1",
        b"18446744073709551616",
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length: 3\r\n",
    ];
    let mut out = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(5) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, t.iter().copied());
            }
            2 if at < out.len() => {
                let end = (at + 1 + rng.below(8)).min(out.len());
                out.drain(at..end);
            }
            3 if !other.is_empty() => {
                let from = rng.below(other.len());
                let end = (from + 1 + rng.below(64)).min(other.len());
                out.splice(at..at, other[from..end].iter().copied());
            }
            _ => {
                if !out.is_empty() {
                    let i = rng.below(out.len().min(Input::CONTROL));
                    out[i] = rng.next_u64() as u8;
                }
            }
        }
    }
    out
}
