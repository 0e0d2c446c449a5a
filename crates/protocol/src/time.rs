//! Clocks in nanoseconds. Real-time safe: `clock_gettime` is served by the vDSO
//! for CLOCK_MONOTONIC; the thread CPU clock is a cheap syscall.

use rustix::time::{clock_gettime, ClockId, Timespec};

/// CLOCK_MONOTONIC now, in ns.
#[inline]
pub fn monotonic_ns() -> u64 {
    ts_to_ns(clock_gettime(ClockId::Monotonic))
}

/// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID), in ns.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    ts_to_ns(clock_gettime(ClockId::ThreadCPUTime))
}

/// Timespec to ns (negative values clamp to 0).
#[inline]
pub fn ts_to_ns(ts: Timespec) -> u64 {
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec.max(0) as u64)
}

/// ns to Timespec.
#[inline]
pub fn ns_to_ts(ns: u64) -> Timespec {
    Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `deadline_ns`.
/// Restarts on EINTR. Real-time safe (one syscall).
pub fn sleep_until(deadline_ns: u64) {
    let ts = ns_to_ts(deadline_ns);
    loop {
        match rustix::thread::clock_nanosleep_absolute(rustix::thread::ClockId::Monotonic, &ts) {
            Ok(()) => return,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return,
        }
    }
}
