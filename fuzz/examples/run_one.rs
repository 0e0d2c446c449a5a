//! Runs one target's body on files: `cargo run --example run_one -- TARGET FILE...`
//! (to reproduce a crash or time an input without the fuzzer).

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().expect("usage: run_one TARGET FILE...");
    let body = resound_fuzz::target(&name).expect("unknown target");
    for f in args {
        let data = std::fs::read(&f).expect("readable file");
        let t = std::time::Instant::now();
        body(&data);
        println!("{f}: ok in {:?}", t.elapsed());
    }
}
