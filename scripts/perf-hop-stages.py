#!/usr/bin/env python3
"""Where a hop of a JACK client chain spends its time, from a perf trace.

Reads `perf script` text of a system-wide recording of a `resound bench
jackd` run (one server) and prints, for the last two seconds but one:
the stages of each hop between two chain threads (futex wake entry ->
sched_waking -> sched_wakeup -> switched in -> futex return), how long a
chain thread takes to block (wait entry -> switched out; split by whether
it armed SCHED_DEADLINE's inactive timer), and hrtimers, timer interrupts
and IPIs per cycle. Chain threads are those whose name starts with COMM
(default: the bench's `loadclient` process, or resound's `resound-rt:`).

  EV=sched:sched_waking,sched:sched_wakeup,sched:sched_switch,\
  syscalls:sys_enter_futex,syscalls:sys_exit_futex,\
  syscalls:sys_enter_futex_waitv,syscalls:sys_exit_futex_waitv,\
  timer:hrtimer_start,timer:hrtimer_expire_entry,irq_vectors:local_timer_entry,\
  irq_vectors:reschedule_entry,irq_vectors:call_function_single_entry,\
  ipi:ipi_send_cpu,ipi:ipi_send_cpumask
  perf record -a -o hop.data -e $EV -- target/release/resound bench jackd \
      --servers deadline --runs 1 --seconds 3 --warmup 1 --load 1 \
      --cpu-dma-latency 0 --server-arg=--early-wake=0
  perf script -i hop.data -F comm,tid,cpu,time,event,trace | scripts/perf-hop-stages.py

The cycle count assumes 48 kHz / 128 frames (375 cycles a second).
"""
import re
import sys
from collections import defaultdict, Counter
from statistics import median

COMM = sys.argv[1] if len(sys.argv) > 1 else "loadclient"
line_re = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+([\w:]+):\s*(.*)$")

events = []
for line in sys.stdin:
    m = line_re.match(line)
    if not m:
        continue
    comm, tid, cpu, t, ev, rest = m.groups()
    events.append((float(t) * 1e6, int(tid), comm, int(cpu), ev, rest))
events.sort(key=lambda e: e[0])
if not events:
    sys.exit("no events")

def kv(rest):
    return dict(re.findall(r"(\w+)=(\S+)", rest))

# Threads of the chain: those named COMM in any sched_switch.
chain = set()
for t, tid, comm, cpu, ev, rest in events:
    if ev == "sched:sched_switch":
        f = kv(rest)
        if f.get("next_comm", "").startswith(COMM):
            chain.add(int(f["next_pid"]))
        if f.get("prev_comm", "").startswith(COMM):
            chain.add(int(f["prev_pid"]))
print(f"chain threads: {len(chain)}")

# Keep the last 2 s (steady state).
t_end = events[-1][0]
lo = t_end - 2.5e6
hi = t_end - 0.5e6

last_futex_enter = {}
armed = {}
blocks_armed = []
blocks_plain = []
stages = defaultdict(list)
pending = {}  # wakee -> dict
block_cost = []
block_start = {}
timers = Counter()
expires = Counter()
ipis = Counter()
same_cpu = 0
hops = 0
switch_in_cpu = {}
for t, tid, comm, cpu, ev, rest in events:
    in_win = lo <= t <= hi
    if ev.startswith("syscalls:sys_enter_futex") and tid in chain:
        last_futex_enter[tid] = t
        if ev.endswith("waitv") or "op: 0x" in rest:
            block_start[tid] = t
    elif ev == "sched:sched_waking":
        f = kv(rest)
        w = int(f["pid"])
        if tid in chain and w in chain and in_win:
            pending[w] = {"waker": tid, "wcpu": cpu, "sig": last_futex_enter.get(tid, t),
                          "waking": t}
    elif ev == "sched:sched_wakeup":
        w = int(kv(rest)["pid"])
        if w in pending and "wakeup" not in pending[w]:
            pending[w]["wakeup"] = t
            pending[w]["tcpu"] = int(kv(rest).get("target_cpu", -1))
    elif ev == "sched:sched_switch":
        f = kv(rest)
        nxt = int(f["next_pid"])
        prv = int(f["prev_pid"])
        if prv in chain and prv in block_start and in_win and f.get("prev_state") in ("S", "D"):
            took = t - block_start.pop(prv)
            block_cost.append(took)
            (blocks_armed if armed.pop(prv, False) else blocks_plain).append(took)
        if nxt in pending and "in" not in pending[nxt]:
            pending[nxt]["in"] = t
            pending[nxt]["incpu"] = cpu
    elif ev.startswith("syscalls:sys_exit_futex") and tid in pending:
        p = pending.pop(tid)
        if "in" not in p or "wakeup" not in p:
            continue
        hops += 1
        if p["incpu"] == p["wcpu"]:
            same_cpu += 1
        stages["signal enter -> waking"].append(p["waking"] - p["sig"])
        stages["waking -> wakeup (enqueued)"].append(p["wakeup"] - p["waking"])
        stages["wakeup -> switched in"].append(p["in"] - p["wakeup"])
        stages["switched in -> futex return"].append(t - p["in"])
        stages["signal enter -> futex return"].append(t - p["sig"])
    elif in_win and ev == "timer:hrtimer_start":
        fn = kv(rest).get("function", "?")
        if tid in block_start and fn == "inactive_task_timer":
            armed[tid] = True
        timers[(fn, "chain" if tid in chain else comm)] += 1
    elif in_win and ev == "timer:hrtimer_expire_entry":
        expires[kv(rest).get("function", "?")] += 1
    elif in_win and ev.startswith("ipi:"):
        ipis[(comm if tid not in chain else "chain", rest.split("callsite=")[-1].split()[0] if "callsite=" in rest else "?")] += 1
    elif in_win and ev.startswith("irq_vectors:"):
        ipis[("irq", ev.split(":")[1])] += 1

cycles = 375 * (hi - lo) / 1e6
print(f"hops: {hops} ({same_cpu} woken on the waker's CPU)")
for k, v in stages.items():
    v.sort()
    print(f"  {k:32s} p50 {median(v):7.1f} us  p90 {v[int(len(v)*0.9)]:7.1f}")
if block_cost:
    block_cost.sort()
    print(f"  {'wait enter -> switched out':32s} p50 {median(block_cost):7.1f} us  p90 {block_cost[int(len(block_cost)*0.9)]:7.1f}")
for name, v in (("armed the inactive timer", blocks_armed), ("did not", blocks_plain)):
    if v:
        print(f"  blocks that {name}: {len(v)}, p50 {median(v):.1f} us")
print(f"per cycle ({cycles:.0f} cycles):")
for (fn, who), n in timers.most_common(8):
    print(f"  hrtimer_start {fn} by {who}: {n / cycles:.2f}")
for fn, n in expires.most_common(6):
    print(f"  hrtimer_expire {fn}: {n / cycles:.2f}")
for k, n in ipis.most_common(10):
    print(f"  {k}: {n / cycles:.2f}")
