//! One run's numbers from the clients' records: the cycles whose start lies
//! in the measured window, joined across clients by their cycle start.
//! Runs on the bench's main thread.

use super::chain::RunData;
use super::records::Rec;
use serde_json::{json, Value};
use std::collections::HashMap;

/// One run's numbers (times in µs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMetrics {
    /// Cycles the first client ran in the window.
    pub cycles: u64,
    /// End of chain (last client's return − the server's cycle start as the first client saw it), median.
    pub eoc_p50: f64,
    /// End of chain, 99th percentile.
    pub eoc_p99: f64,
    /// Cycle start → first client's return from `jack_cycle_wait`, median (negative: the server's reported start lies after the wake-up).
    pub first_wake_p50: f64,
    /// Hop (next client's return from `jack_cycle_wait` − previous client's
    /// body end), median over every hop of every cycle.
    pub hop_p50: f64,
    /// Hop, 99th percentile.
    pub hop_p99: f64,
    /// Thread CPU inside `jack_cycle_wait` (libjack's wake-side work), median over clients and cycles.
    pub wake_cpu_p50: f64,
    /// Time inside `jack_cycle_signal` (waking the downstream), median.
    pub signal_p50: f64,
    /// Data stamp: last client's return − first client's wake, median.
    pub stamp_p50: f64,
    /// Data stamp, 99th percentile.
    pub stamp_p99: f64,
    /// Blocks (first client's stamps) that never reached the last client.
    pub lost: u64,
    /// Of those, blocks whose last holder began its next cycle less than
    /// [`REWRITE_NS`] after releasing the block: it rewrote its outputs
    /// before any wake-up of the next client could land, which no
    /// activation rule can save (the rest were dropped or held up).
    pub lost_rewritten: u64,
    /// The server's xruns in the window, as the last client's xrun callback counted them.
    pub xruns: u64,
    /// Client cycles (any client's, in the window's cycles) that took
    /// longer than a period from the wake-up to the return of the signal
    /// call (`jack_cycle_signal`), for work that takes a share of it: the
    /// thread was held meanwhile (a stall of its CPU, a
    /// preemption, or under a reservation the throttle that collects what
    /// a stall charged to it). Alike on every server, from the clients'
    /// clocks; it tells the losses that come from held clients from those
    /// of an activation rule.
    pub held_runs: u64,
    /// Cycles whose last client returned after the driver's next traced
    /// wake-up: late by the rule every server checks (is the graph done
    /// when the next cycle begins), measured alike on every server from
    /// the clients' clocks and the kernel tracer. The servers' own counts
    /// differ: jackd2 stops reporting a graph that stays unfinished for
    /// more than two periods, resound reports each late cycle.
    pub late_chains: u64,
    /// Periods in the window in which the first client ran no block:
    /// cycles the server did not start (a driver that woke more than a
    /// period late skips ahead; a rule that held the next cycle back while
    /// the graph is late would too), or whose block the first client
    /// missed. Between the first and the last traced driver wake-up in the
    /// window: their distance in periods (rounded) less the first client's
    /// wake-ups between them. Blocks never made are no lost blocks; this
    /// counts them, alike on every server.
    pub blockless: u64,
    /// Driver thread CPU per cycle (schedstat difference ÷ the first
    /// client's cycles), over the untraced window before the measured one.
    pub driver_cpu: f64,
    /// Times the driver thread was put on a CPU per cycle (schedstat):
    /// its wake-ups, and returns after preemptions. Untraced window.
    pub driver_runs: f64,
    /// Driver thread CPU per cycle over the measured window, with the
    /// kernel tracer attached (what its events on the driver's sleeps add
    /// shows against [`Self::driver_cpu`]).
    pub driver_cpu_traced: f64,
    /// Traced driver wake-up → first client's return from
    /// `jack_cycle_wait`, median: measured alike on both servers (the
    /// kernel tracer's return from the driver's sleep, the last one before
    /// the first client's wake-up). NaN without a trace.
    pub drv_wake_p50: f64,
    /// Traced driver wake-up → last client's return, median.
    pub drv_eoc_p50: f64,
    /// Traced driver wake-up → last client's return, 99th percentile.
    pub drv_eoc_p99: f64,
    /// The host's steal time over the measured window, all CPUs together
    /// (ms; NaN when `/proc/stat` was unreadable): how long the hypervisor
    /// held this machine's virtual CPUs while the run was measured.
    pub steal_ms: f64,
    /// The host's steal over both windows (the untraced one, where the
    /// driver's CPU time is read, and the measured one), all CPUs
    /// together, per second of their length (ms/s; NaN when `/proc/stat`
    /// was unreadable): how hard the host leaned on this run, the figure
    /// [`crate::vsjackd::report`] sorts the quiet repetitions by.
    pub steal_ms_per_s: f64,
}

