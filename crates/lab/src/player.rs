//! `resound-tool legacy-player`: a stand-in for an unmodified media player
//! (it knows nothing of reservations). Every frame it does `--work-us` of CPU
//! work, "shows" the frame, then sleeps to the next frame time with
//! `clock_nanosleep`; a late frame is shown as soon as it is ready and the
//! next one keeps the frame grid (after more than a frame of delay the grid
//! restarts from now, as players drop to catch up). At the end (after
//! `--frames`, `--seconds`, or SIGINT/SIGTERM) it prints one JSON line with
//! its inter-frame times (the time between two frames shown).
//!
//! Threads: the process's main thread does everything; `--threads N` adds
//! N - 1 identical frame threads (a multi-threaded player).

use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Options of `resound-tool legacy-player`.
#[derive(Debug, clap::Args)]
pub struct PlayerArgs {
    /// Frames per second.
    #[arg(long, default_value_t = 25.0)]
    pub fps: f64,
    /// CPU work per frame (microseconds of the thread's CPU time).
    #[arg(long, default_value_t = 8_000)]
    pub work_us: u64,
    /// Stop after this many frames (default: until --seconds or a signal).
    #[arg(long)]
    pub frames: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Frame threads (each a copy of the loop; only the first one reports).
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Print the list of inter-frame times too (ms), not only the summary.
    #[arg(long)]
    pub all: bool,
}

fn mono_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn sleep_until(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Burns `ns` of this thread's CPU time.
fn work(ns: u64) {
    let start = mono_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    while mono_ns(libc::CLOCK_THREAD_CPUTIME_ID) - start < ns {
        std::hint::spin_loop();
    }
}

/// The frame loop; returns the times frames were shown.
fn frames(a: &PlayerArgs, end_ns: u64) -> Vec<u64> {
    let period = (1e9 / a.fps) as u64;
    let mut shown = Vec::with_capacity(a.frames.unwrap_or(10_000) as usize);
    let mut next = mono_ns(libc::CLOCK_MONOTONIC);
    while !STOP.load(Ordering::Relaxed) && a.frames.is_none_or(|n| (shown.len() as u64) < n) {
        work(a.work_us * 1000);
        let now = mono_ns(libc::CLOCK_MONOTONIC);
        shown.push(now);
        if now >= end_ns {
            break;
        }
        next += period;
        if now > next + period {
            next = now;
        }
        sleep_until(next);
    }
    shown
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Runs the player; prints `{"frames":N,"period_ms":..,"p50_ms":..,"p90_ms":..,"p95_ms":..,"max_ms":..,"late":N,"cpu_ms":..,"wall_ms":..}`
/// (late: inter-frame times over 110 % of the period; cpu_ms: the process's CPU time).
pub fn run(a: PlayerArgs) -> Result<(), String> {
    if a.fps <= 0.0 || !a.fps.is_finite() {
        return Err(format!("--fps must be positive, not {}", a.fps));
    }
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe).
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
    let t0 = mono_ns(libc::CLOCK_MONOTONIC);
    let end = a.seconds.map_or(u64::MAX, |s| {
        mono_ns(libc::CLOCK_MONOTONIC) + (s * 1e9) as u64
    });
    let a = std::sync::Arc::new(a);
    let others: Vec<_> = (1..a.threads)
        .map(|_| {
            let a = a.clone();
            std::thread::spawn(move || frames(&a, end))
        })
        .collect();
    let shown = frames(&a, end);
    STOP.store(true, Ordering::Relaxed);
    for t in others {
        let _ = t.join();
    }
    let mut gaps: Vec<f64> = shown
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .collect();
    let list = gaps.clone();
    gaps.sort_by(f64::total_cmp);
    let period_ms = 1000.0 / a.fps;
    let pct = |p: f64| -> f64 {
        if gaps.is_empty() {
            return 0.0;
        }
        let i = ((p / 100.0) * gaps.len() as f64).ceil() as usize;
        gaps[i.clamp(1, gaps.len()) - 1]
    };
    let mut out = json!({
        "frames": shown.len(),
        "period_ms": period_ms,
        "p50_ms": pct(50.0),
        "p90_ms": pct(90.0),
        "p95_ms": pct(95.0),
        "max_ms": gaps.last().copied().unwrap_or(0.0),
        "late": gaps.iter().filter(|g| **g > period_ms * 1.1).count(),
        "cpu_ms": mono_ns(libc::CLOCK_PROCESS_CPUTIME_ID) as f64 / 1e6,
        "wall_ms": (mono_ns(libc::CLOCK_MONOTONIC) - t0) as f64 / 1e6,
    });
    if a.all {
        out["interframe_ms"] = json!(list);
    }
    println!("{out}");
    Ok(())
}
