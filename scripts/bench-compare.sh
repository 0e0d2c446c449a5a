#!/usr/bin/env bash
# Compares the activation benchmark of this checkout with another revision,
# in one run: builds both (release), then runs the two benches alternately
# RUNS times (base, current, base, current, ...) so machine drift hits both
# alike, and prints per measure the ratio current/base of the medians with
# its spread over the runs.
#
#   scripts/bench-compare.sh BASE_REV [RUNS]      (default RUNS=3)
#   scripts/bench-compare.sh --report-only         (table of the last runs again)
#
# The base revision is checked out in target/bench-compare/base (a detached
# git worktree with its own target directory); raw outputs are kept in
# target/bench-compare/runs/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench-compare
report_only=0
if [ "${1:-}" = --report-only ]; then
    report_only=1
    runs=$(ls "$out"/runs/base-*.txt 2>/dev/null | wc -l)
    [ "$runs" -gt 0 ] || { echo "bench-compare: no runs in $out/runs" >&2; exit 1; }
    base_sha=$(cat "$out/runs/base-rev" 2>/dev/null || echo unknown)
else
    base_rev=${1:?usage: scripts/bench-compare.sh BASE_REV [RUNS] | --report-only}
    runs=${2:-3}
fi
if [ "$report_only" = 0 ]; then
source scripts/setup.sh
mkdir -p "$out/runs"
rm -f "$out"/runs/*.txt
base_dir=$out/base
base_sha=$(git rev-parse --verify "$base_rev^{commit}")
if [ -d "$base_dir" ] && [ "$(git -C "$base_dir" rev-parse HEAD 2>/dev/null)" != "$base_sha" ]; then
    git worktree remove --force "$base_dir"
fi
[ -d "$base_dir" ] || git worktree add --detach -q "$base_dir" "$base_sha"

# Prints the path of the activation bench executable of the tree in $1.
build_bench() {
    (cd "$1" && cargo build --release --bins --quiet >&2 &&
        cargo bench -p resound --bench activation --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "activation" and m.get("executable"):
        print(m["executable"])')
}
echo "== building base ${base_sha:0:10} and current (release)" >&2
base_bench=$(build_bench "$base_dir")
cur_bench=$(build_bench .)
[ -x "$base_bench" ] && [ -x "$cur_bench" ] || { echo "bench-compare: a bench failed to build" >&2; exit 1; }

for i in $(seq 1 "$runs"); do
    echo "== run $i/$runs: base" >&2
    "$base_bench" > "$out/runs/base-$i.txt"
    echo "== run $i/$runs: current" >&2
    "$cur_bench" > "$out/runs/current-$i.txt"
done
echo "$base_sha" > "$out/runs/base-rev"
fi

python3 - "$out/runs" "$runs" "${base_sha:0:10}" "$(git rev-parse --short=10 HEAD)" <<'EOF'
import re, statistics, sys
folder, runs, base, cur = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
row = re.compile(r'^\s*(\S.*?)\s{2,}([\d.]+) us\s*([\d.]+) us\s*([\d.]+) us\s+\d+$')
def medians(path):
    found = {}
    for line in open(path):
        m = row.match(line.rstrip('\n'))
        if m:
            found[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)))
    return found
pairs = [(medians(f"{folder}/base-{i}.txt"), medians(f"{folder}/current-{i}.txt")) for i in range(1, runs + 1)]
labels = [l for l in pairs[0][0] if all(l in b and l in c for b, c in pairs)]
print(f"activation bench, current {cur} / base {base}, {runs} alternated runs")
print(f"{'measure':<44}{'base p50':>10}{'cur p50':>10}{'ratio p50':>11}{'spread':>15}{'ratio p99':>11}")
for l in labels:
    r50 = [c[l][0] / b[l][0] for b, c in pairs if b[l][0] > 0]
    r99 = [c[l][1] / b[l][1] for b, c in pairs if b[l][1] > 0]
    if not r50:
        continue
    b50 = statistics.median(b[l][0] for b, _ in pairs)
    c50 = statistics.median(c[l][0] for _, c in pairs)
    print(f"{l:<44}{b50:>8.1f}us{c50:>8.1f}us{statistics.median(r50):>10.2f}x"
          f"{f'{min(r50):.2f}..{max(r50):.2f}':>15}{statistics.median(r99) if r99 else float('nan'):>10.2f}x")
print("ratio < 1: current is faster; spread: min..max of the per-run ratios")
EOF
