//! Fuzz target `midi_buffer`: see `resound_fuzz::midi_buffer` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| resound_fuzz::midi_buffer::run(data));
