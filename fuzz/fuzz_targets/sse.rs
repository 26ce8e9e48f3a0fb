//! cargo-fuzz target `sse`: see `tearline::fuzzing::sse` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::sse::fuzz(data));
