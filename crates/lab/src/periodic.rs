//! `resound-tool periodic`: a stand-in for an unmodified multimedia program
//! with a known frame rate (it knows nothing of reservations), for the legacy
//! period detector and scheduler. Each of its threads renders a frame every
//! 1/fps: it waits for the frame's release time (absolute times on
//! CLOCK_MONOTONIC, so no drift) in the chosen blocking call, burns
//! `--work-us` of CPU, and "shows" the frame. A late frame is shown as soon as
//! it is ready and the next one keeps the frame grid (late frames catch up);
//! with `--drop-late`, after more than a frame of delay the grid restarts
//! from now instead, as players drop frames to catch up. Rates
//! per thread, a rate change mid-run, random (aperiodic) intervals, fork and
//! exec are options. It stops after `--frames`, `--seconds` or SIGINT/SIGTERM
//! and prints one JSON report: the first thread's inter-frame statistics at
//! the top level and each thread's frame (shown) times.
//!
//! Threads: the main thread runs the first frame loop; `--threads N` adds
//! N − 1 more, each with its own rate.

use clap::{Parser, ValueEnum};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// How a thread waits for its next release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Blocking {
    /// `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`.
    Nanosleep,
    /// `poll` with no descriptors and a millisecond timeout.
    Poll,
    /// `read` on a periodic timerfd.
    Read,
    /// `futex(FUTEX_WAIT_BITSET)` with an absolute timeout.
    Futex,
}

/// Options of `resound-tool periodic`.
#[derive(Debug, Clone, Parser)]
pub struct PeriodicArgs {
    /// Frames (jobs) per second of every thread.
    #[arg(long, default_value_t = 25.0)]
    pub fps: f64,
    /// Period in milliseconds (instead of --fps).
    #[arg(long, conflicts_with = "fps")]
    pub period_ms: Option<f64>,
    /// Number of frame threads (the main thread is the first).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Per-thread rates (comma-separated, one per thread; overrides --fps).
    #[arg(long, value_delimiter = ',')]
    pub thread_fps: Vec<f64>,
    /// CPU time each job burns, in microseconds.
    #[arg(long, default_value_t = 2000)]
    pub work_us: u64,
    /// Change the rate this many seconds after the start...
    #[arg(long, requires = "new_fps")]
    pub change_at: Option<f64>,
    /// ...to this many frames per second.
    #[arg(long)]
    pub new_fps: Option<f64>,
    /// How the threads wait.
    #[arg(long, value_enum, default_value_t = Blocking::Nanosleep)]
    pub blocking: Blocking,
    /// Random (exponential) intervals with the period as mean instead of a period.
    #[arg(long)]
    pub aperiodic: bool,
    /// Run this long, in seconds (default 5, or until --frames).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Stop each thread after this many frames.
    #[arg(long)]
    pub frames: Option<u64>,
    /// Add the first thread's inter-frame times (ms) to the report.
    #[arg(long)]
    pub all: bool,
    /// A frame more than a period late restarts the frame grid from now (as
    /// players drop frames to catch up) instead of catching up on the grid.
    #[arg(long)]
    pub drop_late: bool,
    /// Fork at this time: the child runs the same threads' loop until the end.
    #[arg(long)]
    pub fork_at: Option<f64>,
    /// Exec the command after `--` at this time (the process keeps its pid).
    #[arg(long, requires = "exec_cmd")]
    pub exec_at: Option<f64>,
    /// The command to exec with --exec-at.
    #[arg(last = true)]
    pub exec_cmd: Vec<String>,
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as _,
        tv_nsec: (ns % 1_000_000_000) as _,
    }
}

