#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer) of everything a client can
# send: wire frames, graph requests, MIDI buffers, metadata, transport
# mailboxes, the profile ring (fuzz/, see docs/architecture.md "Fuzzing").
#
#   scripts/fuzz.sh --short          every target for 15 s (the test command runs this)
#   scripts/fuzz.sh --long [SECONDS] every target for SECONDS each (default 3600)
#   scripts/fuzz.sh --cmin           minimise the committed corpora
#
# New inputs that reach new code are kept in fuzz/corpus/<target>/ (commit
# them after a long run, minimised with --cmin). A crash fails the run and
# leaves its input in fuzz/artifacts/<target>/: fix the bug, keep the input
# there as a regression (cargo test replays it, crates/resound/tests/fuzz_corpus.rs).
# Installs the nightly toolchain and cargo-fuzz when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:---short}
# The short run (in the test command) builds the targets unoptimised and
# without AddressSanitizer: about 2 minutes from cold instead of 7 to 17,
# still with debug assertions and overflow checks (what found the bugs so
# far). The long run uses cargo-fuzz's defaults (optimised, with ASan).
build_flags=()
case "$mode" in
    --short) seconds=15; build_flags=(--dev --sanitizer none) ;;
    --long) seconds=${2:-3600} ;;
    --cmin) seconds=0 ;;
    *) echo "usage: scripts/fuzz.sh --short | --long [SECONDS] | --cmin" >&2; exit 2 ;;
esac
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz: SECONDS must be a whole number, not $seconds" >&2; exit 2; }

if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
# The fuzzer needs a nightly compiler (sanitizer coverage); the workspace stays on stable.
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

targets=(wire_frame graph_requests midi_buffer metadata transport_mailbox profile_reader)
cd fuzz
# The committed corpora start from seeds made by the project's own encoders
# (fuzz/src/seeds.rs; `cargo run --no-default-features --example seeds` in
# fuzz/ writes them again).
echo "== building the fuzz targets" >&2
cargo +nightly fuzz build "${build_flags[@]}"

if [ "$mode" = --cmin ]; then
    for t in "${targets[@]}"; do
        cargo +nightly fuzz cmin "${build_flags[@]}" "$t" "corpus/$t"
    done
    exit 0
fi

# New corpus entries of a short run go to a scratch directory (the committed
# corpus is only read), so the test command leaves the tree clean.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
for t in "${targets[@]}"; do
    echo "== fuzzing $t for $seconds s" >&2
    dirs=("corpus/$t")
    if [ "$mode" = --short ]; then
        mkdir -p "$work/$t"
        dirs=("$work/$t" "corpus/$t")
    fi
    # -rss_limit_mb: a target whose memory grows without bound fails too.
    if cargo +nightly fuzz run "${build_flags[@]}" "$t" "${dirs[@]}" -- \
        -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 \
        >"$work/$t.log" 2>&1; then
        grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units)' "$work/$t.log" >&2 || true
    else
        # The report without libFuzzer's dump of the input's bytes.
        grep -E -A4 'panicked|ERROR: (AddressSanitizer|libFuzzer)|deadly signal|SUMMARY|Test unit written|Reproduce with' \
            "$work/$t.log" | grep -v '^\s*\[' | head -n 40 >&2
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "== fuzz: crashes in ${failed[*]} (inputs under fuzz/artifacts/)" >&2
    exit 1
fi
echo "== fuzz: every target ran ${seconds} s without a crash" >&2
