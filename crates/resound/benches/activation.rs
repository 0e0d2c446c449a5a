fn main() { eprintln!("activation bench: not written yet"); }
