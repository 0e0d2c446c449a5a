//! `resound bench reservations`: what this machine does to a
//! SCHED_DEADLINE reservation, apart from any audio server. The same
//! periodic task set of Debian's `rt-app` (by default the bench jackd
//! chain's load: ten tasks of 200 us every 2667 us, released evenly over
//! the period) runs under SCHED_FIFO and under reservations whose budgets
//! are multiples of a job's median run time measured under SCHED_FIFO first,
//! alternated run by run, and the table sets each reservation's deadline
//! misses, strings of consecutive misses and worst lateness beside
//! SCHED_FIFO's, with the host's steal in each window.
//!
//! On a virtual machine whose host stalls the virtual CPUs, a stall the
//! host does not report as steal is charged to the thread that was
//! running; under SCHED_FIFO that costs a period or two, but the kernel
//! makes a reservation repay it at its bandwidth, so the thread misses a
//! string of periods. This bench measures that cost with the field's own
//! tool, so a reader can tell how much of an audio server's extra loss
//! under reservations the machine imposes on any reservation.
//!
//! * [`tasks`]: the task set and the budgets, as rt-app specs;
//! * [`metrics`]: one run's misses, strings and lateness from rt-app's logs;
//! * [`report`]: the table and `runs.csv`.
//!
//! Runs on the caller's thread; the real-time threads are rt-app's.

pub mod metrics;
pub mod report;
pub mod tasks;

use crate::harness::ChildOptions;
use crate::rtapp::{Calibration, RtApp};
use crate::vsjackd::steal::host_steal_ns;
use crate::vsjackd::{round_order, RoundOrder};
use metrics::RunMetrics;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tasks::{Contender, TaskSet};

/// `resound bench reservations` options.
#[derive(Debug, Clone, clap::Args)]
pub struct VsFifoArgs {
    /// Repetitions, every policy once in each, the order rotated (default 3; 1 with --quick)
    #[arg(long)]
    pub runs: Option<u32>,
    /// Measured seconds per run (default 20; 4 with --quick)
    #[arg(long)]
    pub seconds: Option<f64>,
    /// A short run: 4 s per run and one repetition, unless --seconds or --runs say otherwise
    #[arg(long)]
    pub quick: bool,
    /// Periodic tasks, their releases spread evenly over the period
    #[arg(long, default_value_t = 10)]
    pub tasks: u32,
    /// Period of every task (us; 2667 is 128 frames at 48 kHz)
    #[arg(long, default_value_t = 2667)]
    pub period_us: u64,
    /// CPU work of each job (us of rt-app's calibrated loops)
    #[arg(long, default_value_t = 200)]
    pub run_us: u64,
    /// Reservation budgets to compare with SCHED_FIFO, as multiples of a
    /// job's median run time under SCHED_FIFO, measured first
    /// (comma-separated). resound's controller gives a steady thread 1.1 x
    /// the 99th percentile of its CPU time, about 1.5 x the median on a
    /// quiet machine. A multiple the kernel's admission limit cannot hold
    /// for every task is lowered to the largest it can
    #[arg(long, value_delimiter = ',', default_value = "1.5,2")]
    pub budget: Vec<f64>,
    /// Directory for runs.csv and table.txt
    #[arg(long, default_value = "vs-fifo")]
    pub out: PathBuf,
    /// Keep rt-app's JSON and per-job logs of every run (out/runN/POLICY/;
    /// about 8 MB a run at the defaults)
    #[arg(long)]
    pub keep_raw: bool,
}

/// Checked settings.
struct Plan {
    runs: u32,
    seconds: f64,
    set: TaskSet,
}

fn plan(a: &VsFifoArgs) -> Result<Plan, String> {
    let seconds = a.seconds.unwrap_or(if a.quick { 4.0 } else { 20.0 });
    if !(1.0..=3600.0).contains(&seconds) {
        return Err(format!("--seconds {seconds}: use 1 to 3600"));
    }
    let runs = a.runs.unwrap_or(if a.quick { 1 } else { 3 });
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let set = TaskSet::new(a.tasks, a.period_us, a.run_us, &a.budget)?;
    Ok(Plan { runs, seconds, set })
}

