//! Every cycle of a jackd run. jackd2 keeps no profile a program can read
//! (its profiler is a compile-time option Debian does not enable), so the
//! driver's timing comes from the kernel: the kernel tracer
//! (`resound_legacy::trace`, perf-event tracepoints, the process never
//! stops) records the dummy driver thread's sleeps, and each return from
//! its sleep is a cycle's start, each entry into the next sleep the
//! driver's end date. The clients' end dates come from the load clients'
//! own records (`jack_get_cycle_times`' cycle start and the callback's
//! return), joined to the traced cycle that contains their cycle start.
//! The tracer runs on a thread of its own (`exp-trace`) for the run.

use crate::experiment::results::CycleSample;
use crate::vsjackd::records::ClientRecords;
use resound_legacy::events::{syscall_nr, Kind, SyscallSet};
use resound_legacy::trace::{self, Options, Trace, Tracer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The tracer thread of a run.
pub struct DriverTrace {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<Trace, String>>,
}

impl DriverTrace {
    /// Traces the sleeps of `pid`'s threads for at most `limit`.
    pub fn start(pid: u32, limit: Duration) -> Result<DriverTrace, String> {
        let mut set = SyscallSet::empty();
        for name in ["nanosleep", "clock_nanosleep"] {
            set.insert(syscall_nr(name).expect("a known system call"));
        }
        let mut opts = Options::new(pid as i32, limit);
        opts.syscalls = set;
        opts.capacity = 1 << 21;
        let stop = opts.stop.clone();
        let thread = std::thread::Builder::new()
            .name("exp-trace".into())
            .spawn(move || trace::trace(Tracer::Kernel, &opts).map_err(|e| e.to_string()))
            .map_err(|e| format!("cannot start the tracer thread: {e}"))?;
        Ok(DriverTrace { stop, thread })
    }

    /// Ends the trace and returns it.
    pub fn finish(self) -> Result<Trace, String> {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .map_err(|_| "the tracer thread panicked".to_string())?
    }
}

/// A traced driver cycle: wake-up and end (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DriverCycle {
    /// Return from the sleep: the cycle's start.
    pub wake_ns: u64,
    /// Entry into the next sleep: the driver's end date (None: the trace ended first).
    pub end_ns: Option<u64>,
}

/// The driver thread's cycles: of the traced threads, the one whose
/// sleep-to-sleep interval is nearest the audio period (median), with at
/// least a tenth of the expected wake-ups.
pub fn driver_cycles(t: &Trace, period_ns: u64) -> Vec<DriverCycle> {
    let mut best: Option<(u64, Vec<DriverCycle>)> = None;
    for &tid in &t.threads {
        let cycles = thread_cycles(t, tid);
        if cycles.len() < 8 {
            continue;
        }
        let mut gaps: Vec<u64> = cycles
            .windows(2)
            .map(|w| w[1].wake_ns - w[0].wake_ns)
            .collect();
        gaps.sort_unstable();
        let median = gaps[gaps.len() / 2];
        let off = median.abs_diff(period_ns);
        let expected = t.elapsed_ns / period_ns.max(1);
        if (cycles.len() as u64) * 10 < expected {
            continue;
        }
        if best.as_ref().is_none_or(|(o, _)| off < *o) {
            best = Some((off, cycles));
        }
    }
    best.map(|(_, c)| c).unwrap_or_default()
}

/// One thread's sleeps as cycles.
fn thread_cycles(t: &Trace, tid: i32) -> Vec<DriverCycle> {
    let mut out: Vec<DriverCycle> = Vec::new();
    for e in t.events.iter().filter(|e| e.tid == tid) {
        match e.kind {
            Kind::SysExit(_) => out.push(DriverCycle {
                wake_ns: e.t_ns,
                end_ns: None,
            }),
            Kind::SysEnter(_) => {
                if let Some(last) = out.last_mut().filter(|c| c.end_ns.is_none()) {
                    last.end_ns = Some(e.t_ns);
                }
            }
            Kind::Wakeup => {}
        }
    }
    out
}

