//! cargo-fuzz target `lab`: see `tearline::fuzzing::lab` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::lab::fuzz(data));