/// A first client's wake-up more than this after the last traced driver
/// wake-up is not joined to it (the trace missed that cycle's wake-up).
const PERIOD_BOUND_NS: u64 = 20_000_000;

/// A lost block's last holder that began its next cycle less than this
/// after releasing the block rewrote it before the next client could wake
/// ([`RunMetrics::lost_rewritten`]): well below a futex wake-up of a
/// thread on the other CPU on these VMs (about 30 µs; the lost blocks of
/// this kind measured 1–7 µs, the others hundreds).
pub const REWRITE_NS: u64 = 20_000;

/// Whether `held`, the last record of a block that the next client in the
/// chain never got, was rewritten at once: its client's next run (in
/// `recs`, that client's records in the order it ran them) began less than
/// [`REWRITE_NS`] after `held`'s release ([`RunMetrics::lost_rewritten`]).
fn rewritten_at_once(held: &Rec, recs: &[Rec]) -> bool {
    let i = recs.partition_point(|r| r.wake <= held.ret);
    recs.get(i)
        .is_some_and(|next| next.wake.saturating_sub(held.sig) < REWRITE_NS)
}

/// Nearest-rank percentile `p` (0–100) of `v` (sorted here), in µs from ns.
fn pct(v: &mut [i64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_unstable();
    let i = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1000.0
}

/// `b − a` in ns, signed.
fn diff(b: u64, a: u64) -> i64 {
    b as i64 - a as i64
}

/// The numbers of one run. Cycles are those whose first client woke in the
/// window; the clients' records of one cycle are joined by the data stamp
/// (the first client's wake-up time, unique per cycle, copied on by each
/// client), not by the servers' cycle start: jackd2 reports a cycle start
/// its delay-locked loop predicts, which a loaded machine moves by
/// milliseconds.
pub fn compute(d: &RunData) -> RunMetrics {
    let (t0, t1) = d.window_ns;
    let Some(first) = d.clients.first() else {
        return RunMetrics::default();
    };
    let last = d.clients.last().unwrap_or(first);
    let in_window = |r: &&Rec| woke_in(r, (t0, t1));
    let firsts: Vec<&Rec> = first.recs.iter().filter(in_window).collect();
    let maps: Vec<HashMap<u64, &Rec>> = d.clients.iter().map(|c| c.by_stamp()).collect();
    let (mut eoc, mut first_wake, mut hops) = (Vec::new(), Vec::new(), Vec::new());
    let (mut wake_cpu, mut signal, mut stamp) = (Vec::new(), Vec::new(), Vec::new());
    let (mut drv_wake, mut drv_eoc) = (Vec::new(), Vec::new());
    let drv: Vec<u64> = d.driver_wakes.iter().map(|c| c.wake_ns).collect();
    let (mut lost, mut lost_rewritten, mut late_chains, mut held_runs) = (0, 0, 0, 0);
    for r1 in &firsts {
        first_wake.push(diff(r1.wake, r1.start));
        // The driver's wake-up that began this cycle: the last one before
        // the first client woke, if within a period of it.
        let i = drv.partition_point(|&w| w <= r1.wake);
        let dw = i
            .checked_sub(1)
            .map(|i| drv[i])
            .filter(|&w| r1.wake - w < PERIOD_BOUND_NS);
        if let Some(w) = dw {
            drv_wake.push(diff(r1.wake, w));
        }
        let next_wake = dw.and(drv.get(i).copied());
        let chain: Vec<Option<&Rec>> = maps.iter().map(|m| m.get(&r1.wake).copied()).collect();
        for (a, b) in chain.iter().zip(chain.iter().skip(1)) {
            if let (Some(a), Some(b)) = (a, b) {
                hops.push(diff(b.wake, a.ret));
            }
        }
        for r in chain.iter().flatten() {
            wake_cpu.push(r.wait_cpu as i64);
            signal.push(diff(r.sig, r.ret));
            if r.sig.saturating_sub(r.wake) > d.period_ns {
                held_runs += 1;
            }
        }
        match chain.last().copied().flatten() {
            Some(rl) => {
                eoc.push(diff(rl.ret, r1.start));
                stamp.push(diff(rl.ret, r1.wake));
                if let Some(w) = dw {
                    drv_eoc.push(diff(rl.ret, w));
                }
                if next_wake.is_some_and(|n| rl.ret > n) {
                    late_chains += 1;
                }
            }
            None => {
                lost += 1;
                let k = chain.iter().position(Option::is_none).unwrap_or(0);
                let held = k.checked_sub(1).and_then(|h| chain[h].map(|r| (h, r)));
                if held.is_some_and(|(h, r)| rewritten_at_once(r, &d.clients[h].recs)) {
                    lost_rewritten += 1;
                }
            }
        }
    }
    let cycles = firsts.len() as u64;
    let untraced_cycles = first
        .recs
        .iter()
        .filter(|r| woke_in(r, d.untraced.window_ns))
        .count() as u64;
    let lasts: Vec<&Rec> = last.recs.iter().filter(in_window).collect();
    let xruns = match (lasts.first(), lasts.last()) {
        (Some(a), Some(b)) => b.xruns.saturating_sub(a.xruns),
        _ => 0,
    };
    RunMetrics {
        cycles,
        eoc_p50: pct(&mut eoc, 50.0),
        eoc_p99: pct(&mut eoc, 99.0),
        first_wake_p50: pct(&mut first_wake, 50.0),
        hop_p50: pct(&mut hops, 50.0),
        hop_p99: pct(&mut hops, 99.0),
        wake_cpu_p50: pct(&mut wake_cpu, 50.0),
        signal_p50: pct(&mut signal, 50.0),
        stamp_p50: pct(&mut stamp, 50.0),
        stamp_p99: pct(&mut stamp, 99.0),
        lost,
        lost_rewritten,
        xruns,
        late_chains,
        held_runs,
        blockless: blockless_periods(&drv, &firsts, (t0, t1), d.period_ns),
        driver_cpu: per_cycle(d.untraced.cpu_ns, untraced_cycles) / 1000.0,
        driver_runs: per_cycle(d.untraced.runs, untraced_cycles),
        driver_cpu_traced: per_cycle(d.traced.cpu_ns, cycles) / 1000.0,
        drv_wake_p50: pct(&mut drv_wake, 50.0),
        drv_eoc_p50: pct(&mut drv_eoc, 50.0),
        drv_eoc_p99: pct(&mut drv_eoc, 99.0),
        steal_ms: d.traced.steal_ns.map_or(f64::NAN, |ns| ns as f64 / 1e6),
        steal_ms_per_s: steal_rate(d),
    }
}

/// [`RunMetrics::steal_ms_per_s`]: the steal of both windows over their
/// summed length.
fn steal_rate(d: &RunData) -> f64 {
    let span = |(a, b): (u64, u64)| b.saturating_sub(a);
    let ns = span(d.untraced.window_ns) + span(d.traced.window_ns);
    match (d.traced.steal_ns, d.untraced.steal_ns) {
        (Some(m), Some(u)) if ns > 0 => (m + u) as f64 / 1e6 / (ns as f64 / 1e9),
        _ => f64::NAN,
    }
}

/// [`RunMetrics::blockless`]: the periods of `period_ns` from the first to
/// the last traced driver wake-up `drv` (sorted) inside `window`, less the
/// first client's wake-ups `firsts` between them.
fn blockless_periods(drv: &[u64], firsts: &[&Rec], (t0, t1): (u64, u64), period_ns: u64) -> u64 {
    let lo = drv.partition_point(|&w| w < t0);
    let hi = drv.partition_point(|&w| w <= t1);
    let (Some(&a), Some(&b)) = (drv.get(lo), hi.checked_sub(1).and_then(|i| drv.get(i))) else {
        return 0;
    };
    if period_ns == 0 {
        return 0;
    }
    let periods = (b - a + period_ns / 2) / period_ns;
    let blocks = firsts.iter().filter(|r| r.wake >= a && r.wake < b).count() as u64;
    periods.saturating_sub(blocks)
}

/// Whether `r`'s client woke inside `window` (CLOCK_MONOTONIC ns, both ends in).
fn woke_in(r: &Rec, (t0, t1): (u64, u64)) -> bool {
    r.wake >= t0 && r.wake <= t1
}

/// `total` per cycle (NaN without cycles).
fn per_cycle(total: u64, cycles: u64) -> f64 {
    if cycles == 0 {
        f64::NAN
    } else {
        total as f64 / cycles as f64
    }
}

/// One metric of the table: its key, its label and how to read it from a run.
pub struct Metric {
    /// Column name in the CSV and key in the JSON.
    pub key: &'static str,
    /// Row label in the table.
    pub label: &'static str,
    /// Its value in a run.
    pub get: fn(&RunMetrics) -> f64,
    /// A count: the table shows its total over runs, without a ratio.
    pub count: bool,
}

/// A time metric (µs; the table shows the median over runs and a ratio).
const fn time(key: &'static str, label: &'static str, get: fn(&RunMetrics) -> f64) -> Metric {
    Metric {
        key,
        label,
        get,
        count: false,
    }
}

/// A count (the table shows the total over runs).
const fn count(key: &'static str, label: &'static str, get: fn(&RunMetrics) -> f64) -> Metric {
    Metric {
        key,
        label,
        get,
        count: true,
    }
}

/// Every metric, in table order.
pub const METRICS: &[Metric] = &[
    time(
        "drv_eoc_p50_us",
        "driver wake -> end of chain p50 (us)",
        |m| m.drv_eoc_p50,
    ),
    time(
        "drv_eoc_p99_us",
        "driver wake -> end of chain p99 (us)",
        |m| m.drv_eoc_p99,
    ),
    time("drv_wake_p50_us", "driver wake -> c1 wake p50 (us)", |m| {
        m.drv_wake_p50
    }),
    time("eoc_p50_us", "reported start -> end p50 (us)", |m| {
        m.eoc_p50
    }),
    time("eoc_p99_us", "reported start -> end p99 (us)", |m| {
        m.eoc_p99
    }),
    time(
        "first_wake_p50_us",
        "reported start -> c1 wake p50 (us)",
        |m| m.first_wake_p50,
    ),
    time("hop_p50_us", "hop return -> wake p50 (us)", |m| m.hop_p50),
    time("hop_p99_us", "hop return -> wake p99 (us)", |m| m.hop_p99),
    time("wake_cpu_p50_us", "libjack wake side CPU p50 (us)", |m| {
        m.wake_cpu_p50
    }),
    time("signal_p50_us", "libjack signal call p50 (us)", |m| {
        m.signal_p50
    }),
    time("stamp_p50_us", "data stamp c1 -> cN p50 (us)", |m| {
        m.stamp_p50
    }),
    time("stamp_p99_us", "data stamp c1 -> cN p99 (us)", |m| {
        m.stamp_p99
    }),
    count("lost_blocks", "lost blocks (total)", |m| m.lost as f64),
    count(
        "lost_rewritten",
        "  of which rewritten at once (total)",
        |m| m.lost_rewritten as f64,
    ),
    count("xruns", "xruns (server's count, total)", |m| m.xruns as f64),
    count(
        "late_chains",
        "chain done after next driver wake (total)",
        |m| m.late_chains as f64,
    ),
    count("held_runs", "client runs over a period (total)", |m| {
        m.held_runs as f64
    }),
    count("blockless", "periods without a block (total)", |m| {
        m.blockless as f64
    }),
    // What the last client hears: a period without a fresh block, lost on
    // the way or never made. jackd2 does not start a cycle while its graph
    // is late (its blocks are never made) where resound starts it and a
    // late client loses one, so the two rows above trade with each other
    // between the servers and their sum compares them alike.
    count("dropped", "  lost or never made (total)", |m| {
        m.dropped() as f64
    }),
    time("driver_cpu_us", "driver thread CPU/cycle (us)", |m| {
        m.driver_cpu
    }),
    time("driver_runs", "driver thread runs/cycle", |m| m.driver_runs),
    time(
        "driver_cpu_traced_us",
        "  CPU/cycle with the tracer attached (us)",
        |m| m.driver_cpu_traced,
    ),
    count("steal_ms", "host steal in the window (ms)", |m| m.steal_ms),
    time("steal_ms_per_s", "  per s, both windows (ms/s)", |m| {
        m.steal_ms_per_s
    }),
];

impl RunMetrics {
    /// The periods whose fresh block the last client never got: lost on
    /// the way ([`Self::lost`]) or never made ([`Self::blockless`]).
    pub fn dropped(&self) -> u64 {
        self.lost + self.blockless
    }

    /// As a JSON object (metric keys, plus `cycles`).
    pub fn to_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        o.insert("cycles".into(), json!(self.cycles));
        for m in METRICS {
            let v = (m.get)(self);
            o.insert(
                m.key.into(),
                if v.is_finite() { json!(v) } else { Value::Null },
            );
        }
        Value::Object(o)
    }
}

