#!/usr/bin/env python3
"""Reads a `resound bench jackd --keep-raw` run recorded under perf and says
how often the clients' SCHED_DEADLINE reservations throttled them, and how
many lost blocks had a throttle of the client that held the block or of the
one that did not pass it on.

A throttle is a start of the kernel's replenishment timer (`dl_task_timer`)
by the client's own process thread (`resound-rt:cN`): its budget ran out
while it ran. (A timer started by another thread, on a wake-up, is a held
wake-up of a thread whose deadline is shorter than its period, or the
per-CPU fair server; neither is counted.)

Record and read (see docs/architecture.md, "Side by side with jackd2"):

    perf record -k CLOCK_MONOTONIC -e timer:hrtimer_start -a -o OUT/perf.data -- \\
        target/release/resound bench jackd --runs 2 --seconds 10 --load 7.5 \\
        --servers deadline --keep-raw --out OUT/bench
    perf script -i OUT/perf.data -F comm,tid,time,trace | grep dl_task_timer > OUT/dl_timer.txt
    scripts/perf-throttles.py OUT

`-k CLOCK_MONOTONIC` puts perf's times on the clock the clients' records
use. A lost block is a first client's stamp that never reached the last
client; it was held by the last client that had it and dropped by the next.
"""
import bisect
import collections
import csv
import glob
import os
import re
import sys

ARM = re.compile(r"\s*resound-rt:(c\d+)\s+\d+\s+([\d.]+):.*function=dl_task_timer")


def load_arms(path):
    """Client name -> sorted arm times (ns, CLOCK_MONOTONIC)."""
    arms = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            m = ARM.match(line)
            if m:
                arms[m.group(1)].append(float(m.group(2)) * 1e9)
    for v in arms.values():
        v.sort()
    return arms


def load_run(run_dir):
    """Client name -> rows of its cK.csv, in chain order c1..cN."""
    clients = {}
    for path in glob.glob(os.path.join(run_dir, "c*.csv")):
        with open(path) as f:
            rows = list(csv.DictReader(l for l in f if not l.startswith("#")))
        clients[os.path.basename(path)[:-4]] = rows
    return [clients[f"c{i}"] for i in range(1, len(clients) + 1)]


def any_between(times, lo, hi):
    i = bisect.bisect_left(times, lo)
    return i < len(times) and times[i] <= hi


def main(out):
    period = 128e9 / 48000
    arms = load_arms(os.path.join(out, "dl_timer.txt"))
    runs = sorted(glob.glob(os.path.join(out, "bench/raw/*/run*/resound-*")))
    if not runs:
        sys.exit(f"no resound runs under {out}/bench/raw (was the bench run with --keep-raw?)")
    total = collections.Counter()
    for run in runs:
        chain = load_run(run)
        names = [f"c{i}" for i in range(1, len(chain) + 1)]
        stamps = [{int(r["stamp_ns"]) for r in rows if r["stamp_ns"] != "0"} for rows in chain]
        firsts = [int(r["stamp_ns"]) for r in chain[0]][20:-20]
        if not firsts:
            continue
        lo, hi = firsts[0], firsts[-1]
        own = {n: [t for t in arms[n] if lo <= t <= hi] for n in names}

        def hop_throttled(s, k):
            """A throttle of client k-1 or k from a period before the
            block's stamp to three periods after it."""
            return any(any_between(own[names[j]], s - period, s + 3 * period) for j in (k - 1, k))

        for s in firsts:
            total["cycles"] += 1
            # Chance: the same window at a random hop of a random cycle.
            total["hops"] += len(names) - 1
            total["hops throttled"] += sum(hop_throttled(s, k) for k in range(1, len(names)))
            if s in stamps[-1]:
                continue
            k = next(i for i in range(1, len(names)) if s not in stamps[i])
            total["lost"] += 1
            total["lost, hop throttled"] += hop_throttled(s, k)
        total["throttles"] += sum(len(v) for v in own.values())
        total["client cycles"] += len(firsts) * len(names)
    t = total
    print(f"runs: {len(runs)}, cycles: {t['cycles']}")
    print(f"client throttles: {t['throttles']} "
          f"({100 * t['throttles'] / max(1, t['client cycles']):.2f} % of client cycles)")
    print(f"lost blocks: {t['lost']}, with a throttle of the holder or the next client "
          f"near the block: {t['lost, hop throttled']} "
          f"({100 * t['lost, hop throttled'] / max(1, t['lost']):.0f} %)")
    print(f"chance (the same window at any hop of any cycle): "
          f"{100 * t['hops throttled'] / max(1, t['hops']):.1f} %")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: perf-throttles.py OUT (with OUT/dl_timer.txt and OUT/bench/raw)")
    main(sys.argv[1])
