//! Connecting and disconnecting ports (jack_connect, jack_disconnect,
//! jack_port_disconnect): requests to the server, application threads.

use crate::client::client;
use crate::ffi;
use crate::port::{port, report};
use resound_client::{Code, Error};
use std::ffi::{c_char, c_int, c_void};

fn connect_result(func: &str, r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) if e.code() == Some(Code::Exists) => libc::EEXIST,
        Err(e) => report(func, &e),
    }
}

/// # Safety
/// `client` NULL or open; the names NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_connect(
    client_: *mut c_void,
    src: *const c_char,
    dst: *const c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_connect") }) else {
            return -1;
        };
        // SAFETY: per the function contract.
        let (Some(s), Some(d)) = (unsafe { ffi::str_arg(src) }, unsafe { ffi::str_arg(dst) })
        else {
            ffi::error("jack_connect: NULL port name");
            return -1;
        };
        connect_result("jack_connect", lc.client.connect(&s, &d))
    })
}

/// # Safety
/// `client` NULL or open; the names NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_disconnect(
    client_: *mut c_void,
    src: *const c_char,
    dst: *const c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_disconnect") }) else {
            return -1;
        };
        // SAFETY: per the function contract.
        let (Some(s), Some(d)) = (unsafe { ffi::str_arg(src) }, unsafe { ffi::str_arg(dst) })
        else {
            ffi::error("jack_disconnect: NULL port name");
            return -1;
        };
        match lc.client.disconnect(&s, &d) {
            Ok(()) => 0,
            Err(e) => report("jack_disconnect", &e),
        }
    })
}

/// Removes every connection of one of the client's ports.
///
/// # Safety
/// `client` NULL or open; `port` NULL or a port handle.
#[no_mangle]
pub unsafe extern "C" fn jack_port_disconnect(client_: *mut c_void, port_: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(p)) = (unsafe { client(client_, "jack_port_disconnect") }, unsafe {
            port(port_, "jack_port_disconnect")
        }) else {
            return -1;
        };
        let Some(name) = lc
            .client
            .snapshot_now()
            .port_by_id(p.id)
            .map(|q| q.name.clone())
        else {
            ffi::error("jack_port_disconnect: no such port");
            return -1;
        };
        match lc.client.disconnect_all(&name) {
            Ok(()) => 0,
            Err(e) => report("jack_port_disconnect", &e),
        }
    })
}
