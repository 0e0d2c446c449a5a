//! `resound legacy run -- CMD` and `resound legacy attach PID`: adaptive
//! reservations for an unmodified process (see `resound_legacy::attach`),
//! with the admission ledger of the running audio server when there is one
//! (`-s NAME` or the default server), else a local one.
//!
//! Threads: the command's main thread.

use resound_legacy::attach::{self, Admission, Attachment, LocalLedger, Options};
use resound_legacy::lfs::ControllerKind;

/// Reservation options shared by `run` and `attach`.
#[derive(Debug, clap::Args)]
pub struct ReserveOpts {
    /// Reservation period: milliseconds, or "auto" (detect the process's period).
    #[arg(long, default_value = "auto")]
    period: String,
    /// Observe this long before choosing the period with --period auto, and
    /// at each re-detection (seconds).
    #[arg(long, default_value_t = 2.0)]
    detect_seconds: f64,
    /// With --period auto: detect the period again every this many seconds
    /// while attached (kernel tracer; the process never stops) and re-tune
    /// the reservations when it changed (0: detect once).
    #[arg(long, default_value_t = 10.0)]
    redetect: f64,
    /// Re-tune when the re-detected period differs from the reservation
    /// period by more than this many percent.
    #[arg(long, default_value_t = 3.0)]
    tolerance: f64,
    /// Only these threads (comma-separated TIDs; default: all, and new ones).
    #[arg(long, value_delimiter = ',')]
    threads: Option<Vec<i32>>,
    /// Budget controller: percentile (95th percentile of the CPU time per job, + 15 %) or lfs (the paper's LFSg: grow by alpha when late, else shrink by beta).
    #[arg(long, default_value = "percentile")]
    controller: ControllerKind,
    /// LFSg's multiplicative increase when late.
    #[arg(long, default_value_t = 1.25)]
    alpha: f64,
    /// LFSg's additive decrease (microseconds; default 1 % of the period).
    #[arg(long)]
    beta_us: Option<u64>,
    /// Controller sampling period T_sample (milliseconds).
    #[arg(long, default_value_t = 500)]
    sample_ms: u64,
    /// Smallest budget (microseconds; default 1 % of the period, at least 100).
    #[arg(long)]
    min_us: Option<u64>,
    /// Largest budget (microseconds; default the period). A budget kept below
    /// what a job needs makes the program miss deadlines.
    #[arg(long)]
    max_us: Option<u64>,
    /// First budget (microseconds; default: each thread's CPU time per job
    /// plus 15 %, measured during --observe-ms).
    #[arg(long)]
    initial_us: Option<u64>,
    /// How long to measure the threads under a provisional reservation
    /// (half the period) before their first budgets (milliseconds; 0: start
    /// at a tenth of the period).
    #[arg(long, default_value_t = 500)]
    observe_ms: u64,
    /// GRUB reclaiming: threads may use bandwidth others leave unused.
    #[arg(long)]
    reclaim: bool,
    /// Use the local ledger even when an audio server runs.
    #[arg(long)]
    no_server: bool,
    /// Status lines as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `resound legacy run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    opts: ReserveOpts,
    /// The program and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    cmd: Vec<String>,
}

/// Options of `resound legacy attach`.
#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    /// The process.
    pid: i32,
    #[command(flatten)]
    opts: ReserveOpts,
}

