//! intclient.h: resound's built-in in-process clients (JACK's internal
//! clients), loaded into the server by name ("profiler"). They appear as
//! ordinary clients of the graph; their `jack_intclient_t` handle is their uuid.

use crate::client::client;
use crate::ffi::{self, jack_intclient_t, options, status};
use resound_client::prelude::*;
use resound_client::{Code, ControlSession, Error};
use std::ffi::{c_char, c_int, c_void};

fn load_status(e: &Error) -> c_int {
    match e.code() {
        Some(Code::NameTaken) => status::FAILURE | status::NAME_NOT_UNIQUE,
        Some(Code::InvalidName) => status::FAILURE | status::INVALID_OPTION,
        _ => status::FAILURE | status::LOAD_FAILURE,
    }
}

fn set(st: *mut c_int, v: c_int) {
    if !st.is_null() {
        // SAFETY: callers pass NULL or a writable jack_status_t.
        unsafe { *st = v };
    }
}

/// Internal clients of the server: (uuid, name).
fn internals(lc: &crate::client::LjClient) -> Result<Vec<(u64, String)>, Error> {
    Ok(lc
        .client
        .status()?
        .clients
        .into_iter()
        .filter(|c| c.internal)
        .map(|c| (c.uuid, c.name))
        .collect())
}

/// jack_internal_client_load, non-variadic (shim.c reads load_name and load_init).
///
/// # Safety
/// `client` NULL or open; strings NULL or C strings; `status` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lj_internal_client_load(
    client_: *mut c_void,
    name: *const c_char,
    opts: c_int,
    st: *mut c_int,
    load_name: *const c_char,
    load_init: *const c_char,
) -> jack_intclient_t {
    ffi::guard(0, || {
        set(st, 0);
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_internal_client_load") }) else {
            set(st, status::FAILURE | status::INVALID_OPTION);
            return 0;
        };
        // SAFETY: per the function contract.
        let Some(n) = (unsafe { ffi::str_arg(name) }) else {
            ffi::error("jack_internal_client_load: NULL client name");
            set(st, status::FAILURE | status::INVALID_OPTION);
            return 0;
        };
        if opts & !options::LOAD & !options::SERVER_NAME != 0 {
            ffi::error(&format!(
                "jack_internal_client_load: invalid option {opts:#x}"
            ));
            set(st, status::FAILURE | status::INVALID_OPTION);
            return 0;
        }
        let load = if opts & options::LOAD_NAME != 0 {
            // SAFETY: per the function contract.
            unsafe { ffi::str_arg(load_name) }.map(|s| s.into_owned())
        } else {
            None
        }
        .unwrap_or_else(|| n.to_string());
        let init = if opts & options::LOAD_INIT != 0 {
            // SAFETY: per the function contract.
            unsafe { ffi::str_arg(load_init) }.map(|s| s.into_owned())
        } else {
            None
        }
        .unwrap_or_default();
        if init.len() >= 1024 {
            ffi::error("jack_internal_client_load: init string longer than JACK_LOAD_INIT_LIMIT");
            set(st, status::FAILURE | status::INVALID_OPTION);
            return 0;
        }
        match lc.client.load_internal(&n, &load, &init) {
            Ok(info) => {
                if info.name != n {
                    if opts & options::USE_EXACT_NAME != 0 {
                        let _ = lc.client.unload_internal(info.uuid);
                        set(st, status::FAILURE | status::NAME_NOT_UNIQUE);
                        return 0;
                    }
                    set(st, status::NAME_NOT_UNIQUE);
                }
                info.uuid
            }
            Err(e) => {
                ffi::error(&format!(
                    "jack_internal_client_load: cannot load {load:?}: {e}"
                ));
                set(st, load_status(&e));
                0
            }
        }
    })
}

/// # Safety
/// `client` NULL or open; `name` NULL or a C string; `status` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_handle(
    client_: *mut c_void,
    name: *const c_char,
    st: *mut c_int,
) -> jack_intclient_t {
    ffi::guard(0, || {
        set(st, 0);
        // SAFETY: per the function contract.
        let (Some(lc), Some(n)) = (
            unsafe { client(client_, "jack_internal_client_handle") },
            unsafe { ffi::str_arg(name) },
        ) else {
            set(st, status::FAILURE | status::NO_SUCH_CLIENT);
            return 0;
        };
        match internals(lc).map(|v| v.into_iter().find(|(_, m)| *m == n)) {
            Ok(Some((uuid, _))) => uuid,
            Ok(None) => {
                set(st, status::FAILURE | status::NO_SUCH_CLIENT);
                0
            }
            Err(e) => {
                ffi::error(&format!("jack_internal_client_handle: {e}"));
                set(st, status::FAILURE | status::SERVER_ERROR);
                0
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_get_internal_client_name(
    client_: *mut c_void,
    ic: jack_intclient_t,
) -> *mut c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_get_internal_client_name") }) else {
            return std::ptr::null_mut();
        };
        match internals(lc).map(|v| v.into_iter().find(|(u, _)| *u == ic)) {
            Ok(Some((_, name))) => ffi::strdup(&name),
            Ok(None) => std::ptr::null_mut(),
            Err(e) => {
                ffi::error(&format!("jack_get_internal_client_name: {e}"));
                std::ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_unload(
    client_: *mut c_void,
    ic: jack_intclient_t,
) -> c_int {
    ffi::guard(status::FAILURE | status::NO_SUCH_CLIENT, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_internal_client_unload") }) else {
            return status::FAILURE | status::NO_SUCH_CLIENT;
        };
        match lc.client.unload_internal(ic) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_internal_client_unload: {e}"));
                if e.code().is_some() {
                    status::FAILURE | status::NO_SUCH_CLIENT
                } else {
                    status::FAILURE | status::SERVER_ERROR
                }
            }
        }
    })
}

/// Deprecated: loads an internal client into the default server without a
/// client of one's own. 0 on success.
///
/// # Safety
/// Strings NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_new(
    name: *const c_char,
    load_name: *const c_char,
    load_init: *const c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(n), l, i) = (
            unsafe { ffi::str_arg(name) },
            unsafe { ffi::str_arg(load_name) },
            unsafe { ffi::str_arg(load_init) },
        ) else {
            ffi::error("jack_internal_client_new: NULL client name");
            return -1;
        };
        let load = l.map_or_else(|| n.to_string(), |s| s.into_owned());
        match ControlSession::connect(None, None)
            .and_then(|s| s.load_internal(&n, &load, &i.unwrap_or_default()))
        {
            Ok(_) => 0,
            Err(e) => {
                ffi::error(&format!("jack_internal_client_new: {e}"));
                -1
            }
        }
    })
}

/// Deprecated: unloads the internal client called `name` from the default server.
///
/// # Safety
/// `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_internal_client_close(name: *const c_char) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        let Some(n) = (unsafe { ffi::str_arg(name) }) else {
            return;
        };
        let r = ControlSession::connect(None, None).and_then(|s| {
            let uuid = s
                .status()?
                .clients
                .into_iter()
                .find(|c| c.internal && c.name == n)
                .map(|c| c.uuid)
                .ok_or(Error::State("no such internal client"))?;
            s.unload_internal(uuid)
        });
        if let Err(e) = r {
            ffi::error(&format!("jack_internal_client_close: {e}"));
        }
    })
}
