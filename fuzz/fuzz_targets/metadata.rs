//! Fuzz target `metadata`: see `resound_fuzz::metadata` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| resound_fuzz::metadata::run(data));
