//! Competing real-time load through Debian's `rt-app` (1.0), the program the
//! field uses: the papers' periodic tasks ("run C every T") under
//! SCHED_OTHER, SCHED_FIFO above or below the audio, or their own
//! SCHED_DEADLINE reservation (the rule of "AQuoSA/SHRUB for both": period =
//! the task's period, budget = 1.05 x its run time, [`RtTask::reservation`]).
//!
//! * [`RtAppSpec`] / [`RtTask`]: what to run, checked by
//!   [`RtAppSpec::validate`] and turned into rt-app's JSON by
//!   [`RtAppSpec::to_json`] (module `json`);
//! * [`Calibration`]: rt-app's own "ns per loop", measured once by rt-app and
//!   cached in a file (module `calibrate`);
//! * [`RtApp`]: the running `rt-app` process (module `process`);
//! * [`RtAppLog`] / [`ThreadLog`] / [`JobRecord`]: its per-thread logs parsed
//!   into per-job release, finish, slack and response time (module `log`),
//!   and their [`RtSummary`] (module `summary`).
//!
//! Start and stop times use rt-app's own means: a task's `start_s` becomes
//! its thread's initial `"delay"`, and its stop time a finite phase `"loop"`
//! (the number of jobs that fit between start and stop), so one rt-app
//! process runs a whole timeline and exits when every task has done its jobs.
//!
//! Everything here runs on the caller's thread; nothing is on the real-time
//! path (the real-time threads are rt-app's).

mod calibrate;
mod json;
mod log;
mod process;
mod summary;

pub use calibrate::Calibration;
pub use log::{parse_thread_log, JobRecord, RtAppLog, ThreadLog, LOG_BASENAME};
pub use process::{rtapp_binary, RtApp};
pub use summary::{nearest_rank, RtSummary};

/// How one rt-app task is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtPolicy {
    /// SCHED_OTHER, nice 0.
    Other,
    /// SCHED_FIFO at `priority` (1..=99).
    Fifo {
        /// Static priority, 1..=99.
        priority: i32,
    },
    /// SCHED_DEADLINE: `runtime_us` of CPU every `period_us`, within
    /// `deadline_us` of each period start (rt-app's `dl-runtime`,
    /// `dl-period`, `dl-deadline`).
    Deadline {
        /// Budget per period (us).
        runtime_us: u64,
        /// Reservation period (us).
        period_us: u64,
        /// Relative deadline (us), runtime <= deadline <= period.
        deadline_us: u64,
    },
}

impl RtPolicy {
    /// rt-app's name of the policy (`"SCHED_FIFO"`).
    pub fn rtapp_name(&self) -> &'static str {
        match self {
            RtPolicy::Other => "SCHED_OTHER",
            RtPolicy::Fifo { .. } => "SCHED_FIFO",
            RtPolicy::Deadline { .. } => "SCHED_DEADLINE",
        }
    }

    /// Human-readable form: `"SCHED_FIFO 50"`, `"SCHED_DEADLINE 2100/10000/10000 us"`.
    pub fn describe(&self) -> String {
        match self {
            RtPolicy::Other => "SCHED_OTHER".into(),
            RtPolicy::Fifo { priority } => format!("SCHED_FIFO {priority}"),
            RtPolicy::Deadline {
                runtime_us,
                period_us,
                deadline_us,
            } => format!("SCHED_DEADLINE {runtime_us}/{deadline_us}/{period_us} us"),
        }
    }

    /// The same policy as resound's scheduler crate spells it (to compare
    /// with what the kernel reports for a thread).
    pub fn to_sched(&self) -> resound_sched::Policy {
        match *self {
            RtPolicy::Other => resound_sched::Policy::Other,
            RtPolicy::Fifo { priority } => resound_sched::Policy::Fifo { priority },
            RtPolicy::Deadline {
                runtime_us,
                period_us,
                deadline_us,
            } => resound_sched::Policy::Deadline {
                runtime_ns: runtime_us * 1000,
                deadline_ns: deadline_us * 1000,
                period_ns: period_us * 1000,
                reclaim: false,
            },
        }
    }
}

/// One periodic rt-app task: job `k` of each of its threads is released at
/// `start + k * period` (an absolute timer: a late job does not shift the
/// later releases), runs `run_us` of calibrated CPU work, and has the next
/// release as its deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct RtTask {
    /// rt-app thread name: 1..=15 characters of `[A-Za-z0-9_]`, unique in a
    /// spec (it names the threads, so the kernel's `comm`, and the log files).
    pub name: String,
    /// Job period (us), an absolute timer.
    pub period_us: u64,
    /// CPU work per job (us of calibrated loops: the same work whether or not
    /// the thread is preempted).
    pub run_us: u64,
    /// Its scheduling.
    pub policy: RtPolicy,
    /// Threads running this task (>= 1), each with its own timer.
    pub instances: u32,
    /// Seconds after the spec starts that its first job is released (rt-app's
    /// initial `"delay"`).
    pub start_s: f64,
    /// Seconds after the spec starts that it stops (no job is released at or
    /// after it); None = at the spec's `duration_s`.
    pub stop_s: Option<f64>,
}

