//! One run of the chain on one server: start the server (Debian's jackd2 or
//! a `resoundd` under a unique name), start the `loadclient` chain
//! capture → c1 → … → cN → playback, sample the driver thread's schedstat
//! over an untraced window, then trace the server's sleeps over the measured
//! window (the driver's real wake-ups, on a tracer thread of its own) and
//! sample the schedstat around it too, stop the clients (they write their
//! records) and the server, and read the records back. Also compiles
//! `loadclient.c`. Runs on the bench's main thread.
//!
//! The driver's CPU time is measured first without the tracer: the kernel
//! tracer's events on each sleep cost the traced thread its own CPU time
//! (about 14 % of resound's driver samples in `perf record` with it
//! attached), the same per cycle on both servers, which moves every ratio
//! toward 1.

use super::records::{read_client_csv, ClientRecords};
use super::schedstat::{driver_thread, thread_schedstat, DriverThread};
use super::servers::{Base, Contender};
use super::steal::host_steal_ns;
use crate::experiment::run::jackd_cycles::{driver_cycles, DriverCycle, DriverTrace};
use crate::harness::{
    dummy_driver_args, Bins, Child, ChildOptions, Jackd, Server, ServerSpec, StderrMode,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The load client's source, compiled at run time against the
/// distribution's JACK headers.
const LOADCLIENT_C: &str = include_str!("../../c/loadclient.c");

/// SCHED_FIFO priority of both servers' driver threads (clients get one less
/// on both).
const PRIORITY: &str = "10";

/// What one run does.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The server.
    pub server: Contender,
    /// Clients in the chain.
    pub clients: usize,
    /// Busy share of the period per client (percent).
    pub load: f64,
    /// Sample rate.
    pub rate: u32,
    /// Frames per period.
    pub frames: u32,
    /// Settling time after the chain is complete.
    pub warmup: Duration,
    /// The measured window.
    pub window: Duration,
    /// The untraced window before it, for the driver's CPU time.
    pub cpu_window: Duration,
    /// Where the clients write their records.
    pub dir: PathBuf,
    /// Extra resoundd options (resound servers only).
    pub server_args: Vec<String>,
}

/// What one run collected.
#[derive(Debug)]
pub struct RunData {
    /// Each client's records, c1 first.
    pub clients: Vec<ClientRecords>,
    /// The measured window (CLOCK_MONOTONIC ns).
    pub window_ns: (u64, u64),
    /// The audio period (ns).
    pub period_ns: u64,
    /// The driver thread.
    pub driver: DriverThread,
    /// Its CPU time over the untraced window before the measured one.
    pub untraced: CpuSample,
    /// Its CPU time over the measured window, with the tracer attached.
    pub traced: CpuSample,
    /// The driver thread's real wake-ups over the window, traced by the
    /// kernel the same way on both servers (returns from its
    /// `clock_nanosleep`/`nanosleep`); empty if the trace failed.
    pub driver_wakes: Vec<DriverCycle>,
    /// Why there is no trace (None: traced).
    pub trace_error: Option<String>,
}

/// A thread's schedstat difference over a window, and the host's steal
/// over the same window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuSample {
    /// The window (CLOCK_MONOTONIC ns).
    pub window_ns: (u64, u64),
    /// CPU time over it (ns).
    pub cpu_ns: u64,
    /// Times the thread was put on a CPU over it.
    pub runs: u64,
    /// The host's steal time over it, all CPUs together
    /// ([`host_steal_ns`]; None: `/proc/stat` was unreadable).
    pub steal_ns: Option<u64>,
}

/// A started server of either kind.
enum Running {
    Jackd(Jackd),
    Resound(Server),
}

impl Running {
    fn pid(&self) -> u32 {
        match self {
            Running::Jackd(j) => j.pid(),
            Running::Resound(s) => s.pid(),
        }
    }

    /// A command for `prog` on this server, with the right libjack.
    fn command(&self, prog: &Path, libjack_dir: &Path) -> Command {
        match self {
            Running::Jackd(j) => j.command(prog),
            Running::Resound(s) => {
                let mut c = s.command(prog);
                c.env("JACK_DEFAULT_SERVER", &s.name)
                    .env("JACK_NO_START_SERVER", "1")
                    .env("LD_LIBRARY_PATH", libjack_dir)
                    .env_remove("LD_PRELOAD");
                c
            }
        }
    }
}

/// Where resound's `libjack.so.0` is: `$RESOUND_LIBJACK_DIR`, else beside
/// `resoundd` (where cargo builds it).
pub fn libjack_dir(bins: &Bins) -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    let env = std::env::var_os("RESOUND_LIBJACK_DIR").map(PathBuf::from);
    let beside = bins.resoundd.parent().map(Path::to_path_buf);
    for d in env.into_iter().chain(beside) {
        if d.join("libjack.so.0").is_file() {
            return Ok(d);
        }
        tried.push(d.display().to_string());
    }
    Err(format!(
        "resound's libjack.so.0 not found (looked in {}); build it (cargo build -p resound-libjack) or set RESOUND_LIBJACK_DIR",
        tried.join(", ")
    ))
}