#[cfg(test)]
mod tests {
    use super::super::chain::CpuSample;
    use super::super::records::ClientRecords;
    use super::super::schedstat::DriverThread;
    use super::*;
    use crate::experiment::run::jackd_cycles::DriverCycle;

    fn rec(start: u64, wake: u64, ret: u64, stamp: u64, lost: bool) -> Rec {
        Rec {
            start,
            wake,
            wait_cpu: 2_000,
            ret,
            sig: ret + 1_000,
            stamp,
            lost,
            xruns: start / 1_000_000,
        }
    }

    /// A client's records, not full, with no xruns.
    fn records(recs: Vec<Rec>) -> ClientRecords {
        ClientRecords {
            recs,
            ..Default::default()
        }
    }

    /// The first client's records of `n` cycles of `p` ns: woken 50 µs
    /// into each, busy 10 µs, its wake-up as the stamp.
    fn first_client(n: u64, p: u64) -> ClientRecords {
        records(
            (0..n)
                .map(|i| rec(i * p, i * p + 50_000, i * p + 60_000, i * p + 50_000, false))
                .collect(),
        )
    }

    /// `n` traced driver wake-ups, `offset` ns into each period of `p` ns.
    fn driver_wakes(n: u64, p: u64, offset: u64) -> Vec<DriverCycle> {
        (0..n)
            .map(|i| DriverCycle {
                wake_ns: i * p + offset,
                end_ns: None,
            })
            .collect()
    }

