//! Fuzz target `profile_reader`: see `resound_fuzz::profile_reader` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| resound_fuzz::profile_reader::run(data));
