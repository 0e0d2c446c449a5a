//! `resound-tool rtapp`: an rt-app-like periodic real-time task that competes
//! with the audio graph for the CPU. It does not connect to a server.
//!
//! One thread. Job `j` is released at the absolute CLOCK_MONOTONIC time
//! `t0 + j * period` (`clock_nanosleep(TIMER_ABSTIME)`), busy-loops until it
//! has consumed `run` of its thread CPU clock (CLOCK_THREAD_CPUTIME_ID), and
//! has the next release as its deadline. A job that finishes after its
//! deadline is a miss; the following jobs keep their absolute release times
//! (a late job delays the next ones, as with rt-app). Response times
//! (finish - release) go into a preallocated histogram of 1 us bins, so the
//! job loop never allocates (it runs inside `assert_no_alloc`, which aborts
//! debug builds of `resound-tool` on any allocation).
//!
//! Output on stdout, one JSON object per line: `{"event":"ready",...}` once
//! the scheduling is set, and at the end (SIGINT/SIGTERM or `--seconds`):
//! `{"event":"final","jobs":..,"misses":..,"resp_p50_us":..,"resp_p99_us":..,"resp_max_us":..,"policy":"SCHED_FIFO 50",...}`.

use clap::Args;
use resound_shm::time::{monotonic_ns, sleep_until, thread_cpu_ns};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Options of `resound-tool rtapp`.
#[derive(Debug, Clone, Args)]
pub struct RtappArgs {
    /// Period in microseconds; each job's deadline is the next release.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(50..=10_000_000))]
    pub period_us: u64,
    /// CPU time each job consumes, in microseconds of its thread CPU clock.
    #[arg(long, default_value_t = 1_700)]
    pub run_us: u64,
    /// SCHED_FIFO priority (1..=99); 0 = SCHED_OTHER. Set with SCHED_RESET_ON_FORK;
    /// the task fails if the priority is refused.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=99))]
    pub fifo: i32,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Jobs released during the first W seconds run but are not counted.
    #[arg(long, value_name = "W", default_value_t = 0.0)]
    pub warmup_s: f64,
}

/// Response times in 1 us bins up to a limit, plus the exact maximum; the
/// storage is allocated once, up front.
#[derive(Debug, Clone)]
pub struct Histogram {
    bins: Vec<u32>,
    /// Samples at or above the last bin.
    over: u64,
    n: u64,
    max_ns: u64,
    sum_ns: u128,
}

impl Histogram {
    /// A histogram with `bins` bins of 1 us each (at least one).
    pub fn new(bins: usize) -> Histogram {
        Histogram {
            bins: vec![0; bins.max(1)],
            over: 0,
            n: 0,
            max_ns: 0,
            sum_ns: 0,
        }
    }

    /// Adds a sample (ns). Real-time safe: no allocation.
    #[inline]
    pub fn add(&mut self, ns: u64) {
        let us = (ns / 1000) as usize;
        match self.bins.get_mut(us) {
            Some(b) => *b = b.saturating_add(1),
            None => self.over += 1,
        }
        self.n += 1;
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += ns as u128;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Largest sample (ns); 0 when empty.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// Mean (ns); None when empty.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum_ns as f64 / self.n as f64)
    }

    /// Nearest-rank percentile `p` (0..=100) in whole microseconds (the
    /// lower edge of the bin it falls in); a rank beyond the last bin gives
    /// the maximum. None when empty.
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        let rank = nearest_rank(self.n, p)?;
        let mut seen = 0u64;
        for (us, &c) in self.bins.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                return Some(us as f64);
            }
        }
        Some(self.max_ns as f64 / 1000.0)
    }
}

/// 1-based nearest rank of percentile `p` among `n` samples (None when n = 0).
pub fn nearest_rank(n: u64, p: f64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let r = (p.clamp(0.0, 100.0) / 100.0 * n as f64).ceil() as u64;
    Some(r.clamp(1, n))
}

/// Sets the calling thread's policy: SCHED_FIFO `prio`, or SCHED_OTHER for 0;
/// SCHED_RESET_ON_FORK either way.
fn set_policy(prio: i32) -> Result<(), String> {
    let (policy, p) = if prio > 0 {
        (libc::SCHED_FIFO, prio)
    } else {
        (libc::SCHED_OTHER, 0)
    };
    let param = libc::sched_param { sched_priority: p };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param that
    // outlives the call.
    let r = unsafe { libc::sched_setscheduler(0, policy | libc::SCHED_RESET_ON_FORK, &param) };
    if r == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        let hint = if e.raw_os_error() == Some(libc::EPERM) {
            " (needs root, CAP_SYS_NICE or a large enough RLIMIT_RTPRIO)"
        } else {
            ""
        };
        Err(if prio > 0 {
            format!("cannot set SCHED_FIFO {prio}: {e}{hint}")
        } else {
            format!("cannot set SCHED_OTHER: {e}")
        })
    }
}

/// What one run counted.
struct Counts {
    jobs: u64,
    misses: u64,
    warmup_jobs: u64,
}