/// Runs the bench and prints the table.
pub fn run(a: VsFifoArgs) -> Result<(), String> {
    let p = plan(&a)?;
    crate::rtapp::rtapp_binary()?;
    if !resound_sched::fifo_permitted() || !resound_sched::deadline_permitted() {
        return Err(
            "SCHED_FIFO and SCHED_DEADLINE must both be permitted (run as root, or with \
             CAP_SYS_NICE and an unlimited RLIMIT_RTPRIO)"
                .into(),
        );
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let cal = Calibration::load_or_measure(&Calibration::default_cache())?;
    let need = measure_need(&p, &a.out, &cal, a.keep_raw)?;
    let (contenders, notes) = p.set.contenders(need)?;
    for n in &notes {
        println!("{n}");
    }
    let mut results = Vec::new();
    for run in 0..p.runs as usize {
        let run_dir = a.out.join(format!("run{}", run + 1));
        for i in round_order(contenders.len(), run, RoundOrder::Rotate) {
            let c = &contenders[i];
            let dir = run_dir.join(&c.label);
            let m = run_once(&p, c, &dir, &cal, a.keep_raw)?;
            println!("run {}/{} {:<22} {}", run + 1, p.runs, c.label, m.line());
            results.push(report::RunResult {
                run,
                label: c.label.clone(),
                metrics: m,
            });
        }
        if !a.keep_raw {
            // Empty by now: each run's own directory went with its logs.
            let _ = std::fs::remove_dir(&run_dir);
        }
    }
    let mut head = p.set.heading(p.runs, p.seconds, &need);
    for n in &notes {
        head += &format!("\n{n}");
    }
    let table = report::table(&results, &contenders, &head);
    print!("\n{table}");
    write(&a.out.join("table.txt"), &table)?;
    write(&a.out.join("runs.csv"), &report::csv(&results))?;
    println!("wrote {}/{{table.txt,runs.csv}}", a.out.display());
    Ok(())
}

/// The jobs' run time under SCHED_FIFO, from a first run of a quarter of
/// the measured length (at least 3 s), which the budgets are sized from.
fn measure_need(
    p: &Plan,
    out: &Path,
    cal: &Calibration,
    keep_raw: bool,
) -> Result<tasks::Need, String> {
    let secs = (p.seconds / 4.0).max(3.0);
    println!("measuring each job's run time under SCHED_FIFO ({secs:.0} s)");
    let spec = p.set.spec(&Contender::fifo(), secs);
    let (log, _) = run_rtapp(&spec, &out.join("need"), cal, keep_raw)?;
    tasks::Need::of(&log)
}

/// One run of `c` in `dir`.
fn run_once(
    p: &Plan,
    c: &Contender,
    dir: &Path,
    cal: &Calibration,
    keep_raw: bool,
) -> Result<RunMetrics, String> {
    let spec = p.set.spec(c, p.seconds);
    let (log, steal) = run_rtapp(&spec, dir, cal, keep_raw)?;
    Ok(RunMetrics::of(&log, steal))
}

/// Runs `spec` in `dir` to its end and reads its logs, with the host's
/// steal from the moment every thread runs to the end of the jobs (None
/// where `/proc/stat` has none); removes `dir` then unless `keep_raw`.
fn run_rtapp(
    spec: &crate::rtapp::RtAppSpec,
    dir: &Path,
    cal: &Calibration,
    keep_raw: bool,
) -> Result<(crate::rtapp::RtAppLog, Option<u64>), String> {
    let opts = ChildOptions {
        die_with_parent: true,
        ..ChildOptions::default()
    };
    let mut rt = RtApp::start(spec, dir, cal, &opts)?;
    rt.wait_running(Duration::from_secs(10))?;
    let steal0 = host_steal_ns().ok();
    let give_up = std::time::Instant::now() + Duration::from_secs_f64(spec.duration_s + 10.0);
    while rt.exited().is_none() && std::time::Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(100));
    }
    let steal1 = host_steal_ns().ok();
    let log = rt.stop()?;
    if !keep_raw {
        std::fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let steal = steal0.zip(steal1).map(|(a, b)| b.saturating_sub(a));
    Ok((log, steal))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
