//! Server parameters and statistics as a client sees them: its name, the
//! sample rate, the period (and changing it), freewheeling, the DSP load
//! and the driver's wake-up delays. Application threads; the reads are
//! shared-memory loads.

use crate::client::client;
use crate::ffi::{self, *};
use resound_client::prelude::*;
use std::ffi::{c_char, c_int, c_void};

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_client_name(client: *mut c_void) -> *mut c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        match unsafe { self::client(client, "jack_get_client_name") } {
            Some(lc) => lc.name.as_ptr() as *mut c_char,
            None => std::ptr::null_mut(),
        }
    })
}

#[no_mangle]
pub extern "C" fn jack_client_name_size() -> c_int {
    crate::ffi::guard(0, || resound_shm::limits::CLIENT_NAME_MAX as c_int + 1)
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_sample_rate(client: *mut c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_sample_rate") }
            .map_or(0, |lc| lc.client.sample_rate())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_buffer_size(client: *mut c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_buffer_size") }
            .map_or(0, |lc| lc.client.buffer_size())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_buffer_size(
    client: *mut c_void,
    frames: jack_nframes_t,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_buffer_size") }) else {
            return -1;
        };
        match lc.client.set_buffer_size(frames) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_buffer_size: {e}"));
                libc::EINVAL
            }
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_freewheel(client: *mut c_void, onoff: c_int) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_freewheel") }) else {
            return -1;
        };
        match lc.client.set_freewheel(onoff != 0) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_freewheel: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_cpu_load(client: *mut c_void) -> f32 {
    ffi::guard(0.0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_cpu_load") }.map_or(0.0, |lc| lc.client.cpu_load())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_max_delayed_usecs(client: *mut c_void) -> f32 {
    ffi::guard(0.0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_max_delayed_usecs") }
            .map_or(0.0, |lc| lc.client.max_delayed_usecs())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_xrun_delayed_usecs(client: *mut c_void) -> f32 {
    ffi::guard(0.0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_xrun_delayed_usecs") }
            .map_or(0.0, |lc| lc.client.xrun_delayed_usecs())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_reset_max_delayed_usecs(client: *mut c_void) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        if let Some(lc) = unsafe { self::client(client, "jack_reset_max_delayed_usecs") } {
            if let Err(e) = lc.client.reset_max_delayed_usecs() {
                ffi::error(&format!("jack_reset_max_delayed_usecs: {e}"));
            }
        }
    })
}