/// Burn `us` microseconds of this thread's CPU time.
fn burn(us: u64) {
    let end = thread_cpu_ns() + us * 1000;
    let mut x = 0u64;
    while thread_cpu_ns() < end {
        for i in 0..200 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
}

/// A per-thread waiter for absolute release times.
struct Waiter {
    how: Blocking,
    timerfd: i32,
    word: u32,
}

impl Waiter {
    fn new(how: Blocking) -> Self {
        // SAFETY: plain syscall; the result is checked before use.
        let timerfd = if how == Blocking::Read {
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, 0) }
        } else {
            -1
        };
        Self {
            how,
            timerfd,
            word: 0,
        }
    }

    /// Block until CLOCK_MONOTONIC reaches `at` (ns).
    fn until(&mut self, at: u64) {
        let ts = timespec(at);
        match self.how {
            // SAFETY: `ts` outlives the call; a null remainder is allowed with TIMER_ABSTIME.
            Blocking::Nanosleep => unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                );
            },
            Blocking::Poll => {
                let ms = at.saturating_sub(now_ns()).div_ceil(1_000_000);
                // SAFETY: no descriptors (null, 0) is valid for poll.
                unsafe { libc::poll(std::ptr::null_mut(), 0, ms as i32) };
            }
            Blocking::Read => {
                let spec = libc::itimerspec {
                    it_interval: timespec(0),
                    it_value: ts,
                };
                let mut buf = [0u8; 8];
                // SAFETY: `spec` and `buf` outlive the calls; the fd is ours.
                unsafe {
                    libc::timerfd_settime(
                        self.timerfd,
                        libc::TFD_TIMER_ABSTIME,
                        &spec,
                        std::ptr::null_mut(),
                    );
                    libc::read(self.timerfd, buf.as_mut_ptr().cast(), 8);
                }
            }
            // SAFETY: `self.word` is a live u32 nobody wakes; `ts` is an absolute
            // CLOCK_MONOTONIC time as FUTEX_WAIT_BITSET expects.
            Blocking::Futex => unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    &self.word as *const u32,
                    libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                    0u32,
                    &ts as *const libc::timespec,
                    std::ptr::null::<u32>(),
                    libc::FUTEX_BITSET_MATCH_ANY,
                );
            },
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.timerfd >= 0 {
            // SAFETY: the fd is ours and closed once.
            unsafe { libc::close(self.timerfd) };
        }
    }
}

/// A tiny deterministic generator (xorshift64*), uniform in (0, 1].
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    ((state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 1.0) / (1u64 << 53) as f64
}

/// One thread's frame loop from `start` to `end` (ns); returns the times
/// frames were shown.
fn thread_loop(a: &PeriodicArgs, fps: f64, start: u64, end: u64, seed: u64) -> (i32, Vec<u64>) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let mut w = Waiter::new(a.blocking);
    let expect = ((end.saturating_sub(start)) as f64 / 1e9 * fps.max(a.new_fps.unwrap_or(0.0)))
        .min(1e6) as usize;
    let mut shown = Vec::with_capacity(a.frames.map_or(expect, |n| n as usize).min(1 << 20) + 16);
    let change = a.change_at.map(|s| start + (s * 1e9) as u64);
    let (mut next, mut rng) = (start, seed | 1);
    while next < end
        && !STOP.load(Ordering::Relaxed)
        && a.frames.is_none_or(|n| (shown.len() as u64) < n)
    {
        w.until(next);
        burn(a.work_us);
        let now = now_ns();
        shown.push(now);
        let f = match (change, a.new_fps) {
            (Some(c), Some(nf)) if next >= c => nf,
            _ => fps,
        };
        let period = 1e9 / f;
        let step = if a.aperiodic {
            -period * uniform(&mut rng).ln()
        } else {
            period
        };
        next += (step as u64).max(1_000_000);
        if a.drop_late && now > next + period as u64 {
            next = now;
        }
    }
    (tid, shown)
}

/// The report: the first thread's inter-frame statistics (`frames`,
/// `period_ms`, `p50_ms`, `p90_ms`, `p95_ms`, `max_ms`, `late`: inter-frame
/// times over 110 % of the period, `cpu_ms`: the process's CPU time,
/// `wall_ms`) and every thread's frame times.
fn report(a: &PeriodicArgs, results: &[(i32, f64, Vec<u64>)], wall_ns: u64) -> serde_json::Value {
    let threads: Vec<_> = results
        .iter()
        .map(|(tid, fps, f)| {
            let iv: Vec<f64> = f.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6).collect();
            let mean = iv.iter().sum::<f64>() / iv.len().max(1) as f64;
            json!({"tid": tid, "fps": fps, "frames": f.len(), "mean_interval_ms": mean, "frame_times_ns": f})
        })
        .collect();
    let (fps, shown) = results
        .first()
        .map(|r| (r.1, r.2.as_slice()))
        .unwrap_or((1.0, &[]));
    let list: Vec<f64> = shown
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .collect();
    let mut gaps = list.clone();
    gaps.sort_by(f64::total_cmp);
    let period_ms = 1000.0 / fps;
    let pct = |p: f64| -> f64 {
        if gaps.is_empty() {
            return 0.0;
        }
        let i = ((p / 100.0) * gaps.len() as f64).ceil() as usize;
        gaps[i.clamp(1, gaps.len()) - 1]
    };
    let mut out = json!({
        "pid": std::process::id(),
        "frames": shown.len(),
        "period_ms": period_ms,
        "p50_ms": pct(50.0),
        "p90_ms": pct(90.0),
        "p95_ms": pct(95.0),
        "max_ms": gaps.last().copied().unwrap_or(0.0),
        "late": gaps.iter().filter(|g| **g > period_ms * 1.1).count(),
        "cpu_ms": process_cpu_ns() as f64 / 1e6,
        "wall_ms": wall_ns as f64 / 1e6,
        "threads": threads,
    });
    if a.all {
        out["interframe_ms"] = json!(list);
    }
    out
}

fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn rates(a: &PeriodicArgs) -> Result<Vec<f64>, String> {
    let base = a.period_ms.map(|p| 1000.0 / p).unwrap_or(a.fps);
    let r: Vec<f64> = (0..a.threads.max(1))
        .map(|i| *a.thread_fps.get(i).unwrap_or(&base))
        .collect();
    if r.iter()
        .chain(a.new_fps.iter())
        .any(|f| !(*f > 0.0 && *f <= 10_000.0))
    {
        return Err("rates must be in (0, 10000] frames per second".into());
    }
    Ok(r)
}

/// Run the program; prints a `{"ready":..}` line at start and the report at the end.
pub fn run(a: PeriodicArgs) -> Result<(), String> {
    let rates = rates(&a)?;
    let seconds = match (a.seconds, a.frames) {
        (Some(s), _) if !(s > 0.0 && s.is_finite()) => {
            return Err(format!("--seconds must be positive, not {s}"))
        }
        (Some(s), _) => s,
        (None, Some(_)) => 1e6,
        (None, None) => 5.0,
    };
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    let t0 = now_ns();
    let start = t0 + 20_000_000;
    let end = start + (seconds * 1e9) as u64;
    println!("{}", json!({"ready": true, "pid": std::process::id()}));
    let stop_at = |s: Option<f64>| s.map(|s| start + (s * 1e9) as u64).filter(|&t| t < end);
    let (fork_at, exec_at) = (stop_at(a.fork_at), stop_at(a.exec_at));
    let phase_end = fork_at.or(exec_at).unwrap_or(end);
    let mut results = run_threads(&a, &rates, start, phase_end);
    if let Some(t) = exec_at.filter(|_| fork_at.is_none()) {
        wait_until(t);
        return exec(&a.exec_cmd);
    }
    if fork_at.is_some() {
        // SAFETY: the process is single-threaded here (all workers joined).
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        let more = run_threads(&a, &rates, phase_end, end);
        if child == 0 {
            std::process::exit(0);
        }
        results.extend(more);
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    }
    println!("{}", report(&a, &results, now_ns() - t0));
    Ok(())
}

/// Runs one frame loop per rate, the first on the calling thread; returns
/// each thread's `(tid, rate, frame times)`, in rate order.
fn run_threads(a: &PeriodicArgs, rates: &[f64], start: u64, end: u64) -> Vec<(i32, f64, Vec<u64>)> {
    let seed = |i: usize| 0x9E37 + i as u64 * 7919;
    std::thread::scope(|s| {
        let hs: Vec<_> = rates
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, &fps)| s.spawn(move || (thread_loop(a, fps, start, end, seed(i)), fps)))
            .collect();
        let (tid, f) = thread_loop(a, rates[0], start, end, seed(0));
        let mut out = vec![(tid, rates[0], f)];
        out.extend(hs.into_iter().map(|h| {
            let ((tid, f), fps) = h.join().expect("a frame thread panicked");
            (tid, fps, f)
        }));
        out
    })
}

fn wait_until(t: u64) {
    std::thread::sleep(Duration::from_nanos(t.saturating_sub(now_ns())));
}

fn exec(cmd: &[String]) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new(&cmd[0]).args(&cmd[1..]).exec();
    Err(format!("exec {}: {err}", cmd[0]))
}
