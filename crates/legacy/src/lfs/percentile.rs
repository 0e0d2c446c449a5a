//! Budget from a percentile of the CPU time the thread really used per
//! period (the alternative "The Wizard of OS: a Heartbeat for Legacy
//! Multimedia Applications" points to: measure execution times instead of
//! probing the scheduling error), with [`resound_sched::Predictor`].
//!
//! Fed with the CPU time per job, as the attach loop measures it once per
//! period ([`PercentileCtl::on_period`]), and told how many jobs a period
//! holds ([`PercentileCtl::set_jobs_per_period`]); decides every T_sample
//! ([`PercentileCtl::on_sample`]): Q = percentile × jobs per period ×
//! (1 + margin), clamped. The jobs per period multiply at decision time, not
//! as the samples come in: when a player doubles its frame rate, the
//! samples already in the window then count twice as soon as the new rate is
//! known, instead of holding the budget at the old rate's until they age out.
//! If the thread was late in the window, or more than a tenth of its jobs
//! used the whole budget, the predictor cannot see its true demand (the
//! budget cuts it off), so the budget grows by `alpha` instead until it is
//! no longer saturated.
//!
//! Threads: owned by the attach loop's thread. Pure: no syscalls, no clock.

use super::{Limits, Observation};
use resound_sched::Predictor;

/// The percentile controller's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PercentileConfig {
    /// Percentile of the per-period CPU time (default 95).
    pub percentile: f64,
    /// Periods in the predictor's window (default 50: 2 s at 25 fps).
    pub window: usize,
    /// Headroom over the percentile (default 0.15).
    pub margin: f64,
    /// Growth factor while the budget is saturated (default 1.25).
    pub alpha: f64,
    /// Budget clamps and change threshold.
    pub limits: Limits,
}

impl PercentileConfig {
    /// The defaults for reservation period `period_ns`.
    pub fn for_period(period_ns: u64) -> PercentileConfig {
        PercentileConfig {
            percentile: 95.0,
            window: 50,
            margin: 0.15,
            alpha: 1.25,
            limits: Limits::for_period(period_ns),
        }
    }
}

/// One thread's percentile controller. See the module docs.
#[derive(Debug, Clone)]
pub struct PercentileCtl {
    cfg: PercentileConfig,
    pred: Predictor,
    applied_ns: u64,
    /// Jobs per reservation period (≥ 1): what a job's CPU time is
    /// multiplied by to make a period's.
    jobs_per_period: f64,
    /// Jobs since the last decision, and how many of them used (nearly) the whole budget.
    jobs: u32,
    saturated: u32,
}

impl PercentileCtl {
    /// Starts at budget `initial_ns` (clamped). Allocates the predictor.
    pub fn new(cfg: PercentileConfig, initial_ns: u64) -> PercentileCtl {
        PercentileCtl {
            pred: Predictor::new(cfg.window, cfg.percentile),
            applied_ns: cfg.limits.clamp(initial_ns as f64),
            cfg,
            jobs_per_period: 1.0,
            jobs: 0,
            saturated: 0,
        }
    }

    /// The parameters.
    pub fn config(&self) -> &PercentileConfig {
        &self.cfg
    }

    /// The budget last returned, ns.
    pub fn budget_ns(&self) -> u64 {
        self.applied_ns
    }

    /// How many jobs a reservation period holds (clamped to at least 1).
    pub fn set_jobs_per_period(&mut self, jobs: f64) {
        self.jobs_per_period = if jobs.is_finite() { jobs.max(1.0) } else { 1.0 };
    }

    /// The CPU time one of the thread's jobs used, once per reservation
    /// period. Periods whose jobs used (nearly) the whole budget are
    /// counted: more than a tenth of them marks the budget saturated.
    pub fn on_period(&mut self, job_cpu_ns: u64) {
        self.pred.push(job_cpu_ns);
        self.jobs += 1;
        if job_cpu_ns as f64 * self.jobs_per_period >= 0.97 * self.applied_ns as f64 {
            self.saturated += 1;
        }
    }

    /// One decision at the end of a T_sample window; `late` is whether the
    /// window showed the thread late (see [`super::Lfs::is_late`]). Returns
    /// the new budget when it moved past the threshold.
    pub fn on_sample(&mut self, obs: &Observation, late: bool) -> Option<u64> {
        let _ = obs;
        // One job at the budget can be noise (a cache-cold frame); more than
        // a tenth of the window's jobs cannot.
        let grow = late || self.saturated * 10 > self.jobs;
        (self.jobs, self.saturated) = (0, 0);
        let q = if grow {
            self.pred.flush();
            self.applied_ns as f64 * self.cfg.alpha
        } else {
            let p = self.pred.predict()?;
            p as f64 * self.jobs_per_period * (1.0 + self.cfg.margin)
        };
        let q = self.cfg.limits.clamp(q);
        if self.cfg.limits.moved(self.applied_ns, q) {
            self.applied_ns = q;
            Some(q)
        } else {
            None
        }
    }
}
