//! The bench's periodic task set as rt-app specs, one per policy, and the
//! reservations' budgets sized from the jobs' run time under SCHED_FIFO.
//! Pure apart from [`TaskSet::contenders`]' read of the kernel's
//! admission limit; runs on the bench's main thread.

use crate::rtapp::{nearest_rank, RtAppLog, RtAppSpec, RtPolicy, RtTask};
use resound_sched::ledger::SystemBandwidth;

/// SCHED_FIFO priority of every task (all equal: first come, first served).
pub const FIFO_PRIORITY: i32 = 50;

/// Seconds after rt-app starts that the first task's first job is
/// released (its threads are set up by then).
const FIRST_RELEASE_S: f64 = 0.1;

/// `n` tasks of `run_us` every `period_us`, task `i` released `i / n` of a
/// period after the first, and the budget multiples to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSet {
    /// Tasks (1 to 64).
    pub n: u32,
    /// Period of each (us).
    pub period_us: u64,
    /// Calibrated work of each job (us).
    pub run_us: u64,
    /// Budget multiples of the jobs' median run time.
    pub budgets: Vec<f64>,
}

/// One policy the bench runs the set under.
#[derive(Debug, Clone, PartialEq)]
pub struct Contender {
    /// Column name: `fifo` or `deadline-1.5x`.
    pub label: String,
    /// The policy every task gets.
    pub policy: RtPolicy,
}

impl Contender {
    /// SCHED_FIFO at [`FIFO_PRIORITY`].
    pub fn fifo() -> Contender {
        Contender {
            label: "fifo".into(),
            policy: RtPolicy::Fifo {
                priority: FIFO_PRIORITY,
            },
        }
    }
}

/// Jobs at the start of each thread's log that [`Need::of`] leaves out:
/// the first ones run while rt-app is still starting its other threads.
pub const SETTLING_JOBS: usize = 10;

/// What a job needs: its run time (wall time in rt-app's run event)
/// under SCHED_FIFO, over the jobs of a first run after each thread's
/// first [`SETTLING_JOBS`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Need {
    /// Median run time (us), the budgets' base: a stall of the machine
    /// lengthens a job's wall time, so the tail says more about the
    /// machine than about the job.
    pub p50_us: u64,
    /// 99th percentile (us).
    pub p99_us: u64,
}

impl Need {
    /// The run times of every job in `log`; an error without jobs.
    pub fn of(log: &RtAppLog) -> Result<Need, String> {
        let mut v: Vec<u64> = log
            .threads
            .iter()
            .flat_map(|t| t.jobs.iter().skip(SETTLING_JOBS).map(|j| j.run_us))
            .collect();
        v.sort_unstable();
        let pick = |p: f64| nearest_rank(v.len() as u64, p).map(|r| v[(r - 1) as usize]);
        match (pick(50.0), pick(99.0)) {
            (Some(p50_us), Some(p99_us)) => Ok(Need { p50_us, p99_us }),
            _ => Err("rt-app logged no job in the run that measures the jobs' run time".into()),
        }
    }
}

impl TaskSet {
    /// A checked set.
    pub fn new(n: u32, period_us: u64, run_us: u64, budgets: &[f64]) -> Result<TaskSet, String> {
        if !(1..=64).contains(&n) {
            return Err(format!("--tasks {n}: use 1 to 64"));
        }
        if !(100..=1_000_000).contains(&period_us) {
            return Err(format!("--period-us {period_us}: use 100 to 1000000"));
        }
        if run_us == 0 || run_us >= period_us {
            return Err(format!(
                "--run-us {run_us}: a job must take more than 0 and less than its period ({period_us} us)"
            ));
        }
        if budgets.is_empty() {
            return Err("--budget: give at least one multiple".into());
        }
        if let Some(b) = budgets
            .iter()
            .find(|b| !(b.is_finite() && (1.0..=20.0).contains(*b)))
        {
            return Err(format!(
                "--budget {b}: each is a multiple of the jobs' run time, 1 to 20"
            ));
        }
        Ok(TaskSet {
            n,
            period_us,
            run_us,
            budgets: budgets.to_vec(),
        })
    }

    /// SCHED_FIFO, then one reservation per budget multiple, with budgets
    /// of `multiple x need.p50_us` (at most the period). A multiple whose
    /// set the kernel's admission limit cannot hold is lowered to the
    /// largest it can (said in the returned notes); an error when even the
    /// jobs' median itself does not fit.
    pub fn contenders(&self, need: Need) -> Result<(Vec<Contender>, Vec<String>), String> {
        self.contenders_within(need, SystemBandwidth::read().capacity())
    }

