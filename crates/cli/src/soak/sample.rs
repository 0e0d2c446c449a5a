//! What `resound soak` watches in the server: open file descriptors (and
//! how many are memfds), resident memory and threads of the `resoundd`
//! process, read from `/proc`, and the bandwidth in its admission ledger.
//!
//! Runs on the soak's main thread.

use resound_protocol::wire::Status;

/// One reading of the server's resources.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the soak started.
    pub t: f64,
    /// Open file descriptors.
    pub fds: u64,
    /// Of which memfds (shared-memory segments).
    pub memfds: u64,
    /// Resident set size (KiB).
    pub rss_kib: u64,
    /// Threads.
    pub threads: u64,
    /// Bandwidth admitted by the server's ledger (CPUs).
    pub ledger: f64,
    /// Real-time threads with a reservation entry (driver included).
    pub reserved_threads: u64,
    /// Clients of the server.
    pub clients: u64,
    /// Cycles of the sample-exact chain lost so far (bad or missing blocks).
    pub lost: u64,
}

/// Reads the server `pid`'s resources; `st` is its status at the same time.
pub fn read(pid: u32, t: f64, st: &Status, lost: u64) -> Result<Sample, String> {
    let p = proc_figures(pid)?;
    Ok(Sample {
        t,
        fds: p.fds,
        memfds: p.memfds,
        rss_kib: p.rss_kib,
        threads: p.threads,
        ledger: st.ledger_used,
        reserved_threads: st.reservations.len() as u64,
        clients: st.clients.len() as u64,
        lost,
    })
}

/// What `/proc` tells of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcFigures {
    /// Open file descriptors.
    pub fds: u64,
    /// Of which memfds.
    pub memfds: u64,
    /// Resident set size (KiB).
    pub rss_kib: u64,
    /// Threads.
    pub threads: u64,
}

/// Reads process `pid`'s descriptors, memory and threads from `/proc`.
pub fn proc_figures(pid: u32) -> Result<ProcFigures, String> {
    let fd_dir = format!("/proc/{pid}/fd");
    let mut fds = 0;
    let mut memfds = 0;
    for e in std::fs::read_dir(&fd_dir).map_err(|e| format!("{fd_dir}: {e}"))? {
        let Ok(e) = e else { continue };
        fds += 1;
        if std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy().starts_with("/memfd:")) {
            memfds += 1;
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| format!("/proc/{pid}/status: {e}"))?;
    Ok(ProcFigures {
        fds,
        memfds,
        rss_kib: field(&status, "VmRSS:"),
        threads: field(&status, "Threads:"),
    })
}

/// The first number after `key` in a `/proc/PID/status` text (0 if absent).
fn field(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The CSV header of [`Sample::csv`].
pub const CSV_HEADER: &str =
    "t_s,fds,memfds,rss_kib,threads,ledger_cpus,reserved_threads,clients,lost_cycles";

impl Sample {
    /// One CSV line.
    pub fn csv(&self) -> String {
        format!(
            "{:.1},{},{},{},{},{:.4},{},{},{}",
            self.t,
            self.fds,
            self.memfds,
            self.rss_kib,
            self.threads,
            self.ledger,
            self.reserved_threads,
            self.clients,
            self.lost
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields_are_read_by_key() {
        let s = "Name:\tresoundd\nVmRSS:\t   12345 kB\nThreads:\t7\n";
        assert_eq!(field(s, "VmRSS:"), 12345);
        assert_eq!(field(s, "Threads:"), 7);
        assert_eq!(field(s, "VmSwap:"), 0);
    }

    #[test]
    fn this_process_can_be_read() {
        let p = proc_figures(std::process::id()).unwrap();
        assert!(p.fds >= 3 && p.threads >= 1 && p.rss_kib > 0, "{p:?}");
    }
}
