//! [`RtApp`]: one running `rt-app` process (a [`Child`] of the lab harness,
//! stopped and reaped on drop), its JSON and logs in a directory of the
//! caller's. Runs on the caller's thread.
//!
//! rt-app sets each thread's policy itself (`pthread_setschedparam` for
//! SCHED_FIFO, `sched_setattr` for SCHED_DEADLINE) and exits with a failure
//! when the kernel refuses; it prints no errno we can trust (it overwrites
//! `errno` with the syscall's -1), so on such a failure [`RtApp`] repeats the
//! request from helper threads of its own to say why (EBUSY: admission
//! control; EPERM: no permission). On SIGTERM or SIGINT rt-app's handler
//! stops the threads after their current job, closes their logs (flushing
//! them) and exits with success.

use super::{Calibration, RtAppLog, RtAppSpec, RtPolicy};
use crate::harness::{Child, ChildOptions, StderrMode};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Debian's rt-app on the PATH, or an error saying how to install it.
pub fn rtapp_binary() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("rt-app"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "rt-app is not installed (Debian package rt-app; scripts/setup.sh installs it)".into()
        })
}

/// A running rt-app.
pub struct RtApp {
    child: Child,
    dir: PathBuf,
    spec: RtAppSpec,
}

impl RtApp {
    /// Writes `spec`'s JSON to `dir/rtapp.json` (creating `dir`, removing
    /// the logs of an earlier run there) and starts rt-app on it. rt-app's
    /// stderr is kept for error messages (echoed when `opts` asks for it).
    pub fn start(
        spec: &RtAppSpec,
        dir: &Path,
        cal: &Calibration,
        opts: &ChildOptions,
    ) -> Result<RtApp, String> {
        spec.validate()?;
        if let (Some(cpu), Some(t)) = (
            opts.cpu,
            spec.tasks
                .iter()
                .find(|t| matches!(t.policy, RtPolicy::Deadline { .. })),
        ) {
            return Err(format!(
                "task {} is SCHED_DEADLINE and rt-app would be pinned to CPU {cpu}: the kernel \
                 refuses a reservation to a thread whose affinity is narrower than its root domain",
                t.name
            ));
        }
        let bin = rtapp_binary()?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        remove_old_logs(dir)?;
        let file = dir.join("rtapp.json");
        let text =
            serde_json::to_string_pretty(&spec.to_json(dir, cal)).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut opts = opts.clone();
        opts.stderr = match opts.stderr {
            StderrMode::Keep { keep, echo } => StderrMode::Keep {
                keep: keep.max(64),
                echo,
            },
            StderrMode::Inherit => StderrMode::Keep {
                keep: 64,
                echo: None,
            },
        };
        let mut cmd = Command::new(bin);
        cmd.arg(&file);
        let child = Child::spawn(cmd, "rt-app", &opts)?;
        Ok(RtApp {
            child,
            dir: dir.to_path_buf(),
            spec: spec.clone(),
        })
    }

    /// rt-app's process id.
    pub fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// Its directory (JSON and logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What it runs.
    pub fn spec(&self) -> &RtAppSpec {
        &self.spec
    }

    /// Its threads now: (thread name, tid).
    pub fn threads(&self) -> Vec<(String, i32)> {
        let task_dir = format!("/proc/{}/task", self.pid());
        let Ok(rd) = std::fs::read_dir(task_dir) else {
            return Vec::new();
        };
        rd.flatten()
            .filter_map(|e| {
                let tid = e.file_name().to_str()?.parse().ok()?;
                let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
                Some((comm.trim().to_string(), tid))
            })
            .collect()
    }

