//! The competing real-time load of one run: the plan's rt-app tasks, run
//! by Debian's rt-app from the JSON the [`crate::rtapp`] module generates,
//! with each task's policy (SCHED_OTHER, SCHED_FIFO at its priority, or its
//! own SCHED_DEADLINE reservation by the papers' rule: period = the task's
//! period, runtime = 1.05 x its run time), and its per-job log read back as
//! the experiment's [`JobSample`]s. Runs on the command's main thread.

use super::plan::{Plan, RtTaskPlan};
use crate::experiment::results::JobSample;
use crate::experiment::scenario::RtPolicyName;
use crate::harness::ChildOptions;
use crate::rtapp::{Calibration, RtApp, RtAppSpec, RtPolicy, RtTask};
use std::path::Path;
use std::time::Duration;

/// The running rt-app of a run.
pub struct Competing {
    rtapp: RtApp,
}

/// The rt-app task of a planned one.
fn task_of(t: &RtTaskPlan) -> RtTask {
    let policy = match t.policy {
        RtPolicyName::Other => RtPolicy::Other,
        RtPolicyName::Fifo => RtPolicy::Fifo {
            priority: t.priority,
        },
        RtPolicyName::Deadline | RtPolicyName::DeadlineReclaim => {
            RtTask::reservation(t.period_us, t.run_us)
        }
    };
    RtTask {
        name: t.name.clone(),
        period_us: t.period_us,
        run_us: t.run_us,
        policy,
        instances: t.instances,
        start_s: t.start_s,
        stop_s: t.stop_s,
    }
}

/// The rt-app spec of a plan (None without tasks).
pub fn spec_of(plan: &Plan) -> Option<RtAppSpec> {
    (!plan.rtapp.is_empty()).then(|| RtAppSpec {
        tasks: plan.rtapp.iter().map(task_of).collect(),
        duration_s: plan.duration_s,
    })
}

/// How the tasks are described in the report's setup.
pub fn describe(plan: &Plan) -> Vec<String> {
    plan.rtapp
        .iter()
        .map(|t| {
            let sched = match t.policy {
                RtPolicyName::Other => "SCHED_OTHER".to_string(),
                RtPolicyName::Fifo => format!("SCHED_FIFO {}", t.priority),
                RtPolicyName::Deadline | RtPolicyName::DeadlineReclaim => {
                    let reclaim = if t.policy == RtPolicyName::DeadlineReclaim {
                        " reclaim"
                    } else {
                        ""
                    };
                    match RtTask::reservation(t.period_us, t.run_us) {
                        RtPolicy::Deadline {
                            runtime_us,
                            period_us,
                            ..
                        } => format!("SCHED_DEADLINE {runtime_us}/{period_us} us{reclaim}"),
                        _ => "SCHED_DEADLINE".into(),
                    }
                }
            };
            let stop = t.stop_s.map_or(String::new(), |s| format!(" to {s:.1} s"));
            format!(
                "rt-app {} x{}: {} us every {} us, {sched}, from {:.1} s{stop}",
                t.name, t.instances, t.run_us, t.period_us, t.start_s
            )
        })
        .collect()
}

/// Sets GRUB reclaiming on the threads of the `deadline+reclaim` tasks
/// (rt-app cannot: its JSON has no flags), keeping their reservation.
fn add_reclaim(plan: &Plan, rtapp: &RtApp) -> Result<(), String> {
    let threads = rtapp.threads();
    for t in plan
        .rtapp
        .iter()
        .filter(|t| t.policy == RtPolicyName::DeadlineReclaim)
    {
        let RtPolicy::Deadline {
            runtime_us,
            period_us,
            deadline_us,
        } = RtTask::reservation(t.period_us, t.run_us)
        else {
            continue;
        };
        let with_reclaim = resound_sched::Policy::Deadline {
            runtime_ns: runtime_us * 1000,
            deadline_ns: deadline_us * 1000,
            period_ns: period_us * 1000,
            reclaim: true,
        };
        for (_, tid) in threads.iter().filter(|(name, _)| *name == t.name) {
            resound_sched::policy::apply(*tid, &with_reclaim)
                .map_err(|e| format!("rt-app task {}: reclaiming: {e}", t.name))?;
        }
    }
    Ok(())
}

impl Competing {
    /// Starts rt-app with the plan's tasks (None when it has none).
    pub fn start(
        plan: &Plan,
        dir: &Path,
        cal: &Calibration,
        opts: &ChildOptions,
    ) -> Result<Option<Competing>, String> {
        let Some(spec) = spec_of(plan) else {
            return Ok(None);
        };
        let mut rtapp = RtApp::start(&spec, dir, cal, opts)?;
        rtapp.wait_running(Duration::from_secs(10))?;
        add_reclaim(plan, &rtapp)?;
        Ok(Some(Competing { rtapp }))
    }

    /// An error when rt-app failed (it ends on its own, well, once its
    /// timeline's tasks are all done).
    pub fn check_alive(&mut self) -> Result<(), String> {
        match self.rtapp.failed() {
            Some(why) => Err(format!("rt-app exited during the run: {why}")),
            None => Ok(()),
        }
    }

    /// Stops rt-app and returns its jobs, times from `t0_ns`.
    pub fn finish(self, t0_ns: u64) -> Result<Vec<JobSample>, String> {
        let log = self.rtapp.stop()?;
        let mut jobs = Vec::new();
        for th in &log.threads {
            let task = format!("{}-{}", th.task, th.instance);
            jobs.extend(th.jobs.iter().map(|j| JobSample {
                task: task.clone(),
                t_s: j.release_ns.saturating_sub(t0_ns) as f64 / 1e9,
                response_us: j.response_us as f64,
                slack_us: j.slack_us as f64,
            }));
        }
        Ok(jobs)
    }
}
