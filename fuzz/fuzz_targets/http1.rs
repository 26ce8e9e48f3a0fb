//! cargo-fuzz target `http1`: see `tearline::fuzzing::http1` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::http1::fuzz(data));