fn options(pid: i32, o: &ReserveOpts) -> Result<Options, String> {
    if !(o.detect_seconds > 0.0 && o.detect_seconds <= 3600.0) {
        return Err(format!(
            "--detect-seconds {}: must be in (0, 3600]",
            o.detect_seconds
        ));
    }
    if !(o.redetect >= 0.0 && o.redetect <= 86_400.0) {
        return Err(format!(
            "--redetect {}: must be in [0, 86400] seconds",
            o.redetect
        ));
    }
    if !(o.tolerance > 0.0 && o.tolerance < 100.0) {
        return Err(format!(
            "--tolerance {}: must be in (0, 100) percent",
            o.tolerance
        ));
    }
    let auto = o.period == "auto";
    let period_ns = if auto {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = attach::detect_once(
            pid,
            std::time::Duration::from_secs_f64(o.detect_seconds),
            &stop,
        )?;
        if let Some(why) = &d.fallback {
            eprintln!("resound legacy: detecting with ptrace (it stops the process at each system call): {why}");
        }
        let p = d
            .period_ns
            .ok_or_else(|| format!("process {pid} shows no periodic activity"))?;
        eprintln!(
            "period of process {pid}: {:.3} ms ({:.2} Hz), detected over {} s",
            p as f64 / 1e6,
            1e9 / p as f64,
            o.detect_seconds
        );
        p
    } else {
        let ms: f64 = o
            .period
            .parse()
            .map_err(|_| format!("--period: '{}' is neither auto nor milliseconds", o.period))?;
        if !(0.1..=10_000.0).contains(&ms) {
            return Err(format!("--period {ms} ms: must be between 0.1 and 10000"));
        }
        (ms * 1e6) as u64
    };
    if !(o.alpha > 1.0 && o.alpha.is_finite()) {
        return Err(format!("--alpha {}: must be greater than 1", o.alpha));
    }
    let mut x = Options::for_period(period_ns);
    x.threads = o.threads.clone();
    x.controller = o.controller;
    x.alpha = o.alpha;
    x.beta_ns = o.beta_us.map(|v| v * 1000);
    x.sample_ns = o.sample_ms.max(1) * 1_000_000;
    x.min_ns = o.min_us.map(|v| v * 1000);
    x.max_ns = o.max_us.map(|v| v * 1000);
    if auto && o.redetect > 0.0 {
        x.redetect_ns = (o.redetect * 1e9) as u64;
    }
    x.detect_ns = (o.detect_seconds * 1e9) as u64;
    x.tolerance = o.tolerance / 100.0;
    x.initial_ns = o.initial_us.map(|v| v * 1000);
    x.observe_ns = o.observe_ms * 1_000_000;
    x.reclaim = o.reclaim;
    x.json = o.json;
    Ok(x)
}

/// The audio server's ledger when one answers, else the local one (saying
/// why when a server runs but refuses the session).
fn admission(server: Option<&str>, o: &ReserveOpts) -> Box<dyn Admission> {
    if !o.no_server {
        match super::server_ledger::ServerLedger::connect(server) {
            Ok(Some(s)) => return Box::new(s),
            Ok(None) => {}
            Err(e) => eprintln!(
                "warning: the audio server refused a control session ({e}); \
                 admitting against this machine's own ledger instead, which does not \
                 see the server's reservations"
            ),
        }
    }
    Box::new(LocalLedger::from_system())
}

fn go(
    server: Option<&str>,
    pid: i32,
    o: &ReserveOpts,
    keep_going: impl FnMut() -> bool,
) -> Result<(), String> {
    if !resound_sched::deadline_permitted() {
        return Err(
            "SCHED_DEADLINE is not permitted here (needs root or CAP_SYS_NICE, and no RLIMIT_RTTIME)"
                .into(),
        );
    }
    let opts = options(pid, o)?;
    let mut adm = admission(server, o);
    attach::signals::install();
    eprintln!(
        "resound legacy: process {pid}: period {:.2} ms, controller {:?}, ledger: {}",
        opts.period_ns as f64 / 1e6,
        opts.controller,
        adm.describe()
    );
    let a = Attachment::attach(pid, opts, adm.as_mut())?;
    let s = attach::run(a, keep_going);
    eprintln!(
        "resound legacy: detached from {pid}: {} samples, {} budget changes, {} re-tunes, bandwidth mean {:.3} max {:.3}, late windows {}, deadline misses {}",
        s.samples, s.changes, s.retunes, s.mean_bandwidth, s.max_bandwidth, s.late, s.misses
    );
    if s.restore_failures > 0 {
        return Err(format!(
            "{} thread(s) could not be restored",
            s.restore_failures
        ));
    }
    Ok(())
}

/// `resound legacy attach PID`.
pub fn attach(server: Option<&str>, a: AttachArgs) -> Result<(), String> {
    go(server, a.pid, &a.opts, || true)
}

/// `resound legacy run -- CMD`: starts CMD, attaches, and detaches when it
/// exits (a failing exit status is reported as an error). On SIGINT/SIGTERM,
/// or when attaching fails, the threads are restored first, then CMD is sent
/// SIGTERM and reaped: `run` does not leave its program behind.
pub fn run(server: Option<&str>, a: RunArgs) -> Result<(), String> {
    let (prog, args) = a.cmd.split_first().ok_or("nothing to run")?;
    let mut child = std::process::Command::new(prog)
        .args(args)
        .spawn()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    let pid = child.id() as i32;
    let mut status = None;
    let r = go(server, pid, &a.opts, || match child.try_wait() {
        Ok(Some(s)) => {
            status = Some(s);
            false
        }
        _ => true,
    });
    if status.is_none() {
        if r.is_err() || attach::signals::stopped() {
            // SAFETY: kill(2) on our own child's pid, which we have not reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        status = child.wait().ok();
    }
    r?;
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(format!("{prog} exited: {s}")),
        None => Err(format!("{prog}: cannot read its exit status")),
    }
}
