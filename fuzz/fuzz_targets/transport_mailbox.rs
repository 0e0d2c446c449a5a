//! Fuzz target `transport_mailbox`: see `resound_fuzz::transport_mailbox` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| resound_fuzz::transport_mailbox::run(data));
