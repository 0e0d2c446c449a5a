//! One reserved thread: its old policy (restored at detach), its controller,
//! its counters at the last period and the last sample, and its deadline
//! misses.
//!
//! A **miss** is a postponed CBS scheduling deadline: the thread's budget
//! ran out before its job blocked, so the kernel throttled it and pushed its
//! deadline one period further (a job that needs three budgets counts two) (the hard-CBS form of the paper's
//! lateness ε = d_s − t > T). From outside it shows in the thread's
//! scheduling deadline (`dl.deadline` in `/proc/PID/task/TID/sched`): once a
//! period it advances by one period per job started, and by one more period
//! per postponement. So once per reservation period the loop reads the
//! deadline and the jobs started since the last read (blocking calls ended,
//! plus the job running now) and counts `round((Δd − T·Δjobs) / T)` misses
//! when that excess is at least half a period (at most one per period
//! elapsed). The count assumes one job per reservation period (T = the
//! thread's period, as `--period auto` sets it); a thread that wakes less
//! often than every T can count one false miss per such wake-up.
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
    /// Reservation periods since then.
    periods_pending: u64,
    /// Jobs per reservation period over the last T_sample window in which
    /// the thread was not late, at least one (1 until the first such window).
    jobs_per_period: f64,
    /// Budget applied (ns).
    pub budget_ns: u64,
    /// Mean job response time in the last window (ns), if a job ended.
    pub response_ns: Option<u64>,
    /// Windows in which the thread was late (average job finished after T).
    pub late: u64,
    /// Deadline misses (postponed scheduling deadlines, see the module docs).
    pub misses: u64,
    /// The scheduling deadline and jobs started at the last period's read.
    at_tick: Option<(u64, u64, std::time::Instant)>,
    /// Negative excess carried to the next read (ns, in [−T, 0]).
    carry: i128,
}

/// The controller for `o` starting at budget `init_ns`, and its first
/// (clamped) budget.
fn controller(o: &Options, init_ns: u64) -> (Ctl, u64) {
    let mut lc = LfsConfig::for_period(o.period_ns);
    lc.alpha = o.alpha;
    lc.beta_ns = o.beta_ns.unwrap_or(lc.beta_ns);
    lc.sample_ns = o.sample_ns;
    lc.limits.min_ns = o.min_ns.unwrap_or(lc.limits.min_ns).min(o.period_ns);
    lc.limits.max_ns = o
        .max_ns
        .unwrap_or(o.period_ns)
        .clamp(lc.limits.min_ns, o.period_ns);
    let mut pc = PercentileConfig::for_period(o.period_ns);
    pc.limits = lc.limits;
    let lfs = Lfs::new(lc, init_ns);
    let budget_ns = lfs.budget_ns();
    let ctl = match o.controller {
        ControllerKind::Lfs => Ctl::Lfs(lfs),
        ControllerKind::Percentile => Ctl::Percentile(PercentileCtl::new(pc, init_ns), lfs),
    };
    (ctl, budget_ns)
}

/// Jobs per reservation period of `period_ns` after a window of `window_ns`
/// in which the thread ended `jobs` jobs, at least one; `prev` when the
/// window was empty or the thread `late` in it (a late thread runs its
/// backlog job after job without blocking, so its blocking calls undercount
/// its jobs).
fn jobs_per_period(prev: f64, jobs: u64, window_ns: u64, period_ns: u64, late: bool) -> f64 {
    if window_ns == 0 || late {
        return prev;
    }
    (jobs as f64 * period_ns as f64 / window_ns as f64).max(1.0)
}

