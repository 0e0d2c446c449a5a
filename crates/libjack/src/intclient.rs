//! intclient.h: resound's built-in in-process clients.
//!
//! The server-side mechanism is not in this branch yet: every function
//! returns JACK's documented failure (JackFailure|JackNoSuchClient, NULL,
//! non-zero) with a message.

use crate::ffi::{self, jack_intclient_t, status};
use std::ffi::{c_char, c_int, c_void};

fn unsupported(func: &str) {
    ffi::error(&format!(
        "{func}: this resound server has no internal clients"
    ));
}

/// # Safety
/// `status` NULL or writable; other arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn lj_internal_client_load(
    _client: *mut c_void,
    _name: *const c_char,
    _options: c_int,
    st: *mut c_int,
    _load_name: *const c_char,
    _load_init: *const c_char,
) -> jack_intclient_t {
    unsupported("jack_internal_client_load");
    if !st.is_null() {
        // SAFETY: per the function contract.
        unsafe { *st = status::FAILURE | status::NO_SUCH_CLIENT };
    }
    0
}

/// # Safety
/// `status` NULL or writable; other arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_handle(
    _client: *mut c_void,
    _name: *const c_char,
    st: *mut c_int,
) -> jack_intclient_t {
    if !st.is_null() {
        // SAFETY: per the function contract.
        unsafe { *st = status::FAILURE | status::NO_SUCH_CLIENT };
    }
    0
}

/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_get_internal_client_name(
    _client: *mut c_void,
    _ic: jack_intclient_t,
) -> *mut c_char {
    std::ptr::null_mut()
}

/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_unload(
    _client: *mut c_void,
    _ic: jack_intclient_t,
) -> c_int {
    unsupported("jack_internal_client_unload");
    status::FAILURE | status::NO_SUCH_CLIENT
}

/// Deprecated.
///
/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_new(
    _name: *const c_char,
    _load_name: *const c_char,
    _load_init: *const c_char,
) -> c_int {
    unsupported("jack_internal_client_new");
    -1
}

/// Deprecated.
///
/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_close(_name: *const c_char) {
    unsupported("jack_internal_client_close");
}
