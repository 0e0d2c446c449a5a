#!/usr/bin/env bash
# Runs every test: formatting, lints, the API docs (no broken links), unit and
# property tests, end-to-end tests with real server and client processes, and
# the loom model checks.
set -euo pipefail
cd "$(dirname "$0")/.."
RESOUND_SETUP_TESTS=1 source scripts/setup.sh
# Everything the tests need is installed now: a test that finds a tool
# missing fails instead of skipping (permission skips still print SKIP).
export RESOUND_REQUIRE_TEST_TOOLS=1
start=$(date +%s)
echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
echo "== cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo doc (warnings are errors: broken links fail)" >&2
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== cargo test (debug build: the real-time no-allocation guard is active)" >&2
cargo test --workspace
echo "== loom model checks" >&2
bash scripts/loom.sh
echo "== all tests passed in $(( $(date +%s) - start )) s" >&2
