//! cargo-fuzz target `control`: see `tearline::fuzzing::control` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::control::fuzz(data));
