//! cargo-fuzz target `profile`: see `tearline::fuzzing::profile` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::profile::fuzz(data));