/// Compiles `loadclient.c` into `dir` with `cc` against the distribution's
/// JACK headers (`-ljack`) and returns the binary.
pub fn compile_loadclient(dir: &Path) -> Result<PathBuf, String> {
    if !Path::new("/usr/include/jack/jack.h").exists() {
        return Err(
            "the JACK headers are missing (apt-get install libjack-jackd2-dev, or scripts/setup.sh with RESOUND_SETUP_TESTS=1)".into(),
        );
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let src = dir.join("loadclient.c");
    std::fs::write(&src, LOADCLIENT_C).map_err(|e| format!("{}: {e}", src.display()))?;
    let exe = dir.join("loadclient");
    let out = Command::new("cc")
        .args(["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(["-ljack", "-lm", "-lpthread"])
        .output()
        .map_err(|e| format!("cannot run the C compiler cc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "compiling loadclient.c failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(exe)
}

/// Starts `spec.server` under a unique name (a resound one with
/// `spec.server_args`, then a variant's options).
fn start_server(spec: &RunSpec, bins: &Bins) -> Result<Running, String> {
    let driver = dummy_driver_args(spec.rate, spec.frames);
    let sched = match spec.server.base {
        Base::Jackd => {
            let mut args = vec!["-R", "-P", PRIORITY];
            args.extend(driver.iter().map(String::as_str));
            return Ok(Running::Jackd(Jackd::start("vsj", &args)?));
        }
        Base::Fifo => Some("fifo"),
        Base::Deadline => Some("deadline"),
        Base::Variant => None,
    };
    let mut args = vec!["-P", PRIORITY];
    if let Some(sched) = sched {
        args.extend(["--sched", sched]);
    }
    args.extend(spec.server_args.iter().map(String::as_str));
    args.extend(spec.server.options.iter().map(String::as_str));
    args.extend(driver.iter().map(String::as_str));
    let mut server = ServerSpec::new(bins.clone(), "vsj", &args);
    server.child.stderr = StderrMode::Keep {
        keep: 200,
        echo: None,
    };
    Ok(Running::Resound(Server::start(server)?))
}

/// Starts `spec.server` as a run would and stops it at once, so that a
/// resoundd that refuses its options (a variant's, `--server-arg`'s)
/// fails the bench before its runs rather than every run of that server.
pub fn check_starts(spec: &RunSpec, bins: &Bins) -> Result<(), String> {
    start_server(spec, &spec.server.bins(bins)).map(drop)
}

/// Runs the chain once on a fresh server.
pub fn run_once(spec: &RunSpec, bins: &Bins, loadclient: &Path) -> Result<RunData, String> {
    let bins = &spec.server.bins(bins);
    // Another build's clients use that build's libjack.
    let libjack = match &spec.server.build {
        Some(dir) => dir.clone(),
        None => libjack_dir(bins)?,
    };
    std::fs::create_dir_all(&spec.dir).map_err(|e| format!("{}: {e}", spec.dir.display()))?;
    let server = start_server(spec, bins)?;
    let record_s = (spec.warmup + spec.cpu_window + spec.window).as_secs_f64() + 30.0;
    let mut clients: Vec<Child> = Vec::new();
    let mut files = Vec::new();
    for i in 1..=spec.clients {
        let name = format!("c{i}");
        let pos = match i {
            1 => "first",
            i if i == spec.clients => "last",
            _ => "middle",
        };
        let file = spec.dir.join(format!("{name}.csv"));
        let mut cmd = server.command(loadclient, &libjack);
        cmd.args(["-n", &name, "-p", pos, "-b", &spec.load.to_string()])
            .args(["-s", &format!("{record_s:.0}"), "-o"])
            .arg(&file);
        if i > 1 {
            cmd.args(["-f", &format!("c{}:out", i - 1)]);
        }
        let opts = ChildOptions {
            stderr: StderrMode::Keep {
                keep: 50,
                echo: None,
            },
            ..ChildOptions::default()
        };
        let mut c = Child::spawn(cmd, &name, &opts)?;
        c.wait_event("ready", Duration::from_secs(15), &mut || Ok(()))?;
        clients.push(c);
        files.push(file);
    }
    std::thread::sleep(spec.warmup);
    let driver = driver_thread(server.pid(), spec.server.is_jackd())?;
    let untraced = sample_cpu(server.pid(), driver.tid, spec.cpu_window)?;
    let trace = DriverTrace::start(server.pid(), spec.window + Duration::from_secs(5));
    let traced = sample_cpu(server.pid(), driver.tid, spec.window)?;
    let (t0, t1) = traced.window_ns;
    let period_ns = u64::from(spec.frames) * 1_000_000_000 / u64::from(spec.rate.max(1));
    let (driver_wakes, trace_error) = match trace.and_then(DriverTrace::finish) {
        Ok(t) => (driver_cycles(&t, period_ns), None),
        Err(e) => (Vec::new(), Some(e)),
    };
    // Last first, so no client waits on a stopped upstream for long.
    for c in clients.iter_mut().rev() {
        c.stop_and_report("done", Duration::from_secs(10))?;
    }
    drop(server);
    let clients = files
        .iter()
        .map(|f| read_client_csv(f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunData {
        clients,
        window_ns: (t0, t1),
        period_ns,
        driver,
        untraced,
        traced,
        driver_wakes,
        trace_error,
    })
}

/// Thread `tid` of `pid`'s CPU time, and the host's steal, over the next
/// `window`.
fn sample_cpu(pid: u32, tid: u32, window: Duration) -> Result<CpuSample, String> {
    let steal0 = host_steal_ns().ok();
    let (s0, t0) = (thread_schedstat(pid, tid)?, now_ns());
    let started = Instant::now();
    while started.elapsed() < window {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s1, t1) = (thread_schedstat(pid, tid)?, now_ns());
    let steal_ns = steal0
        .zip(host_steal_ns().ok())
        .map(|(a, b)| b.saturating_sub(a));
    Ok(CpuSample {
        window_ns: (t0, t1),
        cpu_ns: s1.cpu_ns.saturating_sub(s0.cpu_ns),
        runs: s1.runs.saturating_sub(s0.runs),
        steal_ns,
    })
}

/// CLOCK_MONOTONIC now, in ns (the clock of the clients' records).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec we pass, which lives
    // across the call; CLOCK_MONOTONIC is always available.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
