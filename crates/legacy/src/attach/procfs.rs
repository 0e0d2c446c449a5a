//! What the attach loop reads about a thread from `/proc`: its CPU time and
//! run-queue wait (`/proc/PID/task/TID/schedstat`), its voluntary context
//! switches (`status`), whether it is blocked now (`stat`), and the
//! process's threads and liveness.
//!
//! Why these: `clock_gettime` on another process's thread CPU clock is not
//! allowed, `sched_getattr` gives the parameters but not the CBS state, and
//! the `dl.deadline` line of `/proc/PID/task/TID/sched` is on the kernel's
//! run-queue clock (not `CLOCK_MONOTONIC`) and, on the hard CBS, never more
//! than a period ahead anyway; schedstat's `run_delay` includes the time a
//! SCHED_DEADLINE thread spends throttled, which is what lateness looks like.
//!
//! Threads: the attach loop's thread. Allocates (file reads); never on a
//! real-time path.

use std::fs;

/// Cumulative counters of one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// CPU time used (ns).
    pub cpu_ns: u64,
    /// Time ready but not running, throttled included (ns).
    pub wait_ns: u64,
    /// Voluntary context switches (blocking calls).
    pub voluntary: u64,
    /// Blocked at the time of reading (state S or D in `stat`): every job
    /// counted in `voluntary` has ended, none is half done.
    pub sleeping: bool,
}

/// The thread's counters, `None` if it is gone.
pub fn counters(pid: i32, tid: i32) -> Option<Counters> {
    let st = fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    let mut it = st.split_whitespace().map(|v| v.parse::<u64>().ok());
    let cpu_ns = it.next()??;
    let wait_ns = it.next()??;
    let status = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    let voluntary = status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())?;
    let stat = fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let sleeping = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|s| s == "S" || s == "D");
    Some(Counters {
        cpu_ns,
        wait_ns,
        voluntary,
        sleeping,
    })
}

/// The thread's current SCHED_DEADLINE scheduling deadline (`dl.deadline`
/// in `/proc/PID/task/TID/sched`, ns on the run-queue clock: only its
/// differences count); `None` when the thread is gone or the kernel does not
/// show it.
pub fn dl_deadline(pid: i32, tid: i32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/task/{tid}/sched")).ok()?;
    s.lines().find_map(|l| {
        let v = l.strip_prefix("dl.deadline")?.split(':').nth(1)?;
        v.trim().parse().ok()
    })
}

/// The process's thread ids, sorted (empty if it is gone or a zombie).
pub fn threads(pid: i32) -> Vec<i32> {
    if !alive(pid) {
        return Vec::new();
    }
    let mut v: Vec<i32> = fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Whether the process exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// The thread's name (`comm`), or "?".
pub fn comm(pid: i32, tid: i32) -> String {
    fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_threads_and_counters() {
        let pid = std::process::id() as i32;
        let tids = threads(pid);
        assert!(tids.contains(&pid));
        let c = counters(pid, pid).expect("own counters");
        assert!(c.cpu_ns > 0);
        assert!(alive(pid));
        assert!(!alive(i32::MAX));
        assert!(counters(pid, i32::MAX).is_none());
    }
}