    /// A run of these clients' records over `window_ns`, periods of 1 ms,
    /// with no driver CPU time and no traced driver wake-up.
    fn run_data(clients: Vec<ClientRecords>, window_ns: (u64, u64)) -> RunData {
        RunData {
            clients,
            window_ns,
            period_ns: 1_000_000,
            driver: DriverThread {
                tid: 1,
                comm: "x".into(),
                found_by: "test",
            },
            untraced: CpuSample::default(),
            traced: CpuSample::default(),
            driver_wakes: Vec::new(),
            trace_error: None,
        }
    }

    #[test]
    fn steal_per_second_spans_both_windows_and_needs_both_readings() {
        let s = 1_000_000_000;
        let mut d = RunData {
            untraced: CpuSample {
                window_ns: (s, 2 * s),
                steal_ns: Some(10_000_000),
                ..CpuSample::default()
            },
            traced: CpuSample {
                window_ns: (2 * s, 5 * s),
                steal_ns: Some(30_000_000),
                ..CpuSample::default()
            },
            ..run_data(Vec::new(), (2 * s, 5 * s))
        };
        // 40 ms over 1 s + 3 s.
        assert_eq!(steal_rate(&d), 10.0);
        d.untraced.steal_ns = None;
        assert!(steal_rate(&d).is_nan(), "one window unread: unknown");
    }

