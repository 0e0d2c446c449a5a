//! The resound server. See `resoundd --help`.

// In debug builds, allocating inside the real-time loop (wrapped in
// `assert_no_alloc`) aborts the server, so every test run checks it.
#[cfg(debug_assertions)]
#[global_allocator]
static A: assert_no_alloc::AllocDisabler = assert_no_alloc::AllocDisabler;

fn main() {
    std::process::exit(resound_server::main(std::env::args().collect()));
}
