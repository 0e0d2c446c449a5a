//! Real-time scheduling of the calling thread (SCHED_FIFO / SCHED_OTHER).
//! The reservation work (SCHED_DEADLINE) builds on this.

use std::io;

/// Puts the calling thread under SCHED_FIFO at `priority` (1..=99).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler with pid 0 acts on the calling thread; `p` is
    // a valid sched_param for the duration of the call.
    let r =
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &p) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Human-readable policy of a thread (0 = calling thread): "SCHED_FIFO 10", "SCHED_OTHER", ...
pub fn policy_of(tid: i32) -> String {
    // SAFETY: plain syscalls with a valid out-pointer.
    let (pol, prio) = unsafe {
        let pol = libc::sched_getscheduler(tid);
        let mut p = libc::sched_param { sched_priority: 0 };
        libc::sched_getparam(tid, &mut p);
        (pol, p.sched_priority)
    };
    match pol & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_FIFO => format!("SCHED_FIFO {prio}"),
        libc::SCHED_RR => format!("SCHED_RR {prio}"),
        libc::SCHED_OTHER => "SCHED_OTHER".into(),
        libc::SCHED_BATCH => "SCHED_BATCH".into(),
        libc::SCHED_IDLE => "SCHED_IDLE".into(),
        6 => "SCHED_DEADLINE".into(),
        -1 => "unknown (thread gone)".into(),
        p => format!("policy {p}"),
    }
}

/// Kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// Returns the calling thread to SCHED_OTHER. A thread under SCHED_DEADLINE
/// should leave its reservation this way, itself and while running: resetting
/// a *sleeping* deadline thread from another thread can leak the kernel's
/// admission bandwidth.
pub fn set_other() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in set_fifo; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