    fn contenders_within(
        &self,
        need: Need,
        capacity: f64,
    ) -> Result<(Vec<Contender>, Vec<String>), String> {
        let mut v = vec![Contender::fifo()];
        let mut notes = Vec::new();
        // The largest multiple whose n reservations fit, to two decimals.
        let per_cpu = capacity * self.period_us as f64 / (self.n as f64 * need.p50_us as f64);
        let fits = (per_cpu * 100.0).floor() / 100.0;
        for &b in &self.budgets {
            let m = if b > fits {
                if fits < 1.0 {
                    return Err(format!(
                        "{} reservations of the jobs' median run time ({} us every {} us) need \
                         more than the {capacity:.2} CPUs the kernel admits here: use fewer \
                         --tasks or a smaller --run-us",
                        self.n, need.p50_us, self.period_us
                    ));
                }
                notes.push(format!(
                    "--budget {b} lowered to {fits}: {} reservations of {b} x {} us every {} us \
                     would need more than the {capacity:.2} CPUs the kernel admits here",
                    self.n, need.p50_us, self.period_us
                ));
                fits
            } else {
                b
            };
            let c = self.reservation(m, need);
            if !v.contains(&c) {
                v.push(c);
            }
        }
        Ok((v, notes))
    }

    /// The reservation of `multiple x need.p50_us` every period.
    fn reservation(&self, multiple: f64, need: Need) -> Contender {
        let runtime_us = ((multiple * need.p50_us as f64).ceil() as u64).clamp(1, self.period_us);
        Contender {
            label: format!("deadline-{multiple}x"),
            policy: RtPolicy::Deadline {
                runtime_us,
                period_us: self.period_us,
                deadline_us: self.period_us,
            },
        }
    }

    /// rt-app's spec of the set under `c`, `seconds` of releases long.
    pub fn spec(&self, c: &Contender, seconds: f64) -> RtAppSpec {
        let tasks = (0..self.n)
            .map(|i| {
                let offset_us = self.period_us * u64::from(i) / u64::from(self.n);
                RtTask {
                    name: format!("t{i}"),
                    period_us: self.period_us,
                    run_us: self.run_us,
                    policy: c.policy,
                    instances: 1,
                    start_s: FIRST_RELEASE_S + offset_us as f64 / 1e6,
                    stop_s: None,
                }
            })
            .collect();
        RtAppSpec {
            tasks,
            duration_s: FIRST_RELEASE_S + seconds,
        }
    }

    /// The table's heading.
    pub fn heading(&self, runs: u32, seconds: f64, need: &Need) -> String {
        format!(
            "== {} rt-app tasks x {} us every {} us (released {} us apart), {runs} run(s) x {seconds} s \
             per policy, alternated, order rotated each run ==\n\
             each job's run time under SCHED_FIFO: p50 {} us (the budgets' base), p99 {} us; \
             reservations without reclaiming (rt-app cannot ask for it)",
            self.n,
            self.run_us,
            self.period_us,
            self.period_us / u64::from(self.n),
            need.p50_us,
            need.p99_us
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> TaskSet {
        TaskSet::new(4, 2000, 100, &[1.1, 2.0]).unwrap()
    }

    #[test]
    fn releases_are_spread_evenly_over_the_period() {
        let s = set().spec(&Contender::fifo(), 2.0);
        let starts: Vec<f64> = s.tasks.iter().map(|t| t.start_s).collect();
        assert_eq!(starts, vec![0.1, 0.1005, 0.101, 0.1015]);
        assert!(s.validate().is_ok());
        assert_eq!(s.tasks[0].jobs(s.duration_s), 1000);
    }

    #[test]
    fn budgets_are_multiples_of_the_median_run_time_capped_at_the_period() {
        let need = Need {
            p50_us: 150,
            p99_us: 400,
        };
        let c = set().reservation(1.1, need);
        assert_eq!(c.label, "deadline-1.1x");
        assert_eq!(
            c.policy,
            RtPolicy::Deadline {
                runtime_us: 165,
                period_us: 2000,
                deadline_us: 2000
            }
        );
        let big = set().reservation(20.0, need);
        assert!(matches!(
            big.policy,
            RtPolicy::Deadline {
                runtime_us: 2000,
                ..
            }
        ));
    }

    #[test]
    fn bad_settings_say_which_option_is_wrong() {
        assert!(TaskSet::new(0, 2000, 100, &[1.1])
            .unwrap_err()
            .contains("--tasks"));
        assert!(TaskSet::new(2, 2000, 2000, &[1.1])
            .unwrap_err()
            .contains("--run-us"));
        assert!(TaskSet::new(2, 50, 10, &[1.1])
            .unwrap_err()
            .contains("--period-us"));
        assert!(TaskSet::new(2, 2000, 100, &[0.5])
            .unwrap_err()
            .contains("--budget 0.5"));
        assert!(TaskSet::new(2, 2000, 100, &[])
            .unwrap_err()
            .contains("--budget"));
    }

    #[test]
    fn a_multiple_the_kernel_cannot_admit_is_lowered_to_what_it_can() {
        let s = TaskSet::new(10, 2000, 100, &[1.1, 3.0]).unwrap();
        let need = Need {
            p50_us: 150,
            p99_us: 400,
        };
        // 10 x 3 x 150 / 2000 = 2.25 CPUs; 1.8 hold 2.4 x 150 us each.
        let (cs, notes) = s.contenders_within(need, 1.8).unwrap();
        let labels: Vec<&str> = cs.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["fifo", "deadline-1.1x", "deadline-2.4x"]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("--budget 3 lowered to 2.4"),
            "{}",
            notes[0]
        );
        // Even 1 x the median does not fit: an error, not a run.
        let e = s.contenders_within(need, 0.5).unwrap_err();
        assert!(e.contains("fewer --tasks"), "{e}");
    }
}
