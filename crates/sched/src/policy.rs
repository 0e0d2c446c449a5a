//! Scheduling policies and the syscalls that set and read them.
//!
//! Threads: every function may be called from any thread. [`apply`],
//! [`current`] and [`drop_own_reservation`] are real-time safe on success (one
//! syscall, no allocation, no lock); only the error path allocates (its
//! message). [`deadline_permitted`] and [`fifo_permitted`] spawn a helper
//! thread the first time they are called: call them once at start-up, never
//! on a real-time path.
//!
//! # Kernel behaviour this module is written around
//!
//! Measured on the target kernel (Linux 6.18, HZ=250) by
//! `cargo run -p resound-sched --release --example kernel_pitfalls`:
//!
//! * A SCHED_DEADLINE thread cannot fork or create threads (`EAGAIN`) unless
//!   `SCHED_FLAG_RESET_ON_FORK` is set; [`apply`] always sets it for FIFO and
//!   DEADLINE, so children start as SCHED_OTHER.
//! * `sched_setattr` is refused with `EBUSY` when the kernel's admission test
//!   fails ([`SchedErrorKind::Busy`]); see [`crate::ledger`] for our own
//!   bookkeeping of what is admitted. A single thread may hold a whole CPU
//!   (runtime = period).
//! * A thread that leaves SCHED_DEADLINE gives its bandwidth back at its
//!   *0-lag time* (`deadline - remaining runtime x period / runtime`): at once
//!   if it used little of its current budget, otherwise up to one period
//!   later. A re-admission in that window is refused with `EBUSY`.
//! * Switching a *sleeping* deadline thread to SCHED_OTHER from another
//!   thread after its 0-lag time has passed **leaks** its bandwidth in the
//!   kernel's admission accounting for good (until the root domain is
//!   rebuilt). A thread must leave its reservation itself, while running:
//!   [`drop_own_reservation`].
//! * A budget change reaches a throttled thread only at its old
//!   replenishment time (it keeps its old deadline), and overruns are caught
//!   at the scheduler tick (4 ms), not at the budget.
//! * Changing the parameters of a sleeping deadline thread from another
//!   thread (DEADLINE to DEADLINE) is safe and costs well under 2 us.

use std::fmt::Write as _;
use std::sync::OnceLock;

/// `SCHED_OTHER` (`SCHED_NORMAL`) policy number.
pub const SCHED_OTHER: u32 = 0;
/// `SCHED_FIFO` policy number.
pub const SCHED_FIFO: u32 = 1;
/// `SCHED_RR` policy number.
pub const SCHED_RR: u32 = 2;
/// `SCHED_BATCH` policy number.
pub const SCHED_BATCH: u32 = 3;
/// `SCHED_IDLE` policy number.
pub const SCHED_IDLE: u32 = 5;
/// `SCHED_DEADLINE` policy number.
pub const SCHED_DEADLINE: u32 = 6;

/// Children of the thread start with the default policy (SCHED_OTHER, nice 0).
pub const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;
/// SCHED_DEADLINE only: the thread may reclaim bandwidth left unused by
/// others (GRUB), beyond its own runtime.
pub const SCHED_FLAG_RECLAIM: u64 = 0x02;
/// SCHED_DEADLINE only: deliver SIGXCPU on a runtime overrun.
pub const SCHED_FLAG_DL_OVERRUN: u64 = 0x04;

/// Smallest runtime the kernel accepts for SCHED_DEADLINE (`1 << DL_SCALE` ns).
pub const MIN_RUNTIME_NS: u64 = 1 << 10;
/// Default smallest SCHED_DEADLINE period (`/proc/sys/kernel/sched_deadline_period_min_us`, 100 us).
pub const MIN_PERIOD_NS: u64 = 100_000;

