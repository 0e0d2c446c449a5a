//! rt-app's per-thread logs, parsed into per-job records. Runs on the
//! caller's thread after rt-app has exited.
//!
//! rt-app 1.0 writes one file per thread, `{logdir}/{log_basename}-{task}-{index}.log`
//! (`index` counts threads over the whole spec), headed by
//! `# Policy : SCHED_FIFO priority : 50` and a column line, then one line per
//! iteration of the thread's phase, that is per job here (module `json`
//! builds one phase of "run, then absolute timer"). Its columns, as rt-app's
//! source (`thread_body`, `run_event`, `log_timing`) computes them:
//!
//! | column       | meaning                                                             |
//! |--------------|---------------------------------------------------------------------|
//! | `idx`        | the thread's index (not the job's)                                  |
//! | `perf`       | calibrated loops run                                                |
//! | `run`        | wall time spent in the run event (us), preemption included          |
//! | `period`     | `end - start` (us)                                                  |
//! | `start`      | CLOCK_MONOTONIC (us since boot) when the iteration began: the job's start |
//! | `end`        | CLOCK_MONOTONIC (us) when the iteration ended, *after* the timer sleep |
//! | `rel_st`     | `start` minus rt-app's own start (us)                               |
//! | `slack`      | timer target (the next release, the job's deadline) minus the time the run finished (us); negative = deadline miss |
//! | `c_duration` | configured run time (us)                                            |
//! | `c_period`   | configured timer period (us)                                        |
//! | `wu_lat`     | how late the timer woke the thread (us); 0 when it did not sleep    |
//!
//! So the log has no release times: with an absolute timer job `k` is
//! released at `t_first + k * period`, where `t_first` is the thread's
//! (common start + delay). [`parse_thread_log`] recovers `t_first` from each
//! job's timer target (the next release): `end - wu_lat` for a job that
//! slept to it, `end + slack` for a late one (which did not sleep).
//! All times are microseconds of CLOCK_MONOTONIC, the clock of
//! `resound_shm::time::monotonic_ns` and of the audio server's cycle times.

use super::summary::summarize;
use super::RtSummary;
use std::path::Path;

/// Prefix of the log files rt-app writes for [`super::RtApp`].
pub const LOG_BASENAME: &str = "rtapp";

/// One job of one rt-app thread (one line of its log). Times are absolute
/// CLOCK_MONOTONIC nanoseconds, microsecond-precise (rt-app logs us).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobRecord {
    /// Job number in its thread, from 0 (the line's position; rt-app's
    /// `idx` column is the thread's index).
    pub index: u64,
    /// When the timer released the job: `t_first + index * period`.
    pub release_ns: u64,
    /// When the job started running (rt-app's `start`).
    pub start_ns: u64,
    /// When its run ended: its deadline (the next release) minus rt-app's
    /// slack. (rt-app's `end` column is later: after the timer sleep.)
    pub end_ns: u64,
    /// rt-app's `run`: wall time from the start to the end of the run
    /// (preemption included).
    pub run_us: u64,
    /// rt-app's `slack`: deadline minus end; negative = deadline miss (how
    /// rt-app counts a miss).
    pub slack_us: i64,
    /// `end - release`.
    pub response_us: u64,
    /// `start - release`: the timer's wake-up latency when the job before
    /// finished in time, else the lateness that job carried over.
    pub wakeup_latency_us: u64,
}

impl JobRecord {
    /// The job missed its deadline (rt-app's slack < 0).
    pub fn missed(&self) -> bool {
        self.slack_us < 0
    }
}

/// The jobs of one rt-app thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadLog {
    /// Its task's name.
    pub task: String,
    /// Which of the task's threads (0..instances), in rt-app's thread order.
    pub instance: u32,
    /// Its scheduling as its log header states it (`"SCHED_FIFO 50"`,
    /// `"SCHED_OTHER"`, `"SCHED_DEADLINE"`; [`super::RtApp::stop`] adds the
    /// reservation's parameters to the latter).
    pub policy: String,
    /// Its configured period (us), from the `c_period` column (0 without jobs).
    pub period_us: u64,
    /// Its jobs in order.
    pub jobs: Vec<JobRecord>,
}

