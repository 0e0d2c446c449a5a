//! The fuzz corpora and crash reproducers, replayed without the fuzzer: every
//! file under `fuzz/corpus/<target>/` and `fuzz/artifacts/<target>/` runs
//! through its target's body (`resound_fuzz`), the same code
//! `scripts/fuzz.sh` fuzzes, so a fixed crash stays fixed on stable.

use std::path::Path;

#[test]
fn fuzz_corpora_and_reproducers_replay_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (name, body) in resound_fuzz::TARGETS {
        let corpus = resound_fuzz::replay_dir(body, &root.join("corpus").join(name)).unwrap();
        let fixed = resound_fuzz::replay_dir(body, &root.join("artifacts").join(name)).unwrap();
        assert!(
            corpus > 0,
            "fuzz target {name} has no corpus in fuzz/corpus/{name}"
        );
        println!("{name}: {corpus} corpus inputs, {fixed} crash reproducers replayed");
    }
}
