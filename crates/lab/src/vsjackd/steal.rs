//! The time the host took from this virtual machine's CPUs ("steal"), from
//! the `cpu` line of `/proc/stat` read before and after a window. On a
//! shared virtual machine it says how much of a run the hypervisor held
//! the virtual CPUs for while other guests ran: two servers compared side
//! by side are compared fairly only if their runs were robbed alike.
//! Stalls the host does not report as steal stay invisible here (see
//! docs/architecture.md, "A thread its throttle holds: the rescue"). Runs
//! on the bench's main thread.

/// The host's steal time so far, summed over every CPU (ns), with the
/// kernel's 1/USER_HZ resolution (10 ms on most kernels).
pub fn host_steal_ns() -> Result<u64, String> {
    let p = "/proc/stat";
    let s = std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"))?;
    let ticks =
        parse_steal_ticks(&s).ok_or_else(|| format!("{p}: no steal field on its cpu line"))?;
    Ok(ticks_to_ns(ticks, user_hz()))
}

/// The steal field (the eighth number) of the `cpu` line of `/proc/stat`,
/// in USER_HZ ticks; None when the line or the field is missing.
fn parse_steal_ticks(stat: &str) -> Option<u64> {
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some("cpu"))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// `ticks` of 1/`hz` s in ns.
fn ticks_to_ns(ticks: u64, hz: u64) -> u64 {
    ticks.saturating_mul(1_000_000_000) / hz.max(1)
}

/// The kernel's USER_HZ (the unit of `/proc/stat`), 100 if unknown.
fn user_hz() -> u64 {
    // SAFETY: sysconf only reads a configuration value; _SC_CLK_TCK is
    // a valid name on Linux.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_the_eighth_number_of_the_cpu_line() {
        let stat = "cpu  2424322 2030 1852360 7562245 28427 0 5880 163597 0 0\n\
                    cpu0 1050792 924 925541 3965404 6709 0 1654 81967 0 0\n";
        assert_eq!(parse_steal_ticks(stat), Some(163_597));
    }

    #[test]
    fn a_cpu_line_without_steal_or_no_cpu_line_says_none() {
        assert_eq!(parse_steal_ticks("cpu  1 2 3 4 5 6 7\n"), None);
        assert_eq!(parse_steal_ticks("cpu0 1 2 3 4 5 6 7 8 9 10\n"), None);
        assert_eq!(parse_steal_ticks(""), None);
    }

    #[test]
    fn ticks_become_nanoseconds_at_user_hz() {
        assert_eq!(ticks_to_ns(3, 100), 30_000_000);
        assert_eq!(ticks_to_ns(3, 250), 12_000_000);
        assert_eq!(
            ticks_to_ns(3, 0),
            3_000_000_000,
            "a zero rate is taken as 1"
        );
    }

    #[test]
    fn this_machine_reports_a_steal_time_that_never_goes_back() {
        let a = host_steal_ns().expect("/proc/stat has a steal field on Linux");
        let b = host_steal_ns().unwrap();
        assert!(b >= a, "{a} then {b}");
    }
}
