#!/usr/bin/env bash
# The main job: builds resound, starts resoundd on the dummy driver, runs a demo
# graph of client processes and prints what happened. Extra arguments go to
# `resound demo` (try --help, --seconds 10, --sync, -p 128).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
echo "== building (release)" >&2
cargo build --release --bins --quiet
exec target/release/resound demo "$@"