/// The kernel's `struct sched_attr` (include/uapi/linux/sched/types.h),
/// version 1 (56 bytes, with the utilization clamps), as passed to
/// `sched_setattr(2)` / `sched_getattr(2)`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedAttr {
    /// Size of this structure in bytes (`size_of::<SchedAttr>()` = 56). The
    /// kernel uses it to tell structure versions apart.
    pub size: u32,
    /// Policy number: [`SCHED_OTHER`], [`SCHED_FIFO`], [`SCHED_RR`],
    /// [`SCHED_BATCH`], [`SCHED_IDLE`] or [`SCHED_DEADLINE`].
    pub sched_policy: u32,
    /// `SCHED_FLAG_*` bits ([`SCHED_FLAG_RESET_ON_FORK`], [`SCHED_FLAG_RECLAIM`], ...).
    pub sched_flags: u64,
    /// Nice value (-20..=19) for SCHED_OTHER / SCHED_BATCH; 0 otherwise.
    pub sched_nice: i32,
    /// Static priority (1..=99) for SCHED_FIFO / SCHED_RR; 0 otherwise.
    pub sched_priority: u32,
    /// SCHED_DEADLINE: CPU time granted per period (ns), >= 1024.
    pub sched_runtime: u64,
    /// SCHED_DEADLINE: relative deadline from each period start (ns),
    /// runtime <= deadline <= period.
    pub sched_deadline: u64,
    /// SCHED_DEADLINE: period (ns); 0 means "equal to the deadline".
    pub sched_period: u64,
    /// Utilization clamp minimum (0..=1024), used with `SCHED_FLAG_UTIL_CLAMP_MIN`; 0 here.
    pub sched_util_min: u32,
    /// Utilization clamp maximum (0..=1024), used with `SCHED_FLAG_UTIL_CLAMP_MAX`; 0 here.
    pub sched_util_max: u32,
}

const ATTR_SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;
const _: () = assert!(ATTR_SIZE == 56);

/// A thread's scheduling policy, as resound uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_OTHER (CFS/EEVDF), nice 0.
    Other,
    /// SCHED_FIFO at a static priority (1..=99).
    Fifo {
        /// Static priority, 1..=99.
        priority: i32,
    },
    /// SCHED_DEADLINE reservation: `runtime_ns` of CPU every `period_ns`,
    /// to be received within `deadline_ns` of each period start.
    Deadline {
        /// Budget per period (ns).
        runtime_ns: u64,
        /// Relative deadline (ns), runtime <= deadline <= period.
        deadline_ns: u64,
        /// Period (ns).
        period_ns: u64,
        /// Set `SCHED_FLAG_RECLAIM` (GRUB: use bandwidth others leave unused).
        reclaim: bool,
    },
}

impl Policy {
    /// Human-readable form: `"SCHED_DEADLINE 300/2667/2667 us reclaim"`,
    /// `"SCHED_FIFO 10"`, `"SCHED_OTHER"` (times rounded to microseconds).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let _ = write!(s, "{self}");
        s
    }

    /// Fraction of one CPU reserved: runtime / period for Deadline, 0 otherwise.
    pub fn bandwidth(&self) -> f64 {
        match *self {
            Policy::Deadline {
                runtime_ns,
                period_ns,
                ..
            } if period_ns > 0 => runtime_ns as f64 / period_ns as f64,
            _ => 0.0,
        }
    }

    /// The `sched_attr` that [`apply`] passes to the kernel.
    pub fn to_attr(&self) -> SchedAttr {
        let mut a = SchedAttr {
            size: ATTR_SIZE,
            ..SchedAttr::default()
        };
        match *self {
            Policy::Other => a.sched_policy = SCHED_OTHER,
            Policy::Fifo { priority } => {
                a.sched_policy = SCHED_FIFO;
                a.sched_flags = SCHED_FLAG_RESET_ON_FORK;
                a.sched_priority = priority.max(0) as u32;
            }
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
                reclaim,
            } => {
                a.sched_policy = SCHED_DEADLINE;
                a.sched_flags =
                    SCHED_FLAG_RESET_ON_FORK | if reclaim { SCHED_FLAG_RECLAIM } else { 0 };
                a.sched_runtime = runtime_ns;
                a.sched_deadline = deadline_ns;
                a.sched_period = period_ns;
            }
        }
        a
    }

    /// The policy a kernel `sched_attr` describes. SCHED_RR maps to
    /// [`Policy::Fifo`] (same priority), SCHED_BATCH and SCHED_IDLE to
    /// [`Policy::Other`]: resound never sets them, and callers only need to
    /// know "real-time priority or not".
    pub fn from_attr(a: &SchedAttr) -> Policy {
        match a.sched_policy {
            SCHED_FIFO | SCHED_RR => Policy::Fifo {
                priority: a.sched_priority as i32,
            },
            SCHED_DEADLINE => Policy::Deadline {
                runtime_ns: a.sched_runtime,
                deadline_ns: a.sched_deadline,
                period_ns: if a.sched_period == 0 {
                    a.sched_deadline
                } else {
                    a.sched_period
                },
                reclaim: a.sched_flags & SCHED_FLAG_RECLAIM != 0,
            },
            _ => Policy::Other,
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let us = |ns: u64| ns.saturating_add(500) / 1000;
        match *self {
            Policy::Other => f.write_str("SCHED_OTHER"),
            Policy::Fifo { priority } => write!(f, "SCHED_FIFO {priority}"),
            Policy::Deadline {
                runtime_ns,
                deadline_ns,
                period_ns,
                reclaim,
            } => write!(
                f,
                "SCHED_DEADLINE {}/{}/{} us{}",
                us(runtime_ns),
                us(deadline_ns),
                us(period_ns),
                if reclaim { " reclaim" } else { "" }
            ),
        }
    }
}

