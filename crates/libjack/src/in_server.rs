//! What `resoundd` needs to host a JACK internal client (a shared object
//! exporting `jack_initialize`/`jack_finish`, as the distribution ships in
//! its JACK internal-clients directory): the server loads this library into
//! itself, so the object's JACK calls resolve here, and opens the object's
//! client through these two entry points (exported as `resound_libjack_*`).
//!
//! Threads: the server's session thread that loads or unloads the object.

use crate::client::open_with;
use resound_client::OpenOptions;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::PathBuf;

/// Opens client `name` (exactly that name) on the server called `server`
/// whose socket directory is `dir`; the `jack_client_t *` for the object's
/// `jack_initialize`, or null with `*status` set.
///
/// # Safety
/// `name`, `server` and `dir` are C strings; `status` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn resound_libjack_open_in_server(
    name: *const c_char,
    server: *const c_char,
    dir: *const c_char,
    status: *mut c_int,
) -> *mut c_void {
    crate::ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract, three C strings.
        let (name, server, dir) = unsafe {
            (
                CStr::from_ptr(name).to_string_lossy().into_owned(),
                CStr::from_ptr(server).to_string_lossy().into_owned(),
                CStr::from_ptr(dir).to_string_lossy().into_owned(),
            )
        };
        let opts = OpenOptions {
            server: Some(server),
            dir: Some(PathBuf::from(dir)),
            exact_name: true,
        };
        let mut st = 0;
        let c = open_with(&name, opts, &mut st);
        if !status.is_null() {
            // SAFETY: the caller passes a writable int or NULL.
            unsafe { *status = st };
        }
        c
    })
}

/// The argument the client's process callback was registered with: what
/// jackd passes to an internal client's `jack_finish`.
///
/// # Safety
/// `client` is an open client of this library.
#[no_mangle]
pub unsafe extern "C" fn resound_libjack_process_arg(client: *mut c_void) -> *mut c_void {
    crate::ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        unsafe { crate::client::client(client, "resound_libjack_process_arg") }
            .map_or(std::ptr::null_mut(), |lc| {
                lc.cbs.lock().unwrap_or_else(|e| e.into_inner()).process.arg
            })
    })
}
