//! The Legacy Feedback Scheduler, LFSg variant ("The Wizard of OS: a
//! Heartbeat for Legacy Multimedia Applications", §IV-A): every T_sample,
//! Q ← αQ if ε > T (the task is late: grow), else Q ← Q − β.
//!
//! ε here is [`Observation::response_ns`]: on Linux's hard CBS a job that
//! needs more than its budget is throttled until its scheduling deadline, so
//! `d_s − t` stays within one period; the time the job waited (throttled or
//! preempted) is what shows it was not given enough, and a job finishing
//! more than T after its wake-up is late.
//!
//! Threads: owned by the attach loop's thread. Pure: no syscalls, no clock.

use super::{Limits, Observation};

/// LFSg's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LfsConfig {
    /// Multiplicative increase on lateness (> 1; default 1.25).
    pub alpha: f64,
    /// Additive decrease otherwise (ns; default 1 % of the period, set by
    /// [`LfsConfig::for_period`]).
    pub beta_ns: u64,
    /// Sampling period T_sample (ns; default 500 ms).
    pub sample_ns: u64,
    /// Budget clamps and change threshold.
    pub limits: Limits,
}

impl LfsConfig {
    /// The defaults for reservation period `period_ns`.
    pub fn for_period(period_ns: u64) -> LfsConfig {
        LfsConfig {
            alpha: 1.25,
            beta_ns: period_ns / 100,
            sample_ns: 500_000_000,
            limits: Limits::for_period(period_ns),
        }
    }
}

/// One thread's LFSg state. See the module docs.
#[derive(Debug, Clone)]
pub struct Lfs {
    cfg: LfsConfig,
    budget_ns: f64,
    applied_ns: u64,
    late_windows: u64,
}

impl Lfs {
    /// Starts at budget `initial_ns` (clamped).
    pub fn new(cfg: LfsConfig, initial_ns: u64) -> Lfs {
        let b = cfg.limits.clamp(initial_ns as f64);
        Lfs {
            cfg,
            budget_ns: b as f64,
            applied_ns: b,
            late_windows: 0,
        }
    }

    /// The parameters.
    pub fn config(&self) -> &LfsConfig {
        &self.cfg
    }

    /// The budget last returned (what should be applied), ns.
    pub fn budget_ns(&self) -> u64 {
        self.applied_ns
    }

    /// Windows in which the average job finished more than T after waking.
    pub fn late_windows(&self) -> u64 {
        self.late_windows
    }

    /// Whether `obs` shows the thread late (ε > T). A window without a
    /// finished job but with waiting of at least a period counts as late
    /// too (a job that never finishes is the latest of all).
    pub fn is_late(&self, obs: &Observation) -> bool {
        let t = self.cfg.limits.period_ns;
        match obs.response_ns() {
            Some(eps) => eps > t,
            None => obs.wait_ns >= t,
        }
    }

    /// One LFSg step on a T_sample window. Returns the new budget when it
    /// moved past the threshold (the caller applies it), else `None`.
    pub fn on_sample(&mut self, obs: &Observation) -> Option<u64> {
        if self.is_late(obs) {
            self.late_windows += 1;
            self.budget_ns *= self.cfg.alpha;
        } else {
            self.budget_ns -= self.cfg.beta_ns as f64;
        }
        let q = self.cfg.limits.clamp(self.budget_ns);
        self.budget_ns = q as f64;
        if self.cfg.limits.moved(self.applied_ns, q) {
            self.applied_ns = q;
            Some(q)
        } else {
            None
        }
    }
}
