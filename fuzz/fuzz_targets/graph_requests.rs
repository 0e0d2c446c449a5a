//! Fuzz target `graph_requests`: see `resound_fuzz::graph_requests` for what it drives and checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| resound_fuzz::graph_requests::run(data));
