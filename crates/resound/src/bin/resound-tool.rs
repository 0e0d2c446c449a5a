//! Demo, test and load clients. See `resound-tool --help`.

// Debug builds abort on an allocation inside a process callback.
#[cfg(debug_assertions)]
#[global_allocator]
static A: assert_no_alloc::AllocDisabler = assert_no_alloc::AllocDisabler;

fn main() {
    std::process::exit(resound_lab::tools::main(std::env::args().collect()));
}
