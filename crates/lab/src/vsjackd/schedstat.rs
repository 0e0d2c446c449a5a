//! The servers' driver threads and their CPU time, from procfs: a thread's
//! `/proc/PID/task/TID/schedstat` (first field: nanoseconds on the CPU) read
//! before and after the measured window. resoundd names its driver thread
//! `resound-driver`; jackd2 does not name its threads, so its driver thread
//! is the SCHED_FIFO thread of the jackd process that used the most CPU over
//! a short sample while the chain runs (with the dummy driver the only
//! thread busy every cycle). Runs on the bench's main thread.

use std::time::Duration;

/// How long the busiest-thread sample lasts.
const SAMPLE: Duration = Duration::from_millis(300);

/// A server's driver thread.
#[derive(Debug, Clone)]
pub struct DriverThread {
    /// Its thread id.
    pub tid: u32,
    /// Its name (`comm`).
    pub comm: String,
    /// How it was found.
    pub found_by: &'static str,
}

/// Nanoseconds thread `tid` of process `pid` has run on a CPU.
pub fn thread_cpu_ns(pid: u32, tid: u32) -> Result<u64, String> {
    thread_schedstat(pid, tid).map(|s| s.cpu_ns)
}

/// What the kernel's schedstat of a thread says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStat {
    /// Time on a CPU (ns).
    pub cpu_ns: u64,
    /// Times it was put on a CPU (each wake-up, and each return after a
    /// preemption).
    pub runs: u64,
}

/// Thread `tid` of process `pid`'s schedstat.
pub fn thread_schedstat(pid: u32, tid: u32) -> Result<SchedStat, String> {
    let p = format!("/proc/{pid}/task/{tid}/schedstat");
    let s = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
    parse_schedstat(&s).ok_or_else(|| format!("{p}: unexpected contents {s:?}"))
}

/// A schedstat line: CPU time (ns), run-queue wait (ns), runs.
fn parse_schedstat(s: &str) -> Option<SchedStat> {
    let mut f = s.split_whitespace().map(|v| v.parse::<u64>().ok());
    let cpu_ns = f.next()??;
    let _waited_ns = f.next()??;
    let runs = f.next()??;
    Some(SchedStat { cpu_ns, runs })
}

/// The threads of `pid`: (tid, comm, scheduling policy number).
fn threads(pid: u32) -> Result<Vec<(u32, String, u32)>, String> {
    let dir = format!("/proc/{pid}/task");
    let mut v = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| format!("{dir}: {e}"))? {
        let Some(tid) = e
            .ok()
            .and_then(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("{dir}/{tid}/comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("{dir}/{tid}/stat")).unwrap_or_default();
        v.push((tid, comm.trim().to_string(), policy_of(&stat)));
    }
    Ok(v)
}

/// The policy field (41st) of a `/proc/…/stat` line (0 when unreadable).
fn policy_of(stat: &str) -> u32 {
    // The name (2nd field) is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    rest.split_whitespace()
        .nth(41 - 3)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Finds the driver thread of server process `pid`: by name for resoundd,
/// as the busiest real-time thread for jackd2 (`busiest`).
pub fn driver_thread(pid: u32, busiest: bool) -> Result<DriverThread, String> {
    let all = threads(pid)?;
    if !busiest {
        return all
            .into_iter()
            .find(|(_, c, _)| c == "resound-driver")
            .map(|(tid, comm, _)| DriverThread {
                tid,
                comm,
                found_by: "name resound-driver",
            })
            .ok_or_else(|| format!("resoundd {pid} has no resound-driver thread"));
    }
    let before: Vec<(u32, u64)> = all
        .iter()
        .map(|t| (t.0, thread_cpu_ns(pid, t.0).unwrap_or(0)))
        .collect();
    std::thread::sleep(SAMPLE);
    let rt = all.iter().any(|t| t.2 == libc::SCHED_FIFO as u32);
    let found_by = if rt {
        "busiest SCHED_FIFO thread"
    } else {
        "busiest thread (none is SCHED_FIFO)"
    };
    all.iter()
        .zip(&before)
        .filter(|(t, _)| !rt || t.2 == libc::SCHED_FIFO as u32)
        .map(|(t, b)| {
            let d = thread_cpu_ns(pid, t.0).unwrap_or(0).saturating_sub(b.1);
            (d, t)
        })
        .max_by_key(|(d, _)| *d)
        .map(|(_, t)| DriverThread {
            tid: t.0,
            comm: t.1.clone(),
            found_by,
        })
        .ok_or_else(|| format!("process {pid} has no threads"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_field_after_a_name_with_spaces() {
        let mut line = "12 (a b) S".to_string();
        for i in 4..=45 {
            line += &format!(" {}", if i == 41 { 1 } else { 0 });
        }
        assert_eq!(policy_of(&line), 1);
        assert_eq!(policy_of("garbage"), 0);
    }

    #[test]
    fn schedstat_fields_in_order() {
        let s = parse_schedstat("123 456 7\n").unwrap();
        assert_eq!(
            s,
            SchedStat {
                cpu_ns: 123,
                runs: 7
            }
        );
        assert_eq!(parse_schedstat("123 456"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn own_thread_runs_grow_with_its_sleeps() {
        let (pid, tid) = (std::process::id(), resound_sched::policy::gettid() as u32);
        let a = thread_schedstat(pid, tid).unwrap();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let b = thread_schedstat(pid, tid).unwrap();
        assert!(b.runs >= a.runs + 20, "{a:?} then {b:?}");
    }

    #[test]
    fn own_thread_cpu_time_grows() {
        let (pid, tid) = (std::process::id(), resound_sched::policy::gettid() as u32);
        let a = thread_cpu_ns(pid, tid).unwrap();
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(30) {}
        assert!(thread_cpu_ns(pid, tid).unwrap() >= a + 1_000_000);
    }
}
