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

/// Duration of `frames` audio frames at `rate` Hz, in ns (rounded down; 0
/// for a rate of 0). The one place resound turns frames into time: periods,
/// reservation periods, latencies and time stamps all go through here.
/// Real-time safe.
#[inline]
pub const fn frames_to_ns(frames: u64, rate: u32) -> u64 {
    if rate == 0 {
        return 0;
    }
    (frames as u128 * 1_000_000_000 / rate as u128) as u64
}

/// Audio frames that fit in `ns` at `rate` Hz (rounded down). The inverse
/// of [`frames_to_ns`]. Real-time safe.
#[inline]
pub const fn ns_to_frames(ns: u64, rate: u32) -> u64 {
    (ns as u128 * rate as u128 / 1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_ns_convert_both_ways() {
        assert_eq!(frames_to_ns(128, 48_000), 2_666_666);
        assert_eq!(frames_to_ns(48_000, 48_000), 1_000_000_000);
        assert_eq!(frames_to_ns(1, 0), 0);
        assert_eq!(ns_to_frames(2_666_666, 48_000), 127);
        assert_eq!(ns_to_frames(1_000_000_000, 44_100), 44_100);
        // No overflow for the largest values a header can hold.
        assert_eq!(
            frames_to_ns(u32::MAX as u64, 1),
            u32::MAX as u64 * 1_000_000_000
        );
    }
}
