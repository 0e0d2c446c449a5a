//! `resound experiment list | check | run | redraw`: the command line of
//! the experiment tool, and one experiment from its scenario to its report
//! directory. Runs on the command's main thread.

use super::report;
use super::results::{ExperimentResult, MachineInfo};
use super::run::plan::{duration_and_scale, plans, Plan};
use super::run::progress::{Progress, OVERHEAD_S};
use super::run::{run_plan, uses_jackd, Ctx};
use super::scenario::{catalog, Scenario, ServerKind};
use crate::harness::{remove_stale_dirs, Bins};
use crate::rtapp::Calibration;
use crate::vsjackd::chain::compile_loadclient;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `resound experiment`.
#[derive(Debug, clap::Subcommand)]
pub enum ExperimentCmd {
    /// List the shipped reproductions of the papers' experiments.
    List,
    /// Check scenario files (or shipped names) and print what they would run.
    Check {
        /// Scenario names or files.
        #[arg(required = true)]
        scenarios: Vec<String>,
        /// Show the plan of the `--quick` run.
        #[arg(long)]
        quick: bool,
    },
    /// Run a scenario (a shipped name or a file) and write its report.
    Run(RunArgs),
    /// Draw the figures and report.html again from a finished run's files.
    Redraw {
        /// The run's output directory (with results.json).
        dir: PathBuf,
    },
}

/// Options of `resound experiment run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Scenario name (see `resound experiment list`) or file.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub scenario: Option<String>,
    /// Run every shipped scenario, one after the other, into DIR/NAME.
    #[arg(long)]
    pub all: bool,
    /// Short runs: each scenario's quick duration, its timeline scaled to it.
    #[arg(long)]
    pub quick: bool,
    /// Output directory (report.html, CSV, JSON, figures, raw records).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: PathBuf,
    /// Run on resound only, even where jackd2 would run beside it.
    #[arg(long)]
    pub no_jackd: bool,
}

/// Runs the command.
pub fn main(cmd: ExperimentCmd) -> Result<(), String> {
    match cmd {
        ExperimentCmd::List => {
            for e in catalog::list() {
                println!("{:<22} {}", e.name, e.title);
            }
            println!("\nrun one: resound experiment run NAME --out DIR [--quick]");
            Ok(())
        }
        ExperimentCmd::Check { scenarios, quick } => check(&scenarios, quick),
        ExperimentCmd::Run(a) => run(a),
        ExperimentCmd::Redraw { dir } => {
            let files = report::redraw(&dir)?;
            println!("redrew {} files in {}", files.len(), dir.display());
            Ok(())
        }
    }
}

/// `experiment check`: parse, validate and print the plans.
fn check(names: &[String], quick: bool) -> Result<(), String> {
    let mut bad = 0;
    for n in names {
        match catalog::load(n) {
            Ok((sc, source)) => {
                println!("{source}: ok: {}", sc.title);
                for p in plans(&sc, quick) {
                    println!(
                        "  {} on {}: {:.0} s, {} steps, {} rt-app tasks",
                        p.label,
                        p.server_label(),
                        p.duration_s,
                        p.steps.len(),
                        p.rtapp.len()
                    );
                }
            }
            Err(e) => {
                eprintln!("{e}");
                bad += 1;
            }
        }
    }
    if bad > 0 {
        return Err(format!("{bad} scenario(s) have errors"));
    }
    Ok(())
}

/// The scenarios a `run` asks for.
fn scenarios_of(a: &RunArgs) -> Result<Vec<(Scenario, String)>, String> {
    if a.all {
        return catalog::list()
            .iter()
            .map(|e| catalog::load(e.name).map_err(|e| e.to_string()))
            .collect();
    }
    let name = a.scenario.as_deref().expect("clap requires a scenario");
    Ok(vec![catalog::load(name).map_err(|e| e.to_string())?])
}

/// The plans of a scenario, without jackd when asked or when it is missing.
fn plans_of(sc: &Scenario, a: &RunArgs, progress_note: &mut Vec<String>) -> Vec<Plan> {
    let all = plans(sc, a.quick);
    let keep_jackd = !a.no_jackd && crate::harness::Jackd::available();
    if !keep_jackd && uses_jackd(&all) && !a.no_jackd {
        progress_note.push(
            "Debian's jackd is not installed: resound runs alone (scripts/setup.sh installs it)"
                .into(),
        );
    }
    all.into_iter()
        .filter(|p| keep_jackd || p.server != ServerKind::Jackd)
        .collect()
}

/// A scenario with its source and its plans.
type Job = (Scenario, String, Vec<Plan>);