    #[test]
    fn joins_clients_by_stamp_and_counts_lost_blocks() {
        let p = 1_000_000;
        let c1 = first_client(4, p);
        // The last client: cycle 1 brings cycle 0's block again, cycle 3 is missing.
        let c2 = ClientRecords {
            recs: vec![
                rec(0, 70_000, 90_000, 50_000, false),
                rec(p, p + 70_000, p + 90_000, 50_000, true),
                rec(
                    2 * p + 3_000,
                    2 * p + 80_000,
                    2 * p + 100_000,
                    2 * p + 50_000,
                    false,
                ),
            ],
            xruns: 2,
            full: false,
        };
        let d = RunData {
            // Cycles 0 and 1 untraced, 2 and 3 traced.
            untraced: CpuSample {
                window_ns: (0, 2 * p - 1),
                cpu_ns: 40_000,
                runs: 6,
                steal_ns: None,
            },
            traced: CpuSample {
                window_ns: (2 * p, 3 * p + 60_000),
                cpu_ns: 100_000,
                runs: 2,
                steal_ns: Some(30_000_000),
            },
            driver_wakes: driver_wakes(4, p, 20_000),
            ..run_data(vec![c1, c2], (0, 3 * p + 60_000))
        };
        let m = compute(&d);
        assert_eq!(m.cycles, 4);
        assert_eq!(m.lost, 2);
        assert_eq!(m.xruns, 2, "xruns counted in the window only");
        assert_eq!(m.first_wake_p50, 50.0);
        assert_eq!(m.hop_p50, 10.0);
        assert_eq!(m.hop_p99, 20.0);
        assert_eq!(m.eoc_p50, 90.0);
        assert_eq!(m.eoc_p99, 100.0);
        assert_eq!(m.stamp_p50, 40.0);
        assert_eq!(m.driver_cpu, 20.0, "untraced: 40 us over 2 cycles");
        assert_eq!(m.driver_runs, 3.0);
        assert_eq!(m.driver_cpu_traced, 25.0, "traced: 100 us over 4 cycles");
        assert_eq!(
            m.steal_ms, 30.0,
            "the host's steal over the measured window"
        );
        assert_eq!(m.signal_p50, 1.0);
        assert_eq!(m.drv_wake_p50, 30.0, "traced wake-up -> c1 wake");
        assert_eq!(m.drv_eoc_p50, 70.0);
        assert_eq!(m.drv_eoc_p99, 80.0);
    }

