//! Fuzz target `wire_frame`: see `resound_fuzz::wire_frame` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| resound_fuzz::wire_frame::run(data));
