//! The resound control command. See `resound --help`.

fn main() {
    std::process::exit(resound::cli::main(std::env::args().collect()));
}
