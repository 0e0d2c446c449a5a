//! Budget controllers for a legacy process's reservations: the paper's Legacy
//! Feedback Scheduler (LFSg, [`Lfs`]) and a percentile-of-CPU-time
//! controller ([`PercentileCtl`]), the alternative "The Wizard of OS: a
//! Heartbeat for Legacy Multimedia Applications" points to in its future
//! work.
//!
//! Both are **pure**: they take [`Observation`]s (what the attach loop read
//! from the kernel for one thread over one sampling window) and the time, and
//! return the new budget; they make no syscalls and read no clock, so they
//! are unit-tested on synthetic series under a simulated clock.
//!
//! Threads: one controller per reserved thread, owned and stepped by the
//! attach loop's thread (the `resound legacy` tool's main thread).

mod lfsg;
mod percentile;
#[cfg(test)]
mod tests;

pub use lfsg::{Lfs, LfsConfig};
pub use percentile::{PercentileConfig, PercentileCtl};

/// What the kernel told us about one thread over one window (between two
/// reads of `/proc/PID/task/TID/{schedstat,status}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Observation {
    /// End of the window (ns, any monotonic origin; only differences count).
    pub at_ns: u64,
    /// Length of the window (ns).
    pub window_ns: u64,
    /// CPU time the thread used in the window (schedstat field 1).
    pub cpu_ns: u64,
    /// Time the thread was ready but not running (schedstat field 2,
    /// `run_delay`): preemption, and for a SCHED_DEADLINE thread also the
    /// time it spent throttled, waiting for its budget's replenishment.
    pub wait_ns: u64,
    /// Jobs the thread ran in the window: its voluntary context switches
    /// (each job ends in a blocking call).
    pub jobs: u64,
}

impl Observation {
    /// The scheduling error of the window's average job, the hard-CBS
    /// counterpart of the paper's ε = d_s − t: how long after its wake-up the
    /// average job finished, `(cpu + wait) / jobs` (ns). On Linux's hard CBS
    /// a job that runs out of budget is throttled until its deadline, so its
    /// deadline is never more than one period ahead of the clock; what grows
    /// instead is the time the job waits. `None` when no job ended.
    pub fn response_ns(&self) -> Option<u64> {
        (self.jobs > 0).then(|| (self.cpu_ns + self.wait_ns) / self.jobs)
    }
}

/// Which controller adapts the budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ControllerKind {
    /// The paper's LFSg (multiplicative increase on lateness, additive decrease).
    Lfs,
    /// A percentile of the CPU time per period, plus a margin.
    #[default]
    Percentile,
}

impl std::str::FromStr for ControllerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lfs" => Ok(ControllerKind::Lfs),
            "percentile" => Ok(ControllerKind::Percentile),
            _ => Err(format!("unknown controller '{s}' (lfs or percentile)")),
        }
    }
}

/// Clamp and change-threshold shared by both controllers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Reservation period T (ns).
    pub period_ns: u64,
    /// Smallest budget (ns).
    pub min_ns: u64,
    /// Largest budget (ns, at most T).
    pub max_ns: u64,
    /// A new budget is reported only when it differs from the applied one by
    /// more than this fraction of it (saves `sched_setattr` calls).
    pub threshold: f64,
}

impl Limits {
    /// Limits for period `period_ns`: budget in [max(1 % of T, 100 µs), T],
    /// threshold 2 %.
    pub fn for_period(period_ns: u64) -> Limits {
        Limits {
            period_ns,
            min_ns: (period_ns / 100).max(100_000).min(period_ns),
            max_ns: period_ns,
            threshold: 0.02,
        }
    }

    /// `q` clamped to [min, max] (max itself at most T).
    pub fn clamp(&self, q: f64) -> u64 {
        let max = self.max_ns.min(self.period_ns) as f64;
        let min = (self.min_ns as f64).min(max);
        q.clamp(min, max) as u64
    }

    /// Whether moving from `applied` to `new` is worth a syscall.
    pub fn moved(&self, applied: u64, new: u64) -> bool {
        let d = applied.abs_diff(new) as f64;
        d > self.threshold * applied as f64 || (new == self.max_ns && applied != new)
    }
}