/// `experiment run`.
fn run(a: RunArgs) -> Result<(), String> {
    let list = scenarios_of(&a)?;
    let bins = Bins::beside_current_exe()?;
    remove_stale_dirs(super::run::server::TAG);
    let interrupted = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, interrupted.clone()).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let _lock = lock_out_dir(&a.out)?;
    let mut notes = Vec::new();
    let jobs: Vec<Job> = list
        .into_iter()
        .map(|(sc, src)| {
            let p = plans_of(&sc, &a, &mut notes);
            (sc, src, p)
        })
        .collect();
    let total: f64 = jobs
        .iter()
        .flat_map(|(_, _, p)| p.iter())
        .map(|p| p.duration_s + OVERHEAD_S)
        .sum();
    let mut progress = Progress::new(total);
    for n in notes.iter().take(1) {
        progress.line(n);
    }
    progress.line(&format!(
        "{} configuration run(s), about {:.0} min",
        jobs.iter().map(|j| j.2.len()).sum::<usize>(),
        total / 60.0
    ));
    let ctx = Ctx {
        bins,
        loadclient: compile_loadclient(&a.out.join("bin"))?,
        calibration: rtapp_calibration(&jobs, &progress)?,
        raw_dir: a.out.join("raw"),
        interrupted,
    };
    let failed = run_jobs(jobs, &a, ctx, &mut progress);
    progress.finish();
    match failed? {
        0 => Ok(()),
        n => Err(format!("{n} configuration run(s) failed (see the report)")),
    }
}

/// rt-app's calibration, when a scenario has rt-app tasks (measured once,
/// then cached).
fn rtapp_calibration(jobs: &[Job], progress: &Progress) -> Result<Option<Calibration>, String> {
    if jobs.iter().all(|(sc, _, _)| sc.rtapp.is_empty()) {
        return Ok(None);
    }
    let cache = Calibration::default_cache();
    progress.line(&format!(
        "rt-app's calibration: {} (measured once; delete it to measure again)",
        cache.display()
    ));
    Calibration::load_or_measure(&cache).map(Some)
}

/// Runs each scenario and writes its report (into `--out`, or
/// `--out/NAME` with `--all`); the number of failed configurations.
fn run_jobs(
    jobs: Vec<Job>,
    a: &RunArgs,
    mut ctx: Ctx,
    progress: &mut Progress,
) -> Result<usize, String> {
    let mut failed = 0;
    for (sc, source, plans) in jobs {
        let dir = if a.all {
            a.out.join(&sc.name)
        } else {
            a.out.clone()
        };
        ctx.raw_dir = dir.join("raw");
        let result = run_scenario(sc, source, &plans, a.quick, &ctx, progress);
        failed += result.runs.iter().filter(|r| r.error.is_some()).count();
        let files = report::write(&result, &dir)?;
        progress.line(&format!(
            "{}: {} files in {} (open {})",
            result.scenario.name,
            files.len(),
            dir.display(),
            dir.join("report.html").display()
        ));
        print!("{}", report::summary_text(&result));
        if ctx.interrupted.load(Ordering::Acquire) {
            return Err("interrupted".into());
        }
    }
    Ok(failed)
}

/// Takes `DIR/.experiment.lock` for the run (released when the returned
/// file closes), so that two runs writing into one directory are refused
/// instead of mixing each other's records.
fn lock_out_dir(dir: &std::path::Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd;
    let path = dir.join(".experiment.lock");
    let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY: flock(2) on a descriptor this function owns (`f` lives until
    // it returns or hands `f` to the caller); it touches no memory of ours.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r != 0 {
        return Err(format!(
            "another resound experiment is writing into {}; give each run its own --out",
            dir.display()
        ));
    }
    Ok(f)
}

/// Runs every plan of one scenario.
fn run_scenario(
    sc: Scenario,
    source: String,
    plans: &[Plan],
    quick: bool,
    ctx: &Ctx,
    progress: &mut Progress,
) -> ExperimentResult {
    progress.line(&format!("{}: {}", sc.name, sc.title));
    let mut runs = Vec::new();
    for p in plans {
        runs.push(run_plan(p, ctx, progress));
        if ctx.interrupted.load(Ordering::Acquire) {
            break;
        }
    }
    let uses_jackd = uses_jackd(plans);
    let uses_rtapp = !sc.rtapp.is_empty();
    ExperimentResult {
        duration_s: duration_and_scale(&sc, quick).0,
        scenario: sc,
        source,
        quick,
        machine: machine_info(uses_jackd, uses_rtapp),
        started: utc_now(),
        runs,
    }
}

/// The machine and the versions of what ran.
fn machine_info(jackd: bool, rtapp: bool) -> MachineInfo {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let version_words = read("/proc/sys/kernel/version");
    let cpu_model = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or_else(String::new, |s| s.trim().to_string());
    MachineInfo {
        kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
        preemption: version_words
            .split_whitespace()
            .filter(|w| w.contains("PREEMPT"))
            .collect::<Vec<_>>()
            .join(" "),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        resound_version: env!("CARGO_PKG_VERSION").to_string(),
        jackd_version: jackd
            .then(|| program_version("jackd", &["--version"]))
            .flatten(),
        rtapp_version: rtapp
            .then(|| program_version("rt-app", &["--version"]))
            .flatten(),
    }
}

/// The first line a program prints for its version.
fn program_version(prog: &str, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(prog).args(args).output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

/// Now, UTC, `YYYY-MM-DD HH:MM:SS`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_now_has_the_shape_of_a_date() {
        let s = utc_now();
        assert_eq!(s.len(), 19, "{s}");
        assert!(s.starts_with("20"), "{s}");
    }
}