/// Jobs started by a thread: blocking calls ended, plus the one running now.
fn jobs_started(c: &Counters) -> u64 {
    c.voluntary + u64::from(!c.sleeping)
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
        let (ctl, budget_ns) = controller(o, init_ns);
        Some(Ok(Reserved {
            tid,
            old,
            ctl,
            at_period: c,
            at_sample: c,
            job_cpu_ns: 0,
            jobs_pending: 0,
            periods_pending: 0,
            jobs_per_period: 1.0,
            budget_ns,
            response_ns: None,
            late: 0,
            misses: 0,
            at_tick: None,
            carry: 0,
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
    /// percentile controller and counts deadline misses. CPU time is summed
    /// from one read at which the thread was blocked to the next (then no
    /// job is half done); each period in between gets the mean CPU time per
    /// job of that stretch, which the controller multiplies by the jobs per
    /// period (a thread with two jobs per period needs both in its budget).
    /// Per job rather than per stretch: this loop's reads come late when
    /// real-time load delays it, and a stretch that then holds two jobs
    /// would read as a period needing twice the CPU. `false` when the
    /// thread is gone.
    pub fn on_period(&mut self, pid: i32, period_ns: u64) -> bool {
        // The deadline before the counters: a job that starts between the two
        // reads then shows first as a negative excess (carried), never as a
        // false miss.
        let d = procfs::dl_deadline(pid, self.tid);
        let Some(c) = procfs::counters(pid, self.tid) else {
            return false;
        };
        self.job_cpu_ns += c.cpu_ns.saturating_sub(self.at_period.cpu_ns);
        self.jobs_pending += c.voluntary.saturating_sub(self.at_period.voluntary);
        self.periods_pending += 1;
        if c.sleeping && self.jobs_pending > 0 {
            let n = self.periods_pending;
            let per_job = self.job_cpu_ns / self.jobs_pending;
            if let Ctl::Percentile(p, _) = &mut self.ctl {
                for _ in 0..n.min(8) {
                    p.on_period(per_job);
                }
            }
            (self.job_cpu_ns, self.jobs_pending, self.periods_pending) = (0, 0, 0);
        }
        self.at_period = c;
        self.count_misses(d, &c, period_ns);
        true
    }

    /// Counts the postponed deadlines since the last read (see the module
    /// docs), from the deadline `d` read just before the counters `c`.
    fn count_misses(&mut self, d: Option<u64>, c: &Counters, period_ns: u64) {
        let now = std::time::Instant::now();
        let Some(d) = d.filter(|&d| d > 0) else {
            // Not yet under SCHED_DEADLINE, or never woken there: no deadline.
            self.at_tick = None;
            return;
        };
        let jobs = jobs_started(c);
        let t = period_ns as i128;
        if let Some((d0, j0, t0)) = self.at_tick {
            let expected = jobs as i128 - j0 as i128;
            let excess = d as i128 - d0 as i128 - expected * t + self.carry;
            self.carry = 0;
            if excess * 2 >= t {
                // At most one postponement per replenishment, i.e. per period
                // elapsed (a thread that slept for long and woke once would
                // otherwise count its idle periods).
                let most = (now - t0).as_nanos().div_ceil(period_ns as u128) as i128;
                self.misses += ((excess + t / 2) / t).min(most.max(1)) as u64;
            } else if excess < 0 {
                // A job counted before its deadline moved: settled next time
                // (at most a period, so a thread faster than T cannot bank
                // credit against real misses).
                self.carry = excess.max(-t);
            }
        }
        self.at_tick = Some((d, jobs, now));
    }

    /// Once per T_sample: the window's observation and the controller's
    /// decision (a new budget to apply, if it moved).
    pub fn on_sample(
        &mut self,
        pid: i32,
        now_ns: u64,
        window_ns: u64,
        period_ns: u64,
    ) -> Option<Option<u64>> {
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
        let late = match &self.ctl {
            Ctl::Lfs(l) => l.is_late(&obs),
            Ctl::Percentile(_, probe) => probe.is_late(&obs),
        };
        self.jobs_per_period =
            jobs_per_period(self.jobs_per_period, obs.jobs, window_ns, period_ns, late);
        let decision = match &mut self.ctl {
            Ctl::Lfs(l) => {
                let d = l.on_sample(&obs);
                self.late = l.late_windows();
                d
            }
            Ctl::Percentile(p, _) => {
                self.late += late as u64;
                p.set_jobs_per_period(self.jobs_per_period);
                p.on_sample(&obs, late)
            }
        };
        Some(decision)
    }

    /// Counts the per-period and per-sample CPU time from counters `c`
    /// (read now) on, forgetting what accumulated before.
    pub fn rebase(&mut self, c: Counters) {
        (self.at_period, self.at_sample) = (c, c);
        (self.job_cpu_ns, self.jobs_pending, self.periods_pending) = (0, 0, 0);
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

    /// Rebuilds the controller for new options `o` (a new period) starting
    /// at budget `q`; returns the clamped budget. The caller applies it.
    pub fn retune(&mut self, o: &Options, q: u64) -> u64 {
        let (ctl, b) = controller(o, q);
        self.ctl = ctl;
        (self.at_tick, self.carry) = (None, 0);
        (self.job_cpu_ns, self.jobs_pending, self.periods_pending) = (0, 0, 0);
        b
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

#[cfg(test)]
mod tests {
    use super::jobs_per_period;

    #[test]
    fn jobs_per_period_counts_only_windows_in_time() {
        let (t, w) = (40_000_000, 500_000_000);
        // 25 jobs in 12.5 periods: two per period.
        assert_eq!(jobs_per_period(1.0, 25, w, t, false), 2.0);
        // Backlogged: hardly any blocking calls; the old count stands.
        assert_eq!(jobs_per_period(2.0, 1, w, t, true), 2.0);
        // Fewer jobs than periods still book one per period.
        assert_eq!(jobs_per_period(2.0, 3, w, t, false), 1.0);
        assert_eq!(jobs_per_period(1.5, 3, 0, t, false), 1.5);
    }
}
