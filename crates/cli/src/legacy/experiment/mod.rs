//! `resound legacy experiment NAME`: the experiments of "The Wizard of OS: a
//! Heartbeat for Legacy Multimedia Applications" run on resound, each
//! printing a table with the paper's values beside resound's and, with
//! `--out DIR`, writing its rows as CSV and JSON and its figure as PNG and
//! SVG. One file per experiment; runs on the command's main thread (the
//! programs measured are child processes).

mod detection;
mod overhead;
mod reserve;
mod supply;

use clap::{Args, ValueEnum};
use resound_legacy::trace::Tracer;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Which experiment.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Name {
    /// Detection accuracy against observation length, 0.2 s to 4 s (Fig. 8-9).
    Detection,
    /// Cost of tracing a CPU-heavy job: none, strace, ptrace, kernel (Table I).
    TracerOverhead,
    /// Supply-bound function and minimum budget per server period (Fig. 1-2).
    SupplyBound,
    /// LFS with server period T from 20 to 100 ms on a 25 fps player (Table II).
    Table2,
    /// No reservation, LFS and the percentile controller at T = P under an
    /// interfering real-time load: the adaptive reservation's goal.
    Goal,
    /// Two periodic players under LFS with the same T varied (Fig. 3-4).
    TwoTasks,
}

/// Options of `resound legacy experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// The experiment.
    #[arg(value_enum)]
    name: Name,
    /// Fewer repetitions and shorter runs (about a minute).
    #[arg(long)]
    quick: bool,
    /// Repetitions (default: 5 for detection, 10 for tracer-overhead; 3 with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// tracer-overhead: extra untraced/kernel-traced pairs, alternating, for
    /// the 0.5 % goal's confidence interval (default 30; 6 with --quick).
    #[arg(long)]
    pairs: Option<usize>,
    /// Tracer for the detection experiment.
    #[arg(long, default_value = "kernel")]
    tracer: Tracer,
    /// tracer-overhead: the traced job: `transcode` (a Theora video decoded and
    /// encoded again by GStreamer, as the paper's transcoding job) or `dd`
    /// (dd bs=4k | gzip: many more system calls per second, a harsher case).
    #[arg(long, default_value = "transcode")]
    job: String,
    /// Write the rows (CSV, JSON) and the figure (PNG, SVG) into this directory.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Reservation experiments: CPU work per frame of the 25 fps player (microseconds).
    #[arg(long, default_value_t = 10_000)]
    work_us: u64,
    /// Reservation experiments: jobs (frames) per run.
    #[arg(long, default_value_t = 250)]
    jobs: u64,
    /// Reservation experiments: without the interfering real-time load.
    #[arg(long)]
    no_load: bool,
    /// Reservation experiments: controller for table2 and two-tasks (lfs, as in the paper, or percentile).
    #[arg(long, default_value = "lfs")]
    controller: String,
}

/// Run one experiment.
pub fn run(a: ExperimentArgs) -> Result<(), String> {
    if let Some(d) = &a.out {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    if a.reps == Some(0) {
        return Err("--reps must be at least 1".into());
    }
    match a.name {
        Name::Detection => detection::run(&a),
        Name::TracerOverhead => overhead::run(&a),
        Name::SupplyBound => supply::run(&a),
        Name::Table2 => reserve::run(a.reserve_options("table2")),
        Name::Goal => reserve::run(a.reserve_options("goal")),
        Name::TwoTasks => reserve::run(a.reserve_options("two-tasks")),
    }
}

impl ExperimentArgs {
    fn reserve_options(&self, name: &'static str) -> reserve::ReserveOptions {
        reserve::ReserveOptions {
            name,
            work_us: self.work_us,
            jobs: self.jobs,
            no_load: self.no_load,
            controller: self.controller.clone(),
        }
    }
}

/// The `resound-tool` lab binary beside this program.
pub(crate) fn lab_tool() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let tool = me.with_file_name("resound-tool");
    if !tool.exists() {
        return Err(format!(
            "{} not found: build it with `cargo build -p resound --bins`",
            tool.display()
        ));
    }
    Ok(tool)
}

/// Write `rows` as `DIR/NAME.json` and `DIR/NAME.csv` (header from `header`).
pub(crate) fn write_rows<T: Serialize>(
    dir: &Path,
    name: &str,
    header: &[&str],
    rows: &[T],
    csv_row: impl Fn(&T) -> Vec<String>,
) -> Result<(), String> {
    let json = serde_json::to_string_pretty(rows).expect("rows serialise");
    let p = dir.join(format!("{name}.json"));
    std::fs::write(&p, json).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut csv = header.join(",") + "\n";
    for r in rows {
        csv += &(csv_row(r).join(",") + "\n");
    }
    let p = dir.join(format!("{name}.csv"));
    std::fs::write(&p, csv).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(())
}

/// Mean and standard deviation (sample) of `v`.
pub(crate) fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (m, var.sqrt())
}
