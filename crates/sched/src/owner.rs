//! Who may change a thread's scheduling: the rule the server applies to a
//! client's reservation requests and `resound reserve` applies before
//! calling the kernel. A user other than root may change only the threads
//! of its own processes, the ones it could ptrace: the process's real,
//! effective and saved uids all its own.
//!
//! Threads: any (reads a `/proc/PID/status` text given by the caller).

/// The real, effective, saved and filesystem uids of a `/proc/PID/status`
/// text (empty if it has no `Uid:` line).
pub fn uids(proc_status: &str) -> Vec<u32> {
    proc_status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .map(|u| {
            u.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether user `uid` may change the scheduling of the process whose
/// `/proc/PID/status` text is `proc_status` (root may change any).
pub fn may_change(uid: u32, proc_status: &str) -> bool {
    let u = uids(proc_status);
    uid == 0 || (u.len() >= 3 && u[..3].iter().all(|&x| x == uid))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\n";

    #[test]
    fn own_processes_and_root_only() {
        assert_eq!(uids(STATUS), vec![1000; 4]);
        assert!(may_change(1000, STATUS));
        assert!(may_change(0, STATUS));
        assert!(!may_change(1001, STATUS));
        // A setuid process (saved uid another user's) is not its caller's.
        assert!(!may_change(1000, "Uid:\t1000\t1000\t0\t1000\n"));
        assert!(!may_change(1000, "Name:\tno uid line\n"));
    }
}
