//! session.h: the deprecated session API. resound has no session manager;
//! every function returns JACK's documented failure (or frees what it is given).

use crate::ffi::{self, jack_session_command_t, jack_session_event_t, JackSessionCallback};
use std::ffi::{c_char, c_int, c_void};

/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_set_session_callback(
    _client: *mut c_void,
    _cb: Option<JackSessionCallback>,
    _arg: *mut c_void,
) -> c_int {
    crate::ffi::guard(-1, || {
        ffi::error(
            "jack_set_session_callback: the (deprecated) session API is not supported by resound",
        );
        -1
    })
}

/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_session_reply(
    _client: *mut c_void,
    _event: *mut jack_session_event_t,
) -> c_int {
    crate::ffi::guard(-1, || {
        ffi::error("jack_session_reply: the (deprecated) session API is not supported by resound");
        -1
    })
}

/// # Safety
/// `event` NULL or an event whose strings were malloc'ed.
#[no_mangle]
pub unsafe extern "C" fn jack_session_event_free(event: *mut jack_session_event_t) {
    crate::ffi::guard((), || {
        if event.is_null() {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            libc::free((*event).session_dir as *mut c_void);
            libc::free((*event).client_uuid as *mut c_void);
            libc::free((*event).command_line as *mut c_void);
            libc::free(event as *mut c_void);
        }
    })
}

/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_session_notify(
    _client: *mut c_void,
    _target: *const c_char,
    _type: c_int,
    _path: *const c_char,
) -> *mut jack_session_command_t {
    crate::ffi::guard(std::ptr::null_mut(), || {
        ffi::error("jack_session_notify: the (deprecated) session API is not supported by resound");
        std::ptr::null_mut()
    })
}

/// # Safety
/// `cmds` NULL or an array terminated by an entry with a NULL uuid, all malloc'ed.
#[no_mangle]
pub unsafe extern "C" fn jack_session_commands_free(cmds: *mut jack_session_command_t) {
    crate::ffi::guard((), || {
        if cmds.is_null() {
            return;
        }
        // SAFETY: per the function contract.
        unsafe {
            let mut i = 0;
            while !(*cmds.add(i)).uuid.is_null() {
                let c = &*cmds.add(i);
                libc::free(c.uuid as *mut c_void);
                libc::free(c.client_name as *mut c_void);
                libc::free(c.command as *mut c_void);
                i += 1;
            }
            libc::free(cmds as *mut c_void);
        }
    })
}

/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_reserve_client_name(
    _client: *mut c_void,
    _name: *const c_char,
    _uuid: *const c_char,
) -> c_int {
    crate::ffi::guard(-1, || {
        ffi::error(
            "jack_reserve_client_name: the (deprecated) session API is not supported by resound",
        );
        -1
    })
}

/// No client has a session callback here.
///
/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_client_has_session_callback(
    _client: *mut c_void,
    _name: *const c_char,
) -> c_int {
    crate::ffi::guard(0, || 0)
}