impl ThreadLog {
    /// Jobs, misses, response-time percentiles and the smallest slack.
    pub fn summary(&self) -> RtSummary {
        summarize(self.jobs.iter())
    }

    /// The same thread without the jobs released before `t_ns` (a warm-up).
    pub fn released_from(&self, t_ns: u64) -> ThreadLog {
        ThreadLog {
            jobs: self
                .jobs
                .iter()
                .filter(|j| j.release_ns >= t_ns)
                .copied()
                .collect(),
            ..self.clone()
        }
    }
}

/// The logs of every thread of one rt-app run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RtAppLog {
    /// One per thread, by task name then instance.
    pub threads: Vec<ThreadLog>,
}

impl RtAppLog {
    /// Reads every `{LOG_BASENAME}-{task}-{index}.log` in `dir`.
    pub fn read_dir(dir: &Path) -> Result<RtAppLog, String> {
        let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut found = Vec::new();
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if let Some((task, index)) = split_log_name(&name) {
                let text = std::fs::read_to_string(ent.path())
                    .map_err(|e| format!("{}: {e}", ent.path().display()))?;
                let log = parse_thread_log(&task, 0, &text)
                    .map_err(|e| format!("{}: {e}", ent.path().display()))?;
                found.push((task, index, log));
            }
        }
        found.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        let mut threads: Vec<ThreadLog> = Vec::new();
        for (_, _, mut log) in found {
            log.instance = threads.iter().filter(|t| t.task == log.task).count() as u32;
            threads.push(log);
        }
        Ok(RtAppLog { threads })
    }

    /// Totals over all threads.
    pub fn summary(&self) -> RtSummary {
        summarize(self.threads.iter().flat_map(|t| t.jobs.iter()))
    }

    /// The threads of task `name`.
    pub fn task(&self, name: &str) -> Vec<&ThreadLog> {
        self.threads.iter().filter(|t| t.task == name).collect()
    }

    /// Without the jobs released before `t_ns` (a warm-up).
    pub fn released_from(&self, t_ns: u64) -> RtAppLog {
        RtAppLog {
            threads: self.threads.iter().map(|t| t.released_from(t_ns)).collect(),
        }
    }

    /// Writes every job as CSV: `task,instance,policy,index,release_ns,
    /// start_ns,end_ns,run_us,slack_us,response_us,wakeup_latency_us`.
    pub fn write_csv(&self, path: &Path) -> Result<(), String> {
        let mut s = String::from(
            "task,instance,policy,index,release_ns,start_ns,end_ns,run_us,slack_us,response_us,wakeup_latency_us\n",
        );
        for t in &self.threads {
            for j in &t.jobs {
                s.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{},{}\n",
                    t.task,
                    t.instance,
                    t.policy,
                    j.index,
                    j.release_ns,
                    j.start_ns,
                    j.end_ns,
                    j.run_us,
                    j.slack_us,
                    j.response_us,
                    j.wakeup_latency_us
                ));
            }
        }
        std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// `rtapp-{task}-{index}.log` -> (task, index).
fn split_log_name(name: &str) -> Option<(String, u32)> {
    let stem = name
        .strip_prefix(LOG_BASENAME)?
        .strip_prefix('-')?
        .strip_suffix(".log")?;
    let (task, index) = stem.rsplit_once('-')?;
    Some((task.to_string(), index.parse().ok()?))
}

/// One log line's columns (all us).
#[derive(Debug, Clone, Copy)]
struct Line {
    run: u64,
    start: u64,
    end: u64,
    slack: i64,
    c_period: u64,
    wu_lat: u64,
}

