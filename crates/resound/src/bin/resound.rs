//! The resound control command. See `resound --help`.

fn main() {
    std::process::exit(resound_cli::cli::main(std::env::args().collect()));
}