    #[test]
    fn a_block_its_holder_rewrote_at_once_is_told_from_one_dropped() {
        let p = 1_000_000;
        let c1 = first_client(4, p);
        // c2 runs block 1 late and begins block 2 4 us after releasing it
        // (sig = ret + 1 us); after block 3 it idles.
        let c2 = records(vec![
            rec(0, 70_000, 90_000, 50_000, false),
            rec(p, 2 * p + 60_000, 2 * p + 80_000, p + 50_000, false),
            rec(
                2 * p,
                2 * p + 85_000,
                2 * p + 100_000,
                2 * p + 50_000,
                false,
            ),
            rec(3 * p, 3 * p + 70_000, 3 * p + 90_000, 3 * p + 50_000, false),
        ]);
        // c3 never gets blocks 1 and 3.
        let c3 = records(vec![
            rec(0, 100_000, 120_000, 50_000, false),
            rec(
                2 * p,
                2 * p + 120_000,
                2 * p + 140_000,
                2 * p + 50_000,
                false,
            ),
        ]);
        let m = compute(&run_data(vec![c1, c2, c3], (0, 3 * p + 60_000)));
        assert_eq!(m.lost, 2);
        assert_eq!(m.lost_rewritten, 1, "block 1 only");
    }

    #[test]
    fn a_chain_done_after_the_next_driver_wake_is_late_whatever_the_reported_start() {
        let p = 1_000_000;
        // The server reports block 1's start half a period late (as
        // jackd2's delay-locked loop can): counted from it, block 1 ends
        // within a period.
        let reported_start = |i: u64| if i == 1 { p + p / 2 } else { i * p };
        let c1 = records(
            (0..4)
                .map(|i| {
                    let w = i * p + 50_000;
                    rec(reported_start(i), w, w + 10_000, w, false)
                })
                .collect(),
        );
        // Block 1 ends 10 us after the driver's next wake-up.
        let c2 = records(vec![
            rec(0, 70_000, 90_000, 50_000, false),
            rec(p, p + 70_000, 2 * p + 30_000, p + 50_000, false),
            rec(2 * p, 2 * p + 70_000, 2 * p + 90_000, 2 * p + 50_000, false),
            rec(3 * p, 3 * p + 70_000, 3 * p + 90_000, 3 * p + 50_000, false),
        ]);
        let d = RunData {
            driver_wakes: driver_wakes(4, p, 20_000),
            ..run_data(vec![c1, c2], (0, 3 * p + 60_000))
        };
        let m = compute(&d);
        assert_eq!(m.late_chains, 1);
        assert_eq!(m.lost, 0);
        // Without a traced wake-up after it, block 1 is not judged.
        let mut untraced_after = d;
        untraced_after.driver_wakes.truncate(2);
        assert_eq!(compute(&untraced_after).late_chains, 0);
    }