fn parse_line(l: &str) -> Result<Line, String> {
    let f: Vec<&str> = l.split_whitespace().collect();
    if f.len() != 11 {
        return Err(format!("expected 11 columns, got {}: {l:?}", f.len()));
    }
    let u = |i: usize| {
        f[i].parse::<u64>()
            .map_err(|_| format!("column {} is not a number: {l:?}", i + 1))
    };
    let slack = f[7]
        .parse::<i64>()
        .map_err(|_| format!("slack is not a number: {l:?}"))?;
    Ok(Line {
        run: u(2)?,
        start: u(4)?,
        end: u(5)?,
        slack,
        c_period: u(9)?,
        wu_lat: u(10)?,
    })
}

/// The policy in a `# Policy : SCHED_FIFO priority : 50` header line.
fn parse_policy(l: &str) -> Option<String> {
    let rest = l.strip_prefix("# Policy :")?.trim();
    let (name, prio) = match rest.split_once("priority :") {
        Some((n, p)) => (n.trim(), Some(p.trim())),
        None => (rest, None),
    };
    Some(match (name, prio) {
        ("SCHED_FIFO" | "SCHED_RR", Some(p)) => format!("{name} {p}"),
        ("SCHED_OTHER", Some(p)) if p != "0" => format!("SCHED_OTHER nice {p}"),
        _ => name.to_string(),
    })
}

/// Parses one thread's log text (task `task`, instance `instance`).
pub fn parse_thread_log(task: &str, instance: u32, text: &str) -> Result<ThreadLog, String> {
    let mut policy = None;
    let mut lines = Vec::new();
    for (n, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        if l.starts_with('#') {
            policy = policy.or_else(|| parse_policy(l));
            continue;
        }
        lines.push(parse_line(l).map_err(|e| format!("line {}: {e}", n + 1))?);
    }
    let policy = policy.ok_or("no \"# Policy :\" header: not an rt-app log")?;
    let period_us = lines.first().map_or(0, |l| l.c_period);
    if lines.iter().any(|l| l.c_period != period_us) {
        return Err("the timer period changes between jobs: not one periodic phase".into());
    }
    Ok(ThreadLog {
        task: task.to_string(),
        instance,
        policy,
        period_us,
        jobs: jobs_of(&lines, period_us),
    })
}

/// The thread's first release (us), from each job's timer target (the
/// release of job k+1): `end - wu_lat` when the job slept to it, `end +
/// slack` when it was late (no sleep: `end` is when the run ended and the
/// negative slack how far past the target). The median over the jobs of
/// target minus `(k+1)` periods, never after the first job's start.
fn first_release(lines: &[Line], period: u64) -> u64 {
    let mut c: Vec<u64> = lines
        .iter()
        .enumerate()
        .filter_map(|(k, l)| {
            let target = if l.slack > 0 {
                l.end.checked_sub(l.wu_lat)?
            } else {
                l.end.checked_sub(l.slack.unsigned_abs())?
            };
            target.checked_sub((k as u64 + 1) * period)
        })
        .collect();
    let start0 = lines.first().map_or(0, |l| l.start);
    if c.is_empty() {
        return start0;
    }
    c.sort_unstable();
    c[c.len() / 2].min(start0)
}

fn jobs_of(lines: &[Line], period: u64) -> Vec<JobRecord> {
    let t_first = first_release(lines, period);
    lines
        .iter()
        .enumerate()
        .map(|(k, l)| {
            let release = t_first + k as u64 * period;
            let deadline = release + period;
            let end = (deadline as i64 - l.slack).max(l.start as i64) as u64;
            JobRecord {
                index: k as u64,
                release_ns: release * 1000,
                start_ns: l.start * 1000,
                end_ns: end * 1000,
                run_us: l.run,
                slack_us: l.slack,
                response_us: end.saturating_sub(release),
                wakeup_latency_us: l.start.saturating_sub(release),
            }
        })
        .collect()
}