/// The job loop. Real-time safe: no allocation, only clock and sleep syscalls.
fn jobs(
    period_ns: u64,
    run_ns: u64,
    t0: u64,
    count_from: u64,
    end: Option<u64>,
    stop: &AtomicBool,
    hist: &mut Histogram,
) -> Counts {
    let mut c = Counts {
        jobs: 0,
        misses: 0,
        warmup_jobs: 0,
    };
    let mut release = t0;
    while !stop.load(Ordering::Relaxed) && end.is_none_or(|e| release < e) {
        sleep_until(release);
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let cpu0 = thread_cpu_ns();
        while thread_cpu_ns().saturating_sub(cpu0) < run_ns {
            std::hint::spin_loop();
        }
        let finish = monotonic_ns();
        if release >= count_from {
            c.jobs += 1;
            if finish > release + period_ns {
                c.misses += 1;
            }
            hist.add(finish.saturating_sub(release));
        } else {
            c.warmup_jobs += 1;
        }
        release += period_ns;
    }
    c
}

/// Runs the periodic task.
pub fn run(a: RtappArgs) -> Result<(), String> {
    let period_ns = a.period_us * 1000;
    let run_ns = a.run_us * 1000;
    if a.run_us == 0 {
        return Err("--run-us must be > 0".into());
    }
    let secs_ok = a.seconds.is_none_or(|s| s.is_finite() && s > 0.0);
    let warm_ok = a.warmup_s.is_finite() && a.warmup_s >= 0.0;
    if !(secs_ok && warm_ok) {
        return Err("--seconds must be > 0 and --warmup-s >= 0".into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    // 1 us bins up to 20 periods (0.1 s to 4 s): response times beyond go
    // to the overflow count; the maximum stays exact.
    let bins = (20 * a.period_us).clamp(100_000, 4_000_000) as usize;
    let mut hist = Histogram::new(bins);
    set_policy(a.fifo)?;
    // Best effort: lock the (already allocated) pages in memory, which also
    // faults in the histogram, so jobs take no page faults.
    // SAFETY: mlockall has no memory-safety preconditions.
    let locked = unsafe { libc::mlockall(libc::MCL_CURRENT) } == 0;
    let policy = resound_sched::describe_thread(0);
    println!(
        "{}",
        json!({"event": "ready", "policy": policy, "period_us": a.period_us, "run_us": a.run_us, "mlocked": locked})
    );
    let t0 = monotonic_ns() + 1_000_000;
    let count_from = t0 + (a.warmup_s * 1e9) as u64;
    let end = a.seconds.map(|s| t0 + (s * 1e9) as u64);
    let c = assert_no_alloc::assert_no_alloc(|| {
        jobs(period_ns, run_ns, t0, count_from, end, &stop, &mut hist)
    });
    let us = |v: Option<f64>| v.map_or(serde_json::Value::Null, |v| json!(v));
    println!(
        "{}",
        json!({
            "event": "final",
            "jobs": c.jobs,
            "misses": c.misses,
            "resp_p50_us": us(hist.percentile_us(50.0)),
            "resp_p99_us": us(hist.percentile_us(99.0)),
            "resp_max_us": us((hist.count() > 0).then(|| hist.max_ns() as f64 / 1000.0)),
            "resp_mean_us": us(hist.mean_ns().map(|v| v / 1000.0)),
            "policy": policy,
            "period_us": a.period_us,
            "run_us": a.run_us,
            "warmup_jobs": c.warmup_jobs,
        })
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_definition() {
        assert_eq!(nearest_rank(0, 50.0), None);
        assert_eq!(nearest_rank(1, 99.0), Some(1));
        assert_eq!(nearest_rank(100, 50.0), Some(50));
        assert_eq!(nearest_rank(100, 99.0), Some(99));
        assert_eq!(nearest_rank(101, 99.0), Some(100));
        assert_eq!(nearest_rank(10, 0.0), Some(1));
        assert_eq!(nearest_rank(10, 100.0), Some(10));
    }

    #[test]
    fn histogram_percentiles_and_overflow() {
        let mut h = Histogram::new(100);
        assert_eq!(h.percentile_us(50.0), None);
        // 1..=98 us, then two samples past the last bin.
        for us in 1..=98u64 {
            h.add(us * 1000 + 500);
        }
        h.add(150_000);
        h.add(250_000);
        assert_eq!(h.count(), 100);
        assert_eq!(h.percentile_us(50.0), Some(50.0));
        assert_eq!(h.percentile_us(98.0), Some(98.0));
        // Ranks in the overflow report the exact maximum.
        assert_eq!(h.percentile_us(99.0), Some(250.0));
        assert_eq!(h.max_ns(), 250_000);
    }

    #[test]
    fn job_loop_counts_jobs_and_misses() {
        // 5 ms period, 0.2 ms of CPU: every job meets its deadline unless the
        // machine is badly overloaded; the count is exact.
        let stop = AtomicBool::new(false);
        let mut h = Histogram::new(1000);
        let t0 = monotonic_ns() + 1_000_000;
        let c = jobs(
            5_000_000,
            200_000,
            t0,
            t0 + 10_000_000,
            Some(t0 + 50_000_000),
            &stop,
            &mut h,
        );
        assert_eq!(c.warmup_jobs, 2);
        assert_eq!(c.jobs, 8);
        assert_eq!(h.count(), 8);
        assert!(h.percentile_us(50.0).unwrap() >= 200.0);
        assert!(c.misses <= c.jobs);
    }
}
