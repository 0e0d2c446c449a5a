#!/usr/bin/env bash
# Model-checks the lock-free primitives of crates/shm/src/sync.rs and
# crates/shm/src/seqlock.rs with loom
# (crates/shm/tests/loom.rs). Uses its own target dir so the `--cfg loom`
# build does not invalidate the normal build cache.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p resound-shm --test loom --release -- --nocapture "$@"