/// Why a scheduling call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedErrorKind {
    /// `EPERM`: no CAP_SYS_NICE (or RLIMIT_RTPRIO too low, or the thread is
    /// not ours).
    Permission,
    /// `EBUSY`: the kernel's SCHED_DEADLINE admission test refused the bandwidth.
    Busy,
    /// `EINVAL`: parameters the kernel rejects (runtime > deadline > period,
    /// runtime < 1024 ns, period < 100 us, priority out of range...).
    Invalid,
    /// `ESRCH`: no such thread (it exited).
    NoSuchThread,
    /// Anything else (`E2BIG`, `EAGAIN`, `ENOSYS`...).
    Other,
}

impl SchedErrorKind {
    /// The kind for an errno value.
    pub fn from_errno(errno: i32) -> Self {
        match errno {
            libc::EPERM => SchedErrorKind::Permission,
            libc::EBUSY => SchedErrorKind::Busy,
            libc::EINVAL => SchedErrorKind::Invalid,
            libc::ESRCH => SchedErrorKind::NoSuchThread,
            _ => SchedErrorKind::Other,
        }
    }
}

/// A failed scheduling syscall.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SchedError {
    /// Classification of `errno`.
    pub kind: SchedErrorKind,
    /// The raw errno.
    pub errno: i32,
    /// What was attempted and why it failed, for logs and status.
    pub message: String,
}

