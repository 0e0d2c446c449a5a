//! [`RtAppSpec::to_json`]: the spec in rt-app 1.0's JSON grammar (see
//! `/usr/share/doc/rt-app/tutorial.txt`). Pure; runs on the caller's thread.
//!
//! Each task becomes one thread object:
//!
//! ```json
//! "name": { "instance": 2, "policy": "SCHED_FIFO", "priority": 50,
//!           "delay": 500000, "loop": 1,
//!           "phases": { "job": { "loop": 200, "run": 1000,
//!               "timer": { "ref": "unique", "period": 10000, "mode": "absolute" } } } }
//! ```
//!
//! * `"run"` (not `"runtime"`): calibrated loops, so a job is the same amount
//!   of CPU work whether or not it is preempted (`"runtime"` busy-waits on
//!   the wall clock and would count preemption as work);
//! * the `"unique"` timer gives every instance its own timer, and
//!   `"absolute"` mode keeps the releases at `start + k * period` after a
//!   late job (the papers' periodic tasks); the timer follows the run, so the
//!   slack rt-app logs for a job is its deadline (the next release) minus its
//!   finish;
//! * `"delay"` (us after rt-app's common start) releases the first job at
//!   `start_s`; the phase `"loop"` is the number of jobs up to `stop_s`, and
//!   the thread `"loop": 1` makes the thread exit after them (in rt-app 1.0 a
//!   thread without `"phases"` ignores `"loop"` and runs forever);
//! * global `"duration": -1`: rt-app exits when its last thread is done;
//! * no `"log_size"`: rt-app 1.0 then writes each job's line to its log file
//!   as the job ends. (Its parser compares the `"log_size"` strings with an
//!   inverted `strcmp` test, so `"file"` *disables* the logs.)

use super::{Calibration, RtAppSpec, RtPolicy, RtTask, LOG_BASENAME};
use serde_json::{json, Map, Value};
use std::path::Path;

impl RtAppSpec {
    /// rt-app's JSON for this spec, writing its logs to `log_dir` and using
    /// `calibration`'s ns per loop (so rt-app skips its own calibration).
    /// Call [`RtAppSpec::validate`] first.
    pub fn to_json(&self, log_dir: &Path, calibration: &Calibration) -> Value {
        let mut tasks = Map::new();
        for t in &self.tasks {
            tasks.insert(t.name.clone(), task_json(t, self.duration_s));
        }
        json!({
            "global": {
                "duration": -1,
                "calibration": calibration.ns_per_loop(),
                "default_policy": "SCHED_OTHER",
                "logdir": log_dir.display().to_string(),
                "log_basename": LOG_BASENAME,
                "lock_pages": false,
                "ftrace": false,
                "gnuplot": false,
            },
            "tasks": tasks,
        })
    }
}

/// One task's thread object.
fn task_json(t: &RtTask, duration_s: f64) -> Value {
    let mut o = Map::new();
    o.insert("instance".into(), json!(t.instances));
    o.insert("policy".into(), json!(t.policy.rtapp_name()));
    match t.policy {
        RtPolicy::Other => {}
        RtPolicy::Fifo { priority } => {
            o.insert("priority".into(), json!(priority));
        }
        RtPolicy::Deadline {
            runtime_us,
            period_us,
            deadline_us,
        } => {
            o.insert("dl-runtime".into(), json!(runtime_us));
            o.insert("dl-period".into(), json!(period_us));
            o.insert("dl-deadline".into(), json!(deadline_us));
        }
    }
    let delay_us = (t.start_s * 1e6).round() as u64;
    if delay_us > 0 {
        o.insert("delay".into(), json!(delay_us));
    }
    o.insert("loop".into(), json!(1));
    o.insert(
        "phases".into(),
        json!({
            "job": {
                "loop": t.jobs(duration_s),
                "run": t.run_us,
                "timer": { "ref": "unique", "period": t.period_us, "mode": "absolute" },
            }
        }),
    );
    Value::Object(o)
}