    #[test]
    fn a_client_run_longer_than_a_period_counts_as_held() {
        let p = 1_000_000;
        let c1 = first_client(3, p);
        // From its wake-up to its signal call's return (1 µs after its
        // body's), c2 runs block 1 for a period and 1 µs, block 2 for a
        // period exactly.
        let c2 = records(vec![
            rec(0, 70_000, 90_000, 50_000, false),
            rec(p, p + 70_000, 2 * p + 70_000, p + 50_000, false),
            rec(2 * p, 2 * p + 80_000, 3 * p + 79_000, 2 * p + 50_000, false),
        ]);
        let m = compute(&run_data(vec![c1, c2], (0, 2 * p + 60_000)));
        assert_eq!(m.held_runs, 1);
        assert_eq!(m.lost, 0);
    }

    #[test]
    fn a_period_the_first_client_ran_no_block_in_counts_as_blockless() {
        let p = 1_000_000;
        // The server skipped cycle 2: no block of c1 between the driver's
        // wake-ups 2 and 3; c2 takes every block c1 made.
        let mut c1 = first_client(5, p);
        c1.recs.remove(2);
        let c2 = records(
            c1.recs
                .iter()
                .map(|r| rec(r.start, r.wake + 20_000, r.wake + 40_000, r.wake, false))
                .collect(),
        );
        let d = RunData {
            driver_wakes: driver_wakes(5, p, 20_000),
            ..run_data(vec![c1, c2], (0, 4 * p + 60_000))
        };
        let m = compute(&d);
        assert_eq!((m.blockless, m.lost), (1, 0));
        // The driver skipped it instead (no wake-up for it): the same.
        let mut resynced = d;
        resynced.driver_wakes.remove(2);
        assert_eq!(compute(&resynced).blockless, 1);
        // Every cycle run: none.
        let full = RunData {
            driver_wakes: driver_wakes(4, p, 20_000),
            ..run_data(vec![first_client(4, p)], (0, 3 * p + 60_000))
        };
        assert_eq!(compute(&full).blockless, 0);
        // Untraced: none counted.
        let d = run_data(vec![first_client(4, p)], (0, 3 * p + 60_000));
        assert_eq!(compute(&d).blockless, 0);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v: Vec<i64> = (1..=100).map(|x| x * 1000).collect();
        assert_eq!(pct(&mut v, 50.0), 50.0);
        assert_eq!(pct(&mut v, 99.0), 99.0);
        assert!(pct(&mut [], 50.0).is_nan());
    }
}