impl RtTask {
    /// The papers' reservation for a task of `run_us` every `period_us`
    /// ("AQuoSA/SHRUB for both"): runtime = ceil(1.05 * run), period =
    /// deadline = the task's period.
    pub fn reservation(period_us: u64, run_us: u64) -> RtPolicy {
        RtPolicy::Deadline {
            runtime_us: (run_us * 105).div_ceil(100),
            period_us,
            deadline_us: period_us,
        }
    }

    /// Jobs each thread runs in a spec of `duration_s`: the releases that fall
    /// before its stop time.
    pub fn jobs(&self, duration_s: f64) -> u64 {
        let us = |s: f64| (s * 1e6).round().max(0.0) as u64;
        let stop = us(self.stop_s.unwrap_or(duration_s).min(duration_s));
        let window_us = stop.saturating_sub(us(self.start_s));
        window_us.div_ceil(self.period_us.max(1))
    }

    fn validate(&self, duration_s: f64) -> Result<(), String> {
        let n = &self.name;
        let ok_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
        if n.is_empty() || n.len() > 15 || !n.chars().all(ok_char) {
            return Err(format!(
                "task name {n:?}: use 1 to 15 characters of A-Z, a-z, 0-9 and _ \
                 (it becomes the thread name and part of the log file name)"
            ));
        }
        if self.period_us == 0 || self.run_us == 0 {
            return Err(format!("task {n}: period and run time must be > 0 us"));
        }
        let max = i32::MAX as u64;
        if self.period_us > max || self.run_us > max || self.jobs(duration_s) > max {
            return Err(format!(
                "task {n}: period, run time and job count must fit rt-app's int"
            ));
        }
        if self.instances == 0 {
            return Err(format!("task {n}: instances must be >= 1"));
        }
        if !(self.start_s.is_finite() && self.start_s >= 0.0) {
            return Err(format!("task {n}: start_s must be >= 0"));
        }
        if let Some(stop) = self.stop_s {
            if !(stop.is_finite() && stop > self.start_s) {
                return Err(format!("task {n}: stop_s ({stop}) must be after start_s"));
            }
        }
        if self.jobs(duration_s) == 0 {
            return Err(format!(
                "task {n}: starts at {} s, after the spec's {duration_s} s",
                self.start_s
            ));
        }
        self.validate_policy()
    }

    fn validate_policy(&self) -> Result<(), String> {
        let n = &self.name;
        match self.policy {
            RtPolicy::Other => Ok(()),
            RtPolicy::Fifo { priority } if (1..=99).contains(&priority) => Ok(()),
            RtPolicy::Fifo { priority } => Err(format!(
                "task {n}: SCHED_FIFO priority {priority} is outside 1..=99"
            )),
            RtPolicy::Deadline {
                runtime_us,
                period_us,
                deadline_us,
            } => {
                if runtime_us == 0 || runtime_us > deadline_us || deadline_us > period_us {
                    Err(format!(
                        "task {n}: SCHED_DEADLINE needs 0 < runtime ({runtime_us} us) <= \
                         deadline ({deadline_us} us) <= period ({period_us} us)"
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// What one rt-app process runs: its tasks, for `duration_s` seconds at most.
#[derive(Debug, Clone, PartialEq)]
pub struct RtAppSpec {
    /// The tasks (at least one).
    pub tasks: Vec<RtTask>,
    /// Seconds from the start to the end of the last job's period (> 0);
    /// rt-app exits then, or earlier when [`RtApp::stop`] stops it.
    pub duration_s: f64,
}

impl RtAppSpec {
    /// Checks the spec: at least one task, unique valid names, positive
    /// times, start before stop, policies in range.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return Err(format!("duration_s must be > 0, not {}", self.duration_s));
        }
        if self.tasks.is_empty() {
            return Err("an rt-app spec needs at least one task".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for t in &self.tasks {
            if !names.insert(t.name.as_str()) {
                return Err(format!("task name {:?} appears twice", t.name));
            }
            t.validate(self.duration_s)?;
        }
        Ok(())
    }

    /// The task named `name`.
    pub fn task(&self, name: &str) -> Option<&RtTask> {
        self.tasks.iter().find(|t| t.name == name)
    }

    /// Threads rt-app starts for this spec (the sum of the instances).
    pub fn threads(&self) -> u32 {
        self.tasks.iter().map(|t| t.instances).sum()
    }
}

#[cfg(test)]
mod tests;