/// The run's cycles: one per traced driver cycle (or, without a trace,
/// one per cycle start the clients recorded), times from `t0_ns`, client
/// end dates in `clients` order.
///
/// A client's record belongs to the traced cycle whose wake-up is the last
/// one before the block's data stamp: the first client's wake-up in that
/// cycle, which every client of a chain copies with the audio (the record's
/// own wake-up where there is no stamp). The cycle start jackd reports to
/// its clients (`jack_get_cycle_times`) is not used for this: under an
/// xrun storm it drifts from the driver's real wake-ups by whole periods.
pub fn samples(
    driver: &[DriverCycle],
    clients: &[(String, Option<&ClientRecords>)],
    t0_ns: u64,
    period_ns: u64,
) -> Vec<CycleSample> {
    let starts: Vec<(u64, Option<u64>)> = if driver.is_empty() {
        client_starts(clients)
    } else {
        driver.iter().map(|c| (c.wake_ns, c.end_ns)).collect()
    };
    let wakes: Vec<u64> = starts.iter().map(|s| s.0).collect();
    let us = |ns: u64| ns as f64 / 1000.0;
    let mut out: Vec<CycleSample> = starts
        .iter()
        .enumerate()
        .map(|(i, &(start, end))| CycleSample {
            t_s: start.saturating_sub(t0_ns) as f64 / 1e9,
            period_us: (i > 0).then(|| us(start - starts[i - 1].0)),
            driver_end_us: end.map(|e| us(e.saturating_sub(start))),
            client_end_us: vec![None; clients.len()],
            ..Default::default()
        })
        .collect();
    for (k, (_, recs)) in clients.iter().enumerate() {
        let Some(r) = recs else { continue };
        let anchor_of = |x: &crate::vsjackd::records::Rec| {
            if driver.is_empty() {
                x.start + period_ns / 2
            } else if x.stamp != 0 {
                x.stamp
            } else {
                x.wake
            }
        };
        for x in &r.recs {
            let i = wakes.partition_point(|&w| w <= anchor_of(x));
            let Some(cycle) = i.checked_sub(1).and_then(|i| out.get_mut(i)) else {
                continue;
            };
            let start = wakes[i - 1];
            if cycle.client_end_us[k].is_none() && x.ret >= start {
                cycle.client_end_us[k] = Some(us(x.ret - start));
            }
        }
    }
    for c in &mut out {
        c.end_us = c.client_end_us.iter().flatten().copied().reduce(f64::max);
    }
    out
}

/// The cycle starts the clients recorded (jack_get_cycle_times), merged.
fn client_starts(clients: &[(String, Option<&ClientRecords>)]) -> Vec<(u64, Option<u64>)> {
    let mut v: Vec<u64> = clients
        .iter()
        .filter_map(|(_, r)| *r)
        .flat_map(|r| r.recs.iter().map(|x| x.start))
        .collect();
    v.sort_unstable();
    v.dedup();
    v.into_iter().map(|s| (s, None)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vsjackd::records::Rec;

    fn rec(start: u64, ret: u64) -> Rec {
        Rec {
            start,
            wake: start + 10,
            wait_cpu: 0,
            ret,
            sig: ret,
            stamp: start + 10,
            lost: false,
            xruns: 0,
        }
    }

    #[test]
    fn client_ends_join_the_traced_cycle_that_contains_them() {
        let driver = [
            DriverCycle {
                wake_ns: 1_000_000,
                end_ns: Some(1_000_050),
            },
            DriverCycle {
                wake_ns: 2_000_000,
                end_ns: Some(2_000_040),
            },
            DriverCycle {
                wake_ns: 3_000_000,
                end_ns: None,
            },
        ];
        // The client's cycle start is jackd's own, a little off the traced
        // wake-up (it is not used); the client missed the second cycle.
        let recs = ClientRecords {
            recs: vec![rec(1_000_020, 1_000_500), rec(3_000_010, 3_000_300)],
            xruns: 0,
            full: false,
        };
        let s = samples(&driver, &[("c1".to_string(), Some(&recs))], 0, 1_000_000);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].client_end_us, vec![Some(0.5)]);
        assert_eq!(s[1].client_end_us, vec![None]);
        assert_eq!(s[2].client_end_us, vec![Some(0.3)]);
        assert_eq!(s[1].period_us, Some(1000.0));
        assert_eq!(s[0].driver_end_us, Some(0.05));
        assert_eq!(s[2].driver_end_us, None);
        assert_eq!(s[0].end_us, Some(0.5));
    }

    #[test]
    fn a_late_block_joins_the_cycle_of_its_stamp_not_of_jackds_cycle_time() {
        let driver: Vec<DriverCycle> = (1..=4)
            .map(|k| DriverCycle {
                wake_ns: k * 1_000_000,
                end_ns: Some(k * 1_000_000 + 50),
            })
            .collect();
        // A middle client processes cycle 1's block (stamped by the first
        // client at 1.00002 ms) during cycle 3, and jackd's cycle time says 3.
        let mut late = rec(3_000_000, 3_400_000);
        late.stamp = 1_000_020;
        late.wake = 3_000_100;
        let recs = ClientRecords {
            recs: vec![late],
            xruns: 0,
            full: false,
        };
        let s = samples(&driver, &[("c2".to_string(), Some(&recs))], 0, 1_000_000);
        assert_eq!(s[0].client_end_us, vec![Some(2400.0)]);
        assert_eq!(s[2].client_end_us, vec![None]);
    }
}
