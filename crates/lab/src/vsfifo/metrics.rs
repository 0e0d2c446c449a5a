//! One run's figures from rt-app's per-job logs: deadline misses (a job
//! that finished after the next release), strings of consecutive misses
//! of one thread (how long a late task stayed late), the worst lateness,
//! and the host's steal over the jobs. Pure; runs on the bench's main
//! thread.

use crate::rtapp::{JobRecord, RtAppLog};

/// A string of misses at least this long counts as a hold: longer than a
/// stall of a period or two costs a thread that gets the CPU back at once.
pub const HOLD_STRING: u64 = 4;

/// One run of the task set under one policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunMetrics {
    /// Jobs logged over every task.
    pub jobs: u64,
    /// Jobs with negative slack.
    pub misses: u64,
    /// Misses that were part of a string of at least [`HOLD_STRING`].
    pub held: u64,
    /// Longest string of consecutive misses of one task (periods).
    pub longest: u64,
    /// Largest lateness: how far past its deadline the latest job ended
    /// (us; 0 without a miss).
    pub worst_late_us: u64,
    /// The host's steal over the run, summed over the CPUs (ns); None when
    /// `/proc/stat` has no steal field.
    pub steal_ns: Option<u64>,
}

impl RunMetrics {
    /// The figures of `log`'s jobs, with `steal_ns` measured around them.
    pub fn of(log: &RtAppLog, steal_ns: Option<u64>) -> RunMetrics {
        let mut m = RunMetrics {
            jobs: 0,
            misses: 0,
            held: 0,
            longest: 0,
            worst_late_us: 0,
            steal_ns,
        };
        for t in &log.threads {
            m.add_thread(&t.jobs);
        }
        m
    }

    fn add_thread(&mut self, jobs: &[JobRecord]) {
        let mut string = 0;
        for j in jobs {
            self.jobs += 1;
            if j.missed() {
                self.misses += 1;
                string += 1;
                self.worst_late_us = self.worst_late_us.max(j.slack_us.unsigned_abs());
            } else {
                self.end_string(string);
                string = 0;
            }
        }
        self.end_string(string);
    }

    fn end_string(&mut self, len: u64) {
        self.longest = self.longest.max(len);
        if len >= HOLD_STRING {
            self.held += len;
        }
    }

    /// Misses per 10,000 jobs.
    pub fn misses_per_10k(&self) -> f64 {
        per_10k(self.misses, self.jobs)
    }

    /// Held misses per 10,000 jobs.
    pub fn held_per_10k(&self) -> f64 {
        per_10k(self.held, self.jobs)
    }

    /// Steal in ms (NaN when unknown).
    pub fn steal_ms(&self) -> f64 {
        self.steal_ns.map_or(f64::NAN, |s| s as f64 / 1e6)
    }

    /// The progress line of one run.
    pub fn line(&self) -> String {
        let steal = match self.steal_ms() {
            ms if ms.is_finite() => format!("{ms:.0} ms"),
            _ => "-".into(),
        };
        format!(
            "{} jobs, {:.1} misses/10k, {:.1} held/10k, longest string {}, worst {:.1} ms late, host steal {steal}",
            self.jobs,
            self.misses_per_10k(),
            self.held_per_10k(),
            self.longest,
            self.worst_late_us as f64 / 1e3
        )
    }
}

fn per_10k(n: u64, of: u64) -> f64 {
    if of == 0 {
        f64::NAN
    } else {
        n as f64 * 1e4 / of as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtapp::ThreadLog;

    fn job(slack_us: i64) -> JobRecord {
        JobRecord {
            index: 0,
            release_ns: 0,
            start_ns: 0,
            end_ns: 0,
            run_us: 100,
            slack_us,
            response_us: 0,
            wakeup_latency_us: 0,
        }
    }

    fn thread(slacks: &[i64]) -> ThreadLog {
        ThreadLog {
            task: "t0".into(),
            instance: 0,
            policy: "SCHED_FIFO".into(),
            period_us: 1000,
            jobs: slacks.iter().map(|&s| job(s)).collect(),
        }
    }

    #[test]
    fn strings_of_misses_are_counted_per_thread() {
        let log = RtAppLog {
            threads: vec![
                thread(&[5, -1, -2, 3, -4, -5, -6, -7, 8]),
                // A string at the end of a thread's log ends there, and
                // does not join the next thread's first miss.
                thread(&[-1, 2, -30, -3]),
            ],
        };
        let m = RunMetrics::of(&log, Some(20_000_000));
        assert_eq!(m.jobs, 13);
        assert_eq!(m.misses, 9);
        assert_eq!(m.longest, 4);
        assert_eq!(m.held, 4);
        assert_eq!(m.worst_late_us, 30);
        assert!((m.misses_per_10k() - 9.0 * 1e4 / 13.0).abs() < 1e-9);
        assert_eq!(m.steal_ms(), 20.0);
    }

    #[test]
    fn a_run_without_jobs_has_no_rate() {
        let m = RunMetrics::of(&RtAppLog { threads: vec![] }, None);
        assert!(m.misses_per_10k().is_nan());
        assert!(m.steal_ms().is_nan());
        assert!(m.line().contains("host steal -"));
    }
}
