//! cargo-fuzz target `llm`: see `tearline::fuzzing::llm` for the input format and invariants.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tearline::fuzzing::llm::fuzz(data));
