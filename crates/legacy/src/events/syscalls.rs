//! Names and numbers of the blocking system calls a tracer can watch, and
//! the default set (the calls a multimedia program blocks in once per frame,
//! after "The Wizard of OS: a Heartbeat for Legacy Multimedia Applications":
//! `read`, `usleep`/`nanosleep`, extended with the waits modern players use).

/// The system calls this crate knows by name, with the host's numbers.
const TABLE: &[(&str, libc::c_long)] = &[
    ("read", libc::SYS_read),
    ("readv", libc::SYS_readv),
    ("pread64", libc::SYS_pread64),
    ("recvfrom", libc::SYS_recvfrom),
    ("recvmsg", libc::SYS_recvmsg),
    ("recvmmsg", libc::SYS_recvmmsg),
    ("write", libc::SYS_write),
    ("ioctl", libc::SYS_ioctl),
    ("nanosleep", libc::SYS_nanosleep),
    ("clock_nanosleep", libc::SYS_clock_nanosleep),
    ("poll", libc::SYS_poll),
    ("ppoll", libc::SYS_ppoll),
    ("select", libc::SYS_select),
    ("pselect6", libc::SYS_pselect6),
    ("epoll_wait", libc::SYS_epoll_wait),
    ("epoll_pwait", libc::SYS_epoll_pwait),
    ("epoll_pwait2", libc::SYS_epoll_pwait2),
    ("futex", libc::SYS_futex),
    ("sched_yield", libc::SYS_sched_yield),
];

/// The default events of interest: the calls a program blocks in while
/// waiting for its next frame (timer sleeps, reads, poll-family waits and
/// futex waits).
pub const DEFAULT: &[&str] = &[
    "read",
    "readv",
    "recvfrom",
    "recvmsg",
    "nanosleep",
    "clock_nanosleep",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "epoll_wait",
    "epoll_pwait",
    "futex",
];

/// A set of system-call numbers, cheap to test (a bitmap over 0..512).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyscallSet {
    bits: [u64; 8],
}

impl SyscallSet {
    /// The empty set.
    pub fn empty() -> Self {
        Self { bits: [0; 8] }
    }

    /// Add `nr` (numbers outside 0..512 are ignored).
    pub fn insert(&mut self, nr: i64) {
        if (0..512).contains(&nr) {
            self.bits[nr as usize / 64] |= 1 << (nr % 64);
        }
    }

    /// Is `nr` in the set? Real-time safe.
    pub fn contains(&self, nr: i64) -> bool {
        (0..512).contains(&nr) && self.bits[nr as usize / 64] & (1 << (nr % 64)) != 0
    }

    /// The numbers in the set, ascending.
    pub fn numbers(&self) -> Vec<i64> {
        (0..512).filter(|&n| self.contains(n)).collect()
    }
}

/// The number of the system call called `name`, if known.
#[allow(clippy::unnecessary_cast)] // c_long is i32 on 32-bit targets
pub fn syscall_nr(name: &str) -> Option<i64> {
    TABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, nr)| nr as i64)
}

/// The name of system call `nr`, if it is one this crate knows.
#[allow(clippy::unnecessary_cast)] // c_long is i32 on 32-bit targets
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|&&(_, n)| n as i64 == nr)
        .map(|(n, _)| *n)
}

/// The default set (`DEFAULT`).
pub fn default_set() -> SyscallSet {
    parse_set(&DEFAULT.join(",")).expect("the default names are in the table")
}

/// Parse a comma-separated list of system-call names (`read,poll,...`),
/// `default` for `DEFAULT`, or numbers.
pub fn parse_set(list: &str) -> Result<SyscallSet, String> {
    let mut set = SyscallSet::empty();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name == "default" {
            DEFAULT
                .iter()
                .for_each(|n| set.insert(syscall_nr(n).unwrap_or(-1)));
        } else if let Some(nr) = syscall_nr(name).or_else(|| name.parse().ok()) {
            set.insert(nr);
        } else {
            let known: Vec<&str> = TABLE.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "unknown system call '{name}' (known: {}; or a number)",
                known.join(", ")
            ));
        }
    }
    if set.numbers().is_empty() {
        return Err("the event list is empty".into());
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_numbers_and_default() {
        let s = parse_set("read, poll,7").unwrap();
        assert!(s.contains(syscall_nr("read").unwrap()));
        assert!(s.contains(7));
        assert!(!s.contains(syscall_nr("futex").unwrap()));
        assert!(default_set().contains(syscall_nr("clock_nanosleep").unwrap()));
        assert!(parse_set("read,bogus").unwrap_err().contains("bogus"));
        assert!(parse_set("").is_err());
    }
}
