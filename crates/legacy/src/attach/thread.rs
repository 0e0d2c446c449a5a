//! One reserved thread: its old policy (restored at detach), its controller,
//! its counters at the last period and the last sample.
//!
//! Threads: the attach loop's thread.

use super::procfs::{self, Counters};
use super::Options;
use crate::lfs::{ControllerKind, Lfs, LfsConfig, Observation, PercentileConfig, PercentileCtl};
use resound_sched::{Policy, SchedError};

/// The budget controller of one thread.
#[derive(Debug)]
enum Ctl {
    Lfs(Lfs),
    Percentile(PercentileCtl, Lfs),
}

/// See the module docs.
#[derive(Debug)]
pub struct Reserved {
    /// Kernel thread id.
    pub tid: i32,
    /// Its policy before we attached.
    pub old: Policy,
    ctl: Ctl,
    at_period: Counters,
    at_sample: Counters,
    /// CPU time since the last read at which the thread was blocked.
    job_cpu_ns: u64,
    /// Jobs ended since then.
    jobs_pending: u64,
    /// Budget applied (ns).
    pub budget_ns: u64,
    /// Mean job response time in the last window (ns), if a job ended.
    pub response_ns: Option<u64>,
    /// Windows in which the thread was late (average job finished after T).
    pub late: u64,
}

impl Reserved {
    /// Reads the thread's policy and counters and builds its controller
    /// starting at budget `init_ns`; applies nothing.
    pub fn new(
        pid: i32,
        tid: i32,
        o: &Options,
        init_ns: u64,
    ) -> Option<Result<Reserved, SchedError>> {
        let c = procfs::counters(pid, tid)?;
        let old = match resound_sched::current(tid) {
            Ok(p) => p,
            Err(e) => return Some(Err(e)),
        };
        let mut lc = LfsConfig::for_period(o.period_ns);
        lc.alpha = o.alpha;
        lc.beta_ns = o.beta_ns.unwrap_or(lc.beta_ns);
        lc.sample_ns = o.sample_ns;
        lc.limits.min_ns = o.min_ns.unwrap_or(lc.limits.min_ns).min(o.period_ns);
        let mut pc = PercentileConfig::for_period(o.period_ns);
        pc.limits = lc.limits;
        let init = init_ns;
        let lfs = Lfs::new(lc, init);
        let budget_ns = lfs.budget_ns();
        let ctl = match o.controller {
            ControllerKind::Lfs => Ctl::Lfs(lfs),
            ControllerKind::Percentile => Ctl::Percentile(PercentileCtl::new(pc, init), lfs),
        };
        Some(Ok(Reserved {
            tid,
            old,
            ctl,
            at_period: c,
            at_sample: c,
            job_cpu_ns: 0,
            jobs_pending: 0,
            budget_ns,
            response_ns: None,
            late: 0,
        }))
    }

    /// The SCHED_DEADLINE policy for budget `q`.
    pub fn policy(q: u64, o: &Options) -> Policy {
        Policy::Deadline {
            runtime_ns: q,
            deadline_ns: o.period_ns,
            period_ns: o.period_ns,
            reclaim: o.reclaim,
        }
    }

    /// Once per reservation period: feeds the CPU time per job to the
    /// percentile controller. CPU time is summed from one read at which the
    /// thread was blocked to the next (then no job is half done) and divided
    /// by the jobs that ended in between. `false` when the thread is gone.
    pub fn on_period(&mut self, pid: i32) -> bool {
        let Some(c) = procfs::counters(pid, self.tid) else {
            return false;
        };
        self.job_cpu_ns += c.cpu_ns.saturating_sub(self.at_period.cpu_ns);
        self.jobs_pending += c.voluntary.saturating_sub(self.at_period.voluntary);
        let jobs = self.jobs_pending;
        if c.sleeping && jobs > 0 {
            self.jobs_pending = 0;
            if let Ctl::Percentile(p, _) = &mut self.ctl {
                for _ in 0..jobs.min(8) {
                    p.on_period(self.job_cpu_ns / jobs);
                }
            }
            self.job_cpu_ns = 0;
        }
        self.at_period = c;
        true
    }

    /// Once per T_sample: the window's observation and the controller's
    /// decision (a new budget to apply, if it moved).
    pub fn on_sample(&mut self, pid: i32, now_ns: u64, window_ns: u64) -> Option<Option<u64>> {
        let c = procfs::counters(pid, self.tid)?;
        let obs = Observation {
            at_ns: now_ns,
            window_ns,
            cpu_ns: c.cpu_ns.saturating_sub(self.at_sample.cpu_ns),
            wait_ns: c.wait_ns.saturating_sub(self.at_sample.wait_ns),
            jobs: c.voluntary.saturating_sub(self.at_sample.voluntary),
        };
        self.at_sample = c;
        self.response_ns = obs.response_ns();
        let decision = match &mut self.ctl {
            Ctl::Lfs(l) => {
                let d = l.on_sample(&obs);
                self.late = l.late_windows();
                d
            }
            Ctl::Percentile(p, probe) => {
                let late = probe.is_late(&obs);
                self.late += late as u64;
                p.on_sample(&obs, late)
            }
        };
        Some(decision)
    }

    /// Restarts the controller from budget `q` (clamped); returns it. The
    /// caller applies it.
    pub fn restart(&mut self, q: u64) -> u64 {
        match &mut self.ctl {
            Ctl::Lfs(l) => {
                *l = Lfs::new(*l.config(), q);
                l.budget_ns()
            }
            Ctl::Percentile(p, probe) => {
                *probe = Lfs::new(*probe.config(), q);
                *p = PercentileCtl::new(*p.config(), q);
                p.budget_ns()
            }
        }
    }

    /// Takes the thread off its reservation and back to its old policy:
    /// shrink to the smallest budget first (a sleeping deadline thread reset
    /// from another thread can leak its admission bandwidth in the kernel; a
    /// minimal one leaks little), then switch.
    pub fn restore(&self, o: &Options) -> Result<(), SchedError> {
        let min = Reserved::policy((o.period_ns / 1000).max(1024), o);
        let _ = resound_sched::apply(self.tid, &min);
        resound_sched::apply(self.tid, &self.old)
    }
}
