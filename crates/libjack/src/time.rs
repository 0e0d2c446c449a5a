//! Frame time (jack_frame_time, jack_last_frame_time, jack_get_cycle_times,
//! conversions) from the timer the driver publishes each cycle; on the
//! process thread, from the cycle it is running. Real-time safe.

use crate::client::{client, LjClient};
use crate::ffi::{self, *};
use resound_shm::sync::Ordering;
use resound_shm::time::monotonic_ns;
use std::ffi::{c_int, c_void};

/// (frame time, start ns, next start ns, frames) of the current cycle.
fn cycle(lc: &LjClient) -> (u64, u64, u64, u32) {
    if lc.on_process_thread() {
        let r = &lc.rt;
        return (
            r.frame_time.load(Ordering::Relaxed),
            r.start_ns.load(Ordering::Relaxed),
            r.next_ns.load(Ordering::Relaxed),
            r.frames.load(Ordering::Relaxed),
        );
    }
    let t = lc.client.timer();
    (t.frame_time, t.start_ns, t.next_start_ns, t.frames)
}

fn frames_between(lc: &LjClient, from_ns: u64, to_ns: u64) -> i64 {
    let (_, start, next, frames) = cycle(lc);
    let period = next.saturating_sub(start).max(1) as f64;
    ((to_ns as f64 - from_ns as f64) / period * frames as f64).round() as i64
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_frames_since_cycle_start(client_: *const c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_frames_since_cycle_start") }) else {
            return 0;
        };
        let (_, start, ..) = cycle(lc);
        frames_between(lc, start, monotonic_ns()).max(0) as jack_nframes_t
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_frame_time(client_: *const c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_frame_time") }) else {
            return 0;
        };
        let (ft, start, ..) = cycle(lc);
        (ft as i64 + frames_between(lc, start, monotonic_ns())) as jack_nframes_t
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_last_frame_time(client_: *const c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { client(client_, "jack_last_frame_time") }
            .map_or(0, |lc| cycle(lc).0 as jack_nframes_t)
    })
}

/// # Safety
/// `client` NULL or open; the out-pointers NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_get_cycle_times(
    client_: *const c_void,
    current_frames: *mut jack_nframes_t,
    current_usecs: *mut jack_time_t,
    next_usecs: *mut jack_time_t,
    period_usecs: *mut f32,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_get_cycle_times") }) else {
            return -1;
        };
        let (ft, start, next, _) = cycle(lc);
        // SAFETY: per the function contract.
        unsafe {
            if !current_frames.is_null() {
                *current_frames = ft as jack_nframes_t;
            }
            if !current_usecs.is_null() {
                *current_usecs = start / 1000;
            }
            if !next_usecs.is_null() {
                *next_usecs = next / 1000;
            }
            if !period_usecs.is_null() {
                *period_usecs = next.saturating_sub(start) as f32 / 1000.0;
            }
        }
        0
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_frames_to_time(
    client_: *const c_void,
    frames: jack_nframes_t,
) -> jack_time_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_frames_to_time") }) else {
            return 0;
        };
        let (ft, start, next, n) = cycle(lc);
        // Signed distance in the 32-bit frame counter's wrap-around space.
        let d = frames.wrapping_sub(ft as u32) as i32 as f64;
        let ns = start as f64 + d * next.saturating_sub(start) as f64 / n.max(1) as f64;
        (ns.max(0.0) / 1000.0) as jack_time_t
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_time_to_frames(
    client_: *const c_void,
    usecs: jack_time_t,
) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_time_to_frames") }) else {
            return 0;
        };
        let (ft, start, ..) = cycle(lc);
        (ft as i64 + frames_between(lc, start, usecs.saturating_mul(1000))) as jack_nframes_t
    })
}

/// CLOCK_MONOTONIC in microseconds (the clock of every JACK time here).
#[no_mangle]
pub extern "C" fn jack_get_time() -> jack_time_t {
    crate::ffi::guard(0, || monotonic_ns() / 1000)
}