impl SchedError {
    /// Builds the error for `errno` after `what` failed (allocates the message).
    pub fn new(what: std::fmt::Arguments<'_>, errno: i32) -> Self {
        let kind = SchedErrorKind::from_errno(errno);
        let why = match kind {
            SchedErrorKind::Permission => "not permitted (needs CAP_SYS_NICE)",
            SchedErrorKind::Busy => "admission refused: not enough free SCHED_DEADLINE bandwidth",
            SchedErrorKind::Invalid => "invalid parameters",
            SchedErrorKind::NoSuchThread => "no such thread",
            SchedErrorKind::Other => "failed",
        };
        let os = std::io::Error::from_raw_os_error(errno);
        SchedError {
            kind,
            errno,
            message: format!("{what}: {why} ({os})"),
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Raw `sched_setattr(tid, attr, 0)`. Returns the errno on failure. Real-time
/// safe. For callers that need flags [`apply`] does not set (the tests use it
/// to show what happens *without* `SCHED_FLAG_RESET_ON_FORK`).
pub fn set_attr(tid: i32, attr: &SchedAttr) -> Result<(), i32> {
    // SAFETY: `attr` points to a valid, initialized sched_attr whose `size`
    // field matches its layout; the kernel only reads it during the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid as libc::c_long,
            attr as *const SchedAttr,
            0 as libc::c_uint,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// Raw `sched_getattr(tid, ...)`: the thread's full attributes, including
/// its flags (`SCHED_FLAG_RESET_ON_FORK` and, for deadline, `SCHED_FLAG_RECLAIM`).
pub fn get_attr(tid: i32) -> Result<SchedAttr, SchedError> {
    get_attr_rt(tid).map_err(|e| SchedError::new(format_args!("sched_getattr(tid {tid})"), e))
}

/// [`get_attr`] without allocating, also on failure: Err carries the errno
/// (`ESRCH`: no such thread). Real-time safe.
pub fn get_attr_rt(tid: i32) -> Result<SchedAttr, i32> {
    let mut a = SchedAttr::default();
    // SAFETY: `a` is a writable sched_attr of ATTR_SIZE bytes; the kernel
    // writes at most `size` (the last argument) bytes into it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid as libc::c_long,
            &mut a as *mut SchedAttr,
            ATTR_SIZE as libc::c_uint,
            0 as libc::c_uint,
        )
    };
    if r == 0 {
        Ok(a)
    } else {
        Err(errno())
    }
}

/// Applies `p` to the thread with kernel id `tid` (0 = the calling thread)
/// with one `sched_setattr`. Fifo and Deadline always set
/// `SCHED_FLAG_RESET_ON_FORK` (so the thread can still create threads, which
/// start as SCHED_OTHER); Deadline sets `SCHED_FLAG_RECLAIM` when `reclaim`.
/// Other sets nice 0.
///
/// Real-time safe on success (one syscall, no allocation); the error path
/// allocates its message. To take a thread *out* of SCHED_DEADLINE prefer
/// [`drop_own_reservation`] on that thread (see the module docs).
pub fn apply(tid: i32, p: &Policy) -> Result<(), SchedError> {
    set_attr(tid, &p.to_attr())
        .map_err(|e| SchedError::new(format_args!("sched_setattr(tid {tid}, {p})"), e))
}

/// Applies `p` as [`apply`] does but, for SCHED_FIFO, without
/// `SCHED_FLAG_RESET_ON_FORK`: the plain SCHED_FIFO jackd gives its client
/// threads, so threads a JACK program creates from its process thread
/// inherit it, and a program that copies its process thread's policy and
/// priority to its own workers (`pthread_getschedparam`, then
/// `pthread_setschedparam`) sees a policy it can set. SCHED_DEADLINE keeps
/// the flag (without it the thread could not create threads at all).
/// Real-time safe on success.
pub fn apply_inheritable(tid: i32, p: &Policy) -> Result<(), SchedError> {
    let mut a = p.to_attr();
    if let Policy::Fifo { .. } = p {
        a.sched_flags &= !SCHED_FLAG_RESET_ON_FORK;
    }
    set_attr(tid, &a).map_err(|e| SchedError::new(format_args!("sched_setattr(tid {tid}, {p})"), e))
}

/// The policy of thread `tid` (0 = calling thread), read with `sched_getattr`.
/// See [`Policy::from_attr`] for how RR/BATCH/IDLE are mapped.
pub fn current(tid: i32) -> Result<Policy, SchedError> {
    get_attr(tid).map(|a| Policy::from_attr(&a))
}

/// Human-readable policy of thread `tid` (0 = calling thread), for status
/// lines and logs: `"SCHED_FIFO 10"`, `"SCHED_OTHER"`, `"SCHED_DEADLINE …"`,
/// or `"unknown (…)"` when it cannot be read (thread gone). Allocates.
pub fn describe_thread(tid: i32) -> String {
    match current(tid) {
        Ok(p) => p.describe(),
        Err(e) => format!("unknown ({e})"),
    }
}

/// The calling thread returns itself to SCHED_OTHER (nice 0), leaving any
/// reservation. Doing this on the reserved thread itself, while it runs, is
/// the safe way to detach: switching a *sleeping* deadline thread from
/// another thread can leak the kernel's admission bandwidth. Real-time safe.
///
/// The kernel makes the bandwidth admissible again at the thread's 0-lag
/// time: immediately if the thread used little of its current budget,
/// otherwise up to one reservation period later.
pub fn drop_own_reservation() -> Result<(), SchedError> {
    apply(0, &Policy::Other)
}

/// Bandwidth of the probe reservation: 1 ms every 100 ms (1%).
const PROBE: Policy = Policy::Deadline {
    runtime_ns: 1_000_000,
    deadline_ns: 100_000_000,
    period_ns: 100_000_000,
    reclaim: false,
};

/// Runs `f` on a short-lived helper thread (so the caller's own policy is
/// never touched) and returns its result.
fn on_helper<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    std::thread::Builder::new()
        .name("sched-probe".into())
        .spawn(f)
        .ok()?
        .join()
        .ok()
}

/// Outcome of the SCHED_DEADLINE probe (cached after the first call): `Ok`
/// if a helper thread could take a 1%-bandwidth reservation and leave it
/// again (the kernel returns that 1% within a few milliseconds, at its 0-lag
/// time), else the error it got. `EBUSY` (admission full at the time of the
/// probe) counts as permitted: the capability is there, the bandwidth may
/// come back.
pub fn deadline_probe() -> &'static Result<(), SchedError> {
    static PROBED: OnceLock<Result<(), SchedError>> = OnceLock::new();
    PROBED.get_or_init(|| {
        on_helper(|| {
            apply(0, &PROBE)?;
            drop_own_reservation()
        })
        .unwrap_or_else(|| {
            Err(SchedError {
                kind: SchedErrorKind::Other,
                errno: 0,
                message: "could not run the SCHED_DEADLINE probe thread".into(),
            })
        })
    })
}