    /// Waits until every task has its threads (`instances` of them, named
    /// after it) and the kernel reports its policy for each; an error when
    /// rt-app exits first (with the reason) or `timeout` passes (with what
    /// was seen).
    pub fn wait_running(&mut self, timeout: Duration) -> Result<(), String> {
        let t0 = Instant::now();
        loop {
            if let Some(e) = self.exited() {
                return Err(e);
            }
            let missing = self.not_running();
            if missing.is_empty() {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(format!(
                    "rt-app's threads were not all running within {timeout:?}: {}",
                    missing.join("; ")
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// For each task short of threads with its policy: what the kernel shows.
    fn not_running(&self) -> Vec<String> {
        let threads = self.threads();
        let mut out = Vec::new();
        for t in &self.spec.tasks {
            let want = t.policy.to_sched();
            let seen: Vec<String> = threads
                .iter()
                .filter(|(comm, _)| *comm == t.name)
                .map(|(_, tid)| resound_sched::policy::describe_thread(*tid))
                .collect();
            let ok = seen.iter().filter(|d| **d == want.describe()).count();
            if ok < t.instances as usize {
                out.push(format!(
                    "task {}: {ok} of {} threads under {} (seen: {seen:?})",
                    t.name,
                    t.instances,
                    want.describe()
                ));
            }
        }
        out
    }

    /// Why rt-app has exited, if it has (None while it runs).
    pub fn exited(&mut self) -> Option<String> {
        let st = self.child.exited()?;
        if st.success() {
            return Some(format!("rt-app exited ({st}): its tasks are done"));
        }
        Some(self.failure(&st.to_string()))
    }

    /// Why rt-app failed, if it exited unsuccessfully (None while it runs,
    /// and once it has ended well: a timeline's tasks all done).
    pub fn failed(&mut self) -> Option<String> {
        let st = self.child.exited()?;
        (!st.success()).then(|| self.failure(&st.to_string()))
    }

    /// The error for an rt-app that failed with `status`.
    fn failure(&mut self, status: &str) -> String {
        self.child.log().wait_closed(Duration::from_secs(2));
        let tail = self.child.log().tail(20);
        let why = if tail.contains("sched_setattr") {
            deadline_refusal(&self.spec)
        } else if tail.contains("pthread_setschedparam") {
            "the kernel refused SCHED_FIFO (EPERM: it needs root or CAP_SYS_NICE \
             with an RLIMIT_RTPRIO at least the priority)"
                .to_string()
        } else {
            "see its output".to_string()
        };
        format!("rt-app failed ({status}): {why}:\n{tail}")
    }

    /// Stops rt-app (SIGTERM, which it handles by ending each thread after
    /// its current job and closing the logs) unless it has finished already,
    /// then parses its logs. An error if rt-app failed, had to be killed, or
    /// a task's threads left no log.
    pub fn stop(mut self) -> Result<RtAppLog, String> {
        let longest = self
            .spec
            .tasks
            .iter()
            .map(|t| t.period_us)
            .max()
            .unwrap_or(0);
        let grace = Duration::from_micros(2 * longest) + Duration::from_secs(3);
        let st = self.child.stop(grace)?;
        if !st.success() {
            return Err(self.failure(&st.to_string()));
        }
        let mut log = RtAppLog::read_dir(&self.dir)?;
        for t in &self.spec.tasks {
            let n = log.task(&t.name).len();
            if n != t.instances as usize {
                return Err(format!(
                    "rt-app left {n} logs for task {}, which has {} threads",
                    t.name, t.instances
                ));
            }
        }
        for th in &mut log.threads {
            if let Some(t) = self.spec.task(&th.task) {
                if matches!(t.policy, RtPolicy::Deadline { .. }) {
                    th.policy = t.policy.describe();
                }
            }
        }
        Ok(log)
    }
}

/// Removes `rtapp-*.log` files left in `dir` by an earlier run.
fn remove_old_logs(dir: &Path) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(super::LOG_BASENAME) && name.ends_with(".log") {
            std::fs::remove_file(e.path()).map_err(|e2| format!("{name}: {e2}"))?;
        }
    }
    Ok(())
}

/// Why the kernel refused `spec`'s SCHED_DEADLINE reservations: asks for
/// all of them again, at once, from helper threads (each leaves its
/// reservation before it ends).
fn deadline_refusal(spec: &RtAppSpec) -> String {
    let wanted: Vec<resound_sched::Policy> = spec
        .tasks
        .iter()
        .filter(|t| matches!(t.policy, RtPolicy::Deadline { .. }))
        .flat_map(|t| std::iter::repeat_n(t.policy.to_sched(), t.instances as usize))
        .collect();
    let list = spec
        .tasks
        .iter()
        .filter(|t| matches!(t.policy, RtPolicy::Deadline { .. }))
        .map(|t| format!("{} x{} {}", t.name, t.instances, t.policy.describe()))
        .collect::<Vec<_>>()
        .join(", ");
    match probe_all(&wanted) {
        Err(e) if e.kind == resound_sched::policy::SchedErrorKind::Busy => format!(
            "the kernel refused the SCHED_DEADLINE reservations ({list}): EBUSY, admission \
             control: with the reservations already on this machine they exceed the \
             SCHED_DEADLINE bandwidth (sched_rt_runtime_us / sched_rt_period_us of each CPU)"
        ),
        Err(e) => format!("the kernel refused the SCHED_DEADLINE reservations ({list}): {e}"),
        Ok(()) => format!(
            "the kernel refused a SCHED_DEADLINE reservation ({list}); the same reservations \
             are admitted now, so the bandwidth was taken at that moment (admission control, EBUSY)"
        ),
    }
}

/// Takes every policy in `wanted` at once on helper threads, then leaves
/// them; the first refusal.
fn probe_all(wanted: &[resound_sched::Policy]) -> Result<(), resound_sched::SchedError> {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let release = std::sync::Arc::new(std::sync::Barrier::new(wanted.len() + 1));
    let handles: Vec<_> = wanted
        .iter()
        .map(|p| {
            let (p, tx, release) = (*p, done_tx.clone(), release.clone());
            std::thread::spawn(move || {
                let r = resound_sched::apply(0, &p);
                let _ = tx.send(r.clone());
                release.wait();
                if r.is_ok() {
                    let _ = resound_sched::policy::drop_own_reservation();
                }
            })
        })
        .collect();
    let results: Vec<_> = (0..wanted.len())
        .filter_map(|_| done_rx.recv().ok())
        .collect();
    release.wait();
    for h in handles {
        let _ = h.join();
    }
    results.into_iter().collect()
}
