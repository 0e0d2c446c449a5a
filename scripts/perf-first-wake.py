#!/usr/bin/env python3
"""How the first client of a resound chain is woken each cycle, from a perf trace.

Reads `perf script` text of a system-wide recording of a `resound bench
jackd` run (one resound server) and prints, per cycle of the driver:

* what the driver's release (its FUTEX_WAKE on its done word) found: nobody
  asleep (the first client was awake already: its own timer or its spin),
  or the first client asleep on the driver's CPU or on the other one, and
  how long the call took at the median;
* why the first client's waits ended: the release (or another word of
  its wait), its own timer (ETIMEDOUT), or an interruption.

A driver that finds the first client asleep pays for its wake-up (a
cross-CPU wake-up on a virtual machine costs an interrupt to the other
virtual CPU); one that finds it awake makes a call that wakes nobody or
no call at all (see docs/architecture.md, "The first client's own timer").

  EV=sched:sched_switch,syscalls:sys_enter_futex,syscalls:sys_exit_futex,\
  syscalls:sys_enter_futex_waitv,syscalls:sys_exit_futex_waitv
  perf record -a -o first.data -e $EV -- target/release/resound bench jackd \
      --servers deadline --runs 1 --seconds 3 --warmup 1 --load 1
  perf script -i first.data -F comm,tid,cpu,time,event,trace | scripts/perf-first-wake.py

The first client's thread is the one named FIRST (default `resound-rt:c1`,
the bench's first load client); the driver's is the busiest thread named
`resound-driver`.
"""
import re
import sys
from collections import Counter
from statistics import median

FIRST = sys.argv[1] if len(sys.argv) > 1 else "resound-rt:c1"
LINE = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+([\w:]+):\s*(.*)$")
FUTEX_WAKE = "op: 0x00000001,"
ETIMEDOUT = "0xffffffffffffff92"
EINTR_OR_EAGAIN = ("0xfffffffffffffffc", "0xfffffffffffffff5")


def parse(lines):
    """(time us, tid, comm, cpu, event, rest) for each event line."""
    out = []
    for line in lines:
        m = LINE.match(line)
        if m:
            comm, tid, cpu, t, ev, rest = m.groups()
            out.append((float(t) * 1e6, int(tid), comm.strip(), int(cpu), ev, rest))
    return out


def busiest(events, comm):
    """The thread id named `comm` with the most events, or None."""
    counts = Counter(e[1] for e in events if e[2] == comm)
    return counts.most_common(1)[0][0] if counts else None


def main():
    events = parse(sys.stdin)
    driver = busiest(events, "resound-driver")
    first = busiest(events, FIRST)
    if driver is None or first is None:
        sys.exit(f"no resound-driver or {FIRST} thread in the trace")
    first_asleep = False
    first_cpu = None
    cycles = 0
    releases = Counter()
    release_us = {}
    wait_ends = Counter()
    call = None
    for t, tid, _comm, cpu, ev, rest in events:
        if tid == first:
            first_cpu = cpu
            if ev == "syscalls:sys_enter_futex_waitv":
                first_asleep = True
            elif ev == "syscalls:sys_exit_futex_waitv":
                first_asleep = False
                ret = rest.strip()
                if ret == ETIMEDOUT:
                    wait_ends["its own timer"] += 1
                elif ret in EINTR_OR_EAGAIN:
                    wait_ends["interrupted, or the word had moved"] += 1
                else:
                    wait_ends["the release (or another of its words)"] += 1
        if tid != driver:
            continue
        if ev == "sched:sched_switch" and f"prev_pid={driver} " in rest:
            cycles += 1
        elif ev == "syscalls:sys_enter_futex" and FUTEX_WAKE in rest:
            if not first_asleep:
                found = "nobody asleep"
            elif first_cpu == cpu:
                found = "the first client asleep on the driver's CPU"
            else:
                found = "the first client asleep on the other CPU"
            call = (t, found)
        elif ev == "syscalls:sys_exit_futex" and call is not None:
            releases[call[1]] += 1
            release_us.setdefault(call[1], []).append(t - call[0])
            call = None
    report(cycles, releases, release_us, wait_ends)


def report(cycles, releases, release_us, wait_ends):
    print(f"driver cycles (its sleeps): {cycles}")
    print("driver's FUTEX_WAKE calls, by what they found:")
    for found, n in releases.most_common():
        print(f"  {n:6d} ({n / max(cycles, 1):5.1%} of cycles)  {found}, "
              f"call {median(release_us[found]):.1f} us at the median")
    calls = sum(releases.values())
    print(f"  {max(cycles - calls, 0):6d} cycles without one (no thread had said it "
          "sleeps on the driver's word)")
    print("the first client's waits ended by:")
    for why, n in wait_ends.most_common():
        print(f"  {n:6d}  {why}")


if __name__ == "__main__":
    main()
