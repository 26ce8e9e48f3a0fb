//! cargo-fuzz target `load`: see `tearline::fuzzing::load` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::load::fuzz(data));
