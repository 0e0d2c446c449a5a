//! Threads and real-time priorities: whether the client is real-time, the
//! process thread's id, the priorities client threads may use, and
//! jack_client_create_thread (started by shim.c; real-time ones are
//! announced to the server by `thread_reserve`). Application threads.

use crate::client::client;
use crate::ffi::{self, *};
use crate::thread_reserve::{lj_rt_thread_start, Start};
use resound_shm::sync::Ordering;
use std::ffi::{c_int, c_void};

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_is_realtime(client: *mut c_void) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_is_realtime") }
            .map_or(0, |lc| (lc.client.client_priority() > 0) as c_int)
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_client_thread_id(client: *mut c_void) -> jack_native_thread_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_client_thread_id") }.map_or(0, |lc| {
            lc.rt.thread.load(Ordering::Acquire) as jack_native_thread_t
        })
    })
}

/// Real-time priority of the process thread (-1 when not real-time).
///
/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_client_real_time_priority(client: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_client_real_time_priority") }.map_or(-1, |lc| {
            let p = lc.client.client_priority();
            if p > 0 {
                p
            } else {
                -1
            }
        })
    })
}

/// Highest priority a client thread may use: the server's client priority.
///
/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_client_max_real_time_priority(client: *mut c_void) -> c_int {
    crate::ffi::guard(-1, || {
        // SAFETY: per the function contract.
        unsafe { jack_client_real_time_priority(client) }
    })
}

extern "C" {
    fn lj_create_thread(
        thread: *mut libc::pthread_t,
        priority: c_int,
        realtime: c_int,
        fun: JackThreadCallback,
        arg: *mut c_void,
    ) -> c_int;
}

/// Creates a thread, real-time (SCHED_FIFO, like the server's client
/// threads) when asked; a priority below 1 means the server's client priority.
/// A real-time thread is announced to the server before `fun` runs, which
/// under `--sched deadline` gives it a SCHED_DEADLINE reservation (see
/// [`crate::thread_reserve`]).
///
/// # Safety
/// `client` is NULL or an open client; `thread` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_client_create_thread(
    client: *mut c_void,
    thread: *mut libc::pthread_t,
    priority: c_int,
    realtime: c_int,
    fun: Option<JackThreadCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(libc::EINVAL, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_client_create_thread") }) else {
            return libc::EINVAL;
        };
        let (Some(fun), false) = (fun, thread.is_null()) else {
            ffi::error("jack_client_create_thread: NULL thread or start routine");
            return libc::EINVAL;
        };
        let server_prio = lc.client.client_priority();
        let prio = if priority >= 1 {
            priority
        } else {
            server_prio.max(1)
        };
        let rt = (realtime != 0 && server_prio > 0) as c_int;
        if rt == 0 {
            // SAFETY: lj_create_thread (shim.c) writes *thread and starts `fun(arg)`.
            return unsafe { lj_create_thread(thread, prio, rt, fun, arg) };
        }
        // Real-time: the thread announces itself to the server first (see thread_reserve).
        let start = Box::into_raw(Box::new(Start { fun, arg })) as *mut c_void;
        // SAFETY: lj_create_thread writes *thread and, on success, starts
        // lj_rt_thread_start(start), which takes the box.
        let r = unsafe { lj_create_thread(thread, prio, rt, lj_rt_thread_start, start) };
        if r != 0 {
            // SAFETY: no thread was started: the box is still ours.
            drop(unsafe { Box::from_raw(start as *mut Start) });
        }
        r
    })
}

/// The SCHED_FIFO priority a JACK process thread has under jackd: what the
/// scheduling queries in shim.c report for a thread under a reservation
/// (-1: no open client, or clients are not real-time).
#[no_mangle]
pub extern "C" fn lj_fifo_equivalent_priority() -> c_int {
    ffi::guard(-1, || {
        crate::registry::with_client(|c| {
            c.map_or(-1, |c| match c.client.client_priority() {
                p if p > 0 => p,
                _ => -1,
            })
        })
    })
}
