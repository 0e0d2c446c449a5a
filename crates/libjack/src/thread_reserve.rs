//! The client's own real-time threads and the server's reservations for
//! them: a thread started by `jack_client_create_thread` (real-time) runs
//! `lj_rt_thread_start` first, which tells the server its kernel thread
//! id (`Request::ReserveThread`), so that under `--sched deadline` the
//! server gives it a SCHED_DEADLINE reservation before the program's
//! routine runs; when the routine returns the server is told it ended.
//! `jack_acquire_real_time_scheduling` / `jack_drop_real_time_scheduling`
//! (shim.c) announce a thread through [`lj_thread_realtime`]; the kernel
//! thread id of a thread other than the caller is known only for threads
//! started here (glibc has no public pthread_t-to-tid call), so other
//! threads stay on the SCHED_FIFO the shim sets.
//!
//! Threads: the application's threads (never the process thread's cycle).

use crate::ffi::{self, JackThreadCallback};
use crate::registry;
use resound_client::prelude::*;
use resound_protocol::wire::Request;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

/// Threads started by [`lj_rt_thread_start`] that are alive: (pthread_t, tid).
static STARTED: Mutex<Vec<(libc::pthread_t, i32)>> = Mutex::new(Vec::new());

/// What a real-time thread started by `jack_client_create_thread` runs.
pub(crate) struct Start {
    /// The program's routine.
    pub fun: JackThreadCallback,
    /// Its argument.
    pub arg: *mut c_void,
}

/// The calling thread's kernel thread id.
fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Tells the server thread `tid` starts (`on`) or stops being real-time,
/// through the most recently opened client. False if no client could ask or
/// the server refused (the reason goes to the error callback).
fn announce(tid: i32, on: bool) -> bool {
    registry::with_client(|c| {
        let Some(c) = c else { return false };
        match c.client.call(Request::ReserveThread { tid, on }) {
            Ok(_) => true,
            Err(e) => {
                ffi::error(&format!(
                    "resound libjack: the server did not take real-time thread {tid}: {e}"
                ));
                false
            }
        }
    })
}

/// Start routine of real-time threads created by `jack_client_create_thread`:
/// announces the thread, runs the program's routine, announces its end.
///
/// # Safety
/// `p` is a `Box<Start>` leaked by `jack_client_create_thread`, passed to
/// exactly one thread.
pub(crate) unsafe extern "C" fn lj_rt_thread_start(p: *mut c_void) -> *mut c_void {
    // SAFETY: per the function contract, the box is ours alone.
    let start = unsafe { Box::from_raw(p as *mut Start) };
    let tid = gettid();
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() };
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((me, tid));
    let announced = announce(tid, true);
    // SAFETY: the program's routine with its own argument, as
    // jack_client_create_thread promised it.
    let r = unsafe { (start.fun)(start.arg) };
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&(_, t)| t != tid);
    if announced {
        announce(tid, false);
    }
    r
}

/// The kernel thread id of `thread`: the caller's own, or one started by
/// [`lj_rt_thread_start`]. None otherwise.
fn tid_of(thread: libc::pthread_t) -> Option<i32> {
    // SAFETY: pthread_self/pthread_equal have no preconditions.
    if unsafe { libc::pthread_equal(thread, libc::pthread_self()) } != 0 {
        return Some(gettid());
    }
    STARTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        // SAFETY: pthread_equal compares two thread handles by value and
        // has no preconditions.
        .find(|&&(t, _)| unsafe { libc::pthread_equal(t, thread) } != 0)
        .map(|&(_, tid)| tid)
}

/// Called by shim.c after `jack_acquire_real_time_scheduling` set
/// SCHED_FIFO (`on` = 1) or before `jack_drop_real_time_scheduling`
/// (`on` = 0): tells the server, when the thread's kernel id is known.
/// Returns 1 if the server was told.
#[no_mangle]
pub extern "C" fn lj_thread_realtime(thread: libc::pthread_t, on: c_int) -> c_int {
    ffi::guard(0, || match tid_of(thread) {
        Some(tid) => announce(tid, on != 0) as c_int,
        None => 0,
    })
}
