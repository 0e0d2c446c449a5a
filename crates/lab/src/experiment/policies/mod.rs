//! `resound experiment`: compares how the audio graph keeps its deadlines
//! under each scheduling policy (no real-time scheduling, SCHED_FIFO,
//! SCHED_DEADLINE reservations without and with reclaiming) while a
//! competing periodic real-time task runs at a higher priority: the
//! experiment of Table 2 of the paper on adaptive resource reservations for
//! JACK, and of section 4.5 of the thesis "Design and development of a
//! mechanism for low-latency real time audio processing on Linux", as one
//! command.
//!
//! For each scheduling policy it starts a fresh `resoundd` in sync mode on the
//! dummy driver in a private socket directory, a chain of `resound-tool load`
//! client processes (`system:capture_1 -> load1 -> ... -> loadN ->
//! system:playback_1`, each busy for a fraction of the period), and a
//! competing periodic real-time task (`resound-tool rtapp`) at a higher
//! SCHED_FIFO priority than the audio threads. After a warm-up it measures:
//!
//! * xruns: the server's count, difference over the measurement;
//! * end-of-chain time: `finish_ns` of the last load client relative to the
//!   start of the same cycle (the header's `cycle_start_ns`), from a poller
//!   thread in this process that reads the activation records of an opened
//!   but never activated probe client (so the probe adds no node to the
//!   graph, and late cycles are seen with their real finish times instead of
//!   being skipped as a downstream node would skip them);
//! * the competing task's deadline misses and response times (its final JSON);
//! * bandwidth efficiency: mean budget allocated per audio period (status
//!   `reservations`, polled every 100 ms) / mean CPU used per cycle (sum of
//!   `cpu_ns` of the driver's and the load clients' records).
//!
//! Every process and the temporary directory are cleaned up by drop guards,
//! on error paths and on SIGINT/SIGTERM too; children also get a parent-death
//! signal in case this process is killed outright.
//!
//! Modules: [`settings`] (policies and options), `runner` (servers, clients
//! and the measurement of one policy), `poller` (the per-cycle end-of-chain
//! poller thread), `budget` and `machine` (what the status and `/proc` say),
//! [`report`] (results, table, JSON). [`run`] runs on the main thread.

mod budget;
mod machine;
mod poller;
pub mod report;
mod runner;
pub mod settings;

pub use budget::reserved_budgets;
pub use report::{format_table, percentile, PolicyResult, RtReport};
pub use settings::{ExperimentArgs, Policy};

use crate::harness::{remove_stale_dirs, Bins};
use report::format_details;
use resound_shm::time::frames_to_ns;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Checks the options that clap cannot check alone.
fn validate(a: &ExperimentArgs) -> Result<(), String> {
    if a.policies.is_empty() {
        return Err("no policies given".into());
    }
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.warmup.is_finite() && a.warmup >= 0.0) {
        return Err("--seconds must be > 0 and --warmup >= 0".into());
    }
    let Some(c) = a.cpu else {
        return Ok(());
    };
    if c >= libc::CPU_SETSIZE as usize {
        return Err(format!("--cpu {c} is out of range"));
    }
    if a.policies
        .iter()
        .any(|p| matches!(p, Policy::Deadline | Policy::DeadlineReclaim))
    {
        return Err(
            "--cpu cannot be combined with the deadline policies: the kernel refuses \
            SCHED_DEADLINE to threads whose affinity is narrower than their root domain \
            (use an exclusive cpuset instead)"
                .into(),
        );
    }
    Ok(())
}

/// The setup of a run, as the title line and the JSON `config` show it.
struct Setup {
    /// Audio period (us).
    period_us: f64,
    /// CPUs of the machine.
    cpus: usize,
    /// The competing task's scheduling ("SCHED_FIFO 50").
    rt_sched: String,
}

impl Setup {
    fn of(a: &ExperimentArgs) -> Setup {
        Setup {
            period_us: frames_to_ns(a.period.into(), a.rate) as f64 / 1000.0,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            rt_sched: if a.rt_fifo > 0 {
                format!("SCHED_FIFO {}", a.rt_fifo)
            } else {
                "SCHED_OTHER".into()
            },
        }
    }

