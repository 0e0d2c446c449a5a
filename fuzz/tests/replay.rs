//! Replays every committed corpus input and crash reproducer through its
//! target's body, without the fuzzer (stable Rust):
//! `cargo test --manifest-path fuzz/Cargo.toml --no-default-features`.
//! The main workspace runs the same replay in
//! `crates/resound/tests/fuzz_corpus.rs`.

use std::path::Path;

#[test]
fn every_corpus_and_artifact_replays() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, body) in resound_fuzz::TARGETS {
        let corpus = resound_fuzz::replay_dir(body, &root.join("corpus").join(name)).unwrap();
        let artifacts = resound_fuzz::replay_dir(body, &root.join("artifacts").join(name)).unwrap();
        assert!(corpus > 0, "target {name} has no corpus");
        println!("{name}: {corpus} corpus inputs, {artifacts} reproducers");
    }
}

#[test]
fn the_seeds_are_what_the_corpus_starts_from() {
    for (target, name, bytes) in resound_fuzz::seeds::all() {
        let body = resound_fuzz::target(target).expect("known target");
        body(&bytes);
        assert!(name.starts_with("seed-"));
    }
}
