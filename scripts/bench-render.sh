#!/usr/bin/env bash
# Offline render speed of `resoundd -d file`: a chain of CLIENTS clients
# (resound-tool pass, then resound-tool load --busy 5) renders a SECONDS-long
# input, freewheeling; prints a table of wall time and speed (x real time).
#
#   scripts/bench-render.sh [SECONDS] [CLIENTS] [PERIOD]   (default 60 10 256)
#
# The input (a sine) is itself rendered offline first. Everything runs in a
# private RESOUND_DIR under a unique server name; nothing else is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
n=${2:-10}
period=${3:-256}
cargo build --release --quiet --bins
bin=$PWD/target/release
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export RESOUND_DIR=$dir
tag=bench$$

# Starts resoundd -d file with ARGS, then the clients from the rest of the
# arguments after "--" one by one, and waits for the server to exit.
# Prints the seconds from the last client's start to the server's exit.
render() {
    local name=$1
    shift
    local args=()
    while [ "$1" != "--" ]; do args+=("$1"); shift; done
    shift
    "$bin/resoundd" -n "$name" -d file -p "$period" --start-when-connected "${args[@]}" 2>"$dir/$name.log" &
    local srv=$!
    for _ in $(seq 100); do [ -S "$dir/$name.sock" ] && break; sleep 0.05; done
    local t0
    local k=0
    for client in "$@"; do
        # shellcheck disable=SC2086
        "$bin/resound-tool" -s "$name" $client >/dev/null 2>&1 &
        k=$((k + 1))
        # Each client connects itself; give it time to do so before the next.
        sleep 0.3
    done
    t0=$(date +%s.%N)
    wait "$srv"
    local t1
    t1=$(date +%s.%N)
    wait
    echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}

render "$tag-src" --seconds "$secs" -P 1 --output "$dir/in.wav" -- \
    "-n sine -c @:out=system:playback_1 sine" >/dev/null

chain() {
    local what=$1
    local clients=()
    for k in $(seq 0 $((n - 1))); do
        local from="c$((k - 1)):out"
        [ "$k" -eq 0 ] && from=system:capture_1
        local c="-n c$k -c $from=@:in"
        [ "$k" -eq $((n - 1)) ] && c="$c -c @:out=system:playback_1"
        clients+=("$c $what")
    done
    printf '%s\n' "${clients[@]}"
}

printf '%-24s %8s %10s %10s\n' "graph" "input s" "wall s" "x realtime"
for what in "pass" "load --busy 5"; do
    mapfile -t clients < <(chain "$what")
    wall=$(render "$tag-${what%% *}" --input "$dir/in.wav" --output "$dir/out.wav" -- "${clients[@]}")
    # The wall time includes the last client's 0.3 s to connect.
    printf '%-24s %8s %10s %10.1f\n' "$n x $what" "$secs" "$wall" \
        "$(echo "$secs $wall" | awk '{print $1 / $2}')"
done
