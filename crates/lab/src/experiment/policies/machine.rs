//! What else runs on the machine during a measurement: other resound
//! processes, and the CPU time used by processes outside the run or stolen
//! by the hypervisor (from `/proc`). Runs on the main thread.

/// resoundd / resound-tool processes on this machine that this process did
/// not start (another experiment, a test run): they compete for the CPUs.
pub(super) fn other_resound_processes() -> usize {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| {
        let pid = e.ok()?.file_name().into_string().ok()?;
        pid.bytes().all(|b| b.is_ascii_digit()).then_some(pid)
    })
    .filter(|pid| {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !matches!(comm.trim(), "resoundd" | "resound-tool") {
            return false;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .map(str::trim);
        ppid != Some(me.as_str())
    })
    .count()
}

/// CPU accounting snapshot: the machine's busy and stolen clock ticks (all
/// CPUs), the total, and the ticks of this run's processes.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuTicks {
    busy: u64,
    steal: u64,
    total: u64,
    ours: u64,
}

/// user+system ticks of a process (all its threads) from /proc/PID/stat.
fn proc_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0)
}

pub(super) fn cpu_ticks(ours: &[u32]) -> Option<CpuTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let v: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    if v.len() < 8 {
        return None;
    }
    let total: u64 = v.iter().sum();
    Some(CpuTicks {
        busy: total - v[3] - v[4] - v[7],
        steal: v[7],
        total,
        ours: ours.iter().map(|&p| proc_ticks(p)).sum(),
    })
}

/// (CPUs used by processes outside this run, CPUs stolen) between two snapshots.
pub(super) fn foreign_load(a: CpuTicks, b: CpuTicks) -> Option<(f64, f64)> {
    let total = b.total.checked_sub(a.total).filter(|&t| t > 0)? as f64;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let busy = b.busy.saturating_sub(a.busy) as f64;
    let ours = b.ours.saturating_sub(a.ours) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    Some((
        ((busy - ours) / total * cpus).max(0.0),
        steal / total * cpus,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_load_subtracts_our_processes() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let a = CpuTicks {
            busy: 1000,
            steal: 10,
            total: 5000,
            ours: 300,
        };
        // 1000 ticks elapsed on all CPUs together: 500 busy, 300 of them ours, 50 stolen.
        let b = CpuTicks {
            busy: 1500,
            steal: 60,
            total: 6000,
            ours: 600,
        };
        let (foreign, steal) = foreign_load(a, b).unwrap();
        assert!((foreign - 0.2 * cpus).abs() < 1e-9);
        assert!((steal - 0.05 * cpus).abs() < 1e-9);
        assert!(foreign_load(b, b).is_none());
        // This process's own accounting reads back.
        assert!(cpu_ticks(&[std::process::id()]).is_some());
    }
}