/// Outcome of the SCHED_FIFO probe (priority 1 on a helper thread), cached.
pub fn fifo_probe() -> &'static Result<(), SchedError> {
    static PROBED: OnceLock<Result<(), SchedError>> = OnceLock::new();
    PROBED.get_or_init(|| {
        on_helper(|| {
            apply(0, &Policy::Fifo { priority: 1 })?;
            apply(0, &Policy::Other)
        })
        .unwrap_or_else(|| {
            Err(SchedError {
                kind: SchedErrorKind::Other,
                errno: 0,
                message: "could not run the SCHED_FIFO probe thread".into(),
            })
        })
    })
}

/// Whether SCHED_DEADLINE can be used here (probed once on a helper thread,
/// then cached). See [`deadline_probe`] for the reason when it cannot.
pub fn deadline_permitted() -> bool {
    match deadline_probe() {
        Ok(()) => true,
        Err(e) => e.kind == SchedErrorKind::Busy,
    }
}

/// Whether SCHED_FIFO can be used here (probed once on a helper thread, then
/// cached). See [`fifo_probe`] for the reason when it cannot.
pub fn fifo_permitted() -> bool {
    fifo_probe().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe() {
        let p = Policy::Deadline {
            runtime_ns: 300_000,
            deadline_ns: 2_666_667,
            period_ns: 2_666_667,
            reclaim: true,
        };
        assert_eq!(p.describe(), "SCHED_DEADLINE 300/2667/2667 us reclaim");
        let p = Policy::Deadline {
            runtime_ns: 300_000,
            deadline_ns: 1_000_000,
            period_ns: 2_000_000,
            reclaim: false,
        };
        assert_eq!(p.describe(), "SCHED_DEADLINE 300/1000/2000 us");
        assert_eq!(Policy::Fifo { priority: 10 }.describe(), "SCHED_FIFO 10");
        assert_eq!(Policy::Other.describe(), "SCHED_OTHER");
    }

    #[test]
    fn bandwidth() {
        let p = Policy::Deadline {
            runtime_ns: 250,
            deadline_ns: 1000,
            period_ns: 1000,
            reclaim: false,
        };
        assert_eq!(p.bandwidth(), 0.25);
        assert_eq!(Policy::Fifo { priority: 5 }.bandwidth(), 0.0);
        assert_eq!(Policy::Other.bandwidth(), 0.0);
    }

    #[test]
    fn attr_round_trip() {
        for p in [
            Policy::Other,
            Policy::Fifo { priority: 42 },
            Policy::Deadline {
                runtime_ns: 1,
                deadline_ns: 2,
                period_ns: 3,
                reclaim: true,
            },
            Policy::Deadline {
                runtime_ns: 1,
                deadline_ns: 2,
                period_ns: 3,
                reclaim: false,
            },
        ] {
            let a = p.to_attr();
            assert_eq!(a.size, 56);
            assert_eq!(Policy::from_attr(&a), p);
            assert_eq!(
                a.sched_flags & SCHED_FLAG_RESET_ON_FORK != 0,
                p != Policy::Other
            );
        }
    }

    #[test]
    fn error_kinds() {
        assert_eq!(
            SchedErrorKind::from_errno(libc::EPERM),
            SchedErrorKind::Permission
        );
        assert_eq!(
            SchedErrorKind::from_errno(libc::EBUSY),
            SchedErrorKind::Busy
        );
        assert_eq!(
            SchedErrorKind::from_errno(libc::EINVAL),
            SchedErrorKind::Invalid
        );
        assert_eq!(
            SchedErrorKind::from_errno(libc::ESRCH),
            SchedErrorKind::NoSuchThread
        );
        assert_eq!(
            SchedErrorKind::from_errno(libc::E2BIG),
            SchedErrorKind::Other
        );
        let e = SchedError::new(
            format_args!("sched_setattr(tid 7, SCHED_FIFO 1)"),
            libc::EBUSY,
        );
        assert!(
            e.to_string()
                .starts_with("sched_setattr(tid 7, SCHED_FIFO 1): admission refused"),
            "{e}"
        );
    }
}