    /// The title line of the report.
    fn title(&self, a: &ExperimentArgs) -> String {
        let competing = if a.rt_run_us > 0 {
            format!(
                "competing task {}/{} us at {}",
                a.rt_run_us, a.rt_period_us, self.rt_sched
            )
        } else {
            "no competing task".into()
        };
        let placement = match a.cpu {
            Some(c) => format!("all pinned to CPU {c} of {}", self.cpus),
            None => format!("{} CPUs", self.cpus),
        };
        format!(
            "resound experiment: {} clients x {}% in a chain, {} Hz / {} frames ({:.0} us), {competing}, {} s per policy, {placement}",
            a.clients, a.busy, a.rate, a.period, self.period_us, a.seconds
        )
    }

    /// Writes the options and the results as JSON to `path`.
    fn write_json(
        &self,
        a: &ExperimentArgs,
        rows: &[PolicyResult],
        path: &std::path::Path,
    ) -> Result<(), String> {
        let v = json!({
            "config": {
                "clients": a.clients, "busy_pct": a.busy, "rate": a.rate, "frames": a.period,
                "period_us": self.period_us, "seconds": a.seconds, "warmup": a.warmup,
                "rt_period_us": a.rt_period_us, "rt_run_us": a.rt_run_us, "rt_sched": self.rt_sched,
                "fifo_priority": a.priority, "server_args": a.server_args,
                "cpus": self.cpus, "pinned_cpu": a.cpu,
            },
            "results": rows.iter().map(PolicyResult::to_json).collect::<Vec<_>>(),
        });
        let s = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        std::fs::write(path, s + "\n").map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Runs every policy in turn (stopping early on SIGINT/SIGTERM); a policy
/// that fails gives a row with its error.
fn run_policies(a: &ExperimentArgs, bins: &Bins, intr: &AtomicBool) -> Vec<PolicyResult> {
    let mut rows = Vec::new();
    for (i, &p) in a.policies.iter().enumerate() {
        runner::progress(&format!(
            "policy {} of {}: {}",
            i + 1,
            a.policies.len(),
            p.name()
        ));
        let r = runner::run_policy(a, bins, p, intr).unwrap_or_else(|e| PolicyResult {
            policy: p.name().to_string(),
            error: Some(e),
            ..Default::default()
        });
        if let Some(e) = &r.error {
            runner::progress(&format!("{}: failed: {e}", p.name()));
        }
        rows.push(r);
        if intr.load(Ordering::Acquire) {
            break;
        }
    }
    rows
}

/// The report: title, table, details and the legend.
fn report_text(title: &str, rows: &[PolicyResult]) -> String {
    let mut out = format!("{title}\n");
    out += &format_table(rows);
    out += &format_details(rows);
    out += "  end = last client's finish - cycle start; lost = cycles the last client never finished;\n";
    out += "  rt misses = competing jobs past their deadline / jobs; budget/used = mean reserved budget per period / mean CPU used per cycle\n";
    out += "  by the reserved threads; (k/n): only k of the graph's n threads held a reservation\n";
    out
}

/// Runs the experiment.
pub fn run(a: ExperimentArgs) -> Result<(), String> {
    validate(&a)?;
    let bins = Bins::beside_current_exe()?;
    remove_stale_dirs(runner::DIR_TAG);
    let intr = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, intr.clone()).map_err(|e| e.to_string())?;
    }
    let setup = Setup::of(&a);
    let title = setup.title(&a);
    runner::progress(&title);
    let rows = run_policies(&a, &bins, &intr);
    print!("{}", report_text(&title, &rows));
    if let Some(path) = &a.json {
        setup.write_json(&a, &rows, path)?;
    }
    if intr.load(Ordering::Acquire) {
        return Err("interrupted".into());
    }
    let failed = rows.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        return Err(format!("{failed} policy run(s) failed"));
    }
    Ok(())
}
