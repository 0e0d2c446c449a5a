//! What a port handle tells about its port: uuid, names, flags, type,
//! ownership, connections, aliases, renaming, and the JACK name/type/buffer
//! sizes. Read from the graph table in shared memory (application threads;
//! the reads are real-time safe, the requests are not).

use crate::client::{client, LjClient};
use crate::ffi::{self, *};
use crate::port::{port, report, LjPort};
use resound_shm::limits::{AUDIO_TYPE, MIDI_TYPE, PORT_NAME_MAX, PORT_TYPE_MAX};
use resound_shm::{midi, port_type};
use std::ffi::{c_char, c_int, c_void, CStr};

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_uuid(port_: *const c_void) -> jack_uuid_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_uuid") }) else {
            return 0;
        };
        p.info()
            .and_then(|_| p.table().port_extra(p.id))
            .map_or(0, |(u, ..)| u)
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_name(port_: *const c_void) -> *const c_char {
    ffi::guard(std::ptr::null(), || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_name") }) else {
            return std::ptr::null();
        };
        if let Some(n) = p.client().departing_name(p.id) {
            return n;
        }
        p.table()
            .port_name_ptr(p.id)
            .map_or(std::ptr::null(), |n| n as *const c_char)
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_short_name(port_: *const c_void) -> *const c_char {
    ffi::guard(std::ptr::null(), || {
        // SAFETY: per the function contract.
        let full = unsafe { jack_port_name(port_) };
        if full.is_null() {
            return full;
        }
        // SAFETY: the name field is NUL-terminated within its 320 bytes
        // (the server writes at most 319 bytes and a NUL).
        let bytes = unsafe { CStr::from_ptr(full) }.to_bytes();
        match bytes.iter().position(|&b| b == b':') {
            // SAFETY: i + 1 <= len, inside the same field.
            Some(i) => unsafe { full.add(i + 1) },
            None => full,
        }
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_flags(port_: *const c_void) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { port(port_, "jack_port_flags") }
            .and_then(|p| p.info())
            .map_or(0, |(_, _, f, _)| f as c_int)
    })
}

const AUDIO_C: &CStr = c"32 bit float mono audio";
const MIDI_C: &CStr = c"8 bit raw midi";

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_type(port_: *const c_void) -> *const c_char {
    ffi::guard(std::ptr::null(), || {
        // SAFETY: per the function contract.
        match unsafe { port(port_, "jack_port_type") }.and_then(|p| p.info()) {
            Some((_, _, _, port_type::MIDI)) => MIDI_C.as_ptr(),
            Some(_) => AUDIO_C.as_ptr(),
            None => std::ptr::null(),
        }
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_type_id(port_: *const c_void) -> jack_port_type_id_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { port(port_, "jack_port_type_id") }
            .and_then(|p| p.info())
            .map_or(0, |(_, _, _, t)| t)
    })
}

/// # Safety
/// `client` NULL or open; `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_is_mine(client_: *const c_void, port_: *const c_void) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(p)) = (unsafe { client(client_, "jack_port_is_mine") }, unsafe {
            port(port_, "jack_port_is_mine")
        }) else {
            return 0;
        };
        let same_server = lc.client.server_name() == p.client().client.server_name();
        p.info()
            .is_some_and(|(_, owner, ..)| same_server && owner == lc.client.slot()) as c_int
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_connected(port_: *const c_void) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_connected") }) else {
            return 0;
        };
        p.client().settle_connections();
        p.info()
            .and_then(|_| p.table().port_extra(p.id))
            .map_or(0, |(_, n, _)| n as c_int)
    })
}

/// A snapshot of the graph with every connection change the server has
/// answered (waits for a pending one, except on the process thread).
fn connections_snapshot(lc: &crate::client::LjClient) -> resound_client::Snapshot {
    lc.settle_connections();
    lc.client.snapshot_now()
}

/// Full names of the ports connected to `p`.
fn connections(p: &LjPort) -> Vec<String> {
    let snap = connections_snapshot(p.client());
    let Some(me) = snap.port_by_id(p.id) else {
        return Vec::new();
    };
    me.connections
        .iter()
        .filter_map(|&id| snap.port_by_id(id).map(|q| q.name.clone()))
        .collect()
}

/// # Safety
/// `port` NULL or a port handle of an open client; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_connected_to(
    port_: *const c_void,
    name: *const c_char,
) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let (Some(p), Some(name)) = (unsafe { port(port_, "jack_port_connected_to") }, unsafe {
            ffi::str_arg(name)
        }) else {
            return 0;
        };
        let snap = connections_snapshot(p.client());
        let Some(other) = snap.port(&name) else {
            return 0;
        };
        snap.port_by_id(p.id)
            .is_some_and(|me| me.connections.contains(&other.id)) as c_int
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_connections(port_: *const c_void) -> *mut *const c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        match unsafe { port(port_, "jack_port_get_connections") } {
            Some(p) => ffi::string_array(&connections(p)),
            None => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// `client` NULL or open; `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_all_connections(
    client_: *const c_void,
    port_: *const c_void,
) -> *mut *const c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(p)) = (
            unsafe { client(client_, "jack_port_get_all_connections") },
            unsafe { port(port_, "jack_port_get_all_connections") },
        ) else {
            return std::ptr::null_mut();
        };
        let snap = connections_snapshot(lc);
        let Some(me) = snap.port_by_id(p.id) else {
            return std::ptr::null_mut();
        };
        let names: Vec<String> = me
            .connections
            .iter()
            .filter_map(|&id| snap.port_by_id(id).map(|q| q.name.clone()))
            .collect();
        ffi::string_array(&names)
    })
}

fn rename(lc: &LjClient, p: &LjPort, name: &str, func: &str) -> c_int {
    match lc.client.rename_port(p.id, name) {
        Ok(()) => 0,
        Err(e) => report(func, &e),
    }
}

/// Deprecated: renames through the client that owns the handle.
///
/// # Safety
/// `port` NULL or a port handle of an open client; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_set_name(port_: *mut c_void, name: *const c_char) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(p), Some(n)) = (unsafe { port(port_, "jack_port_set_name") }, unsafe {
            ffi::str_arg(name)
        }) else {
            return -1;
        };
        rename(p.client(), p, &n, "jack_port_set_name")
    })
}

/// Renames one of the client's ports (new short name).
///
/// # Safety
/// `client` NULL or open; `port` NULL or a port handle; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_rename(
    client_: *mut c_void,
    port_: *mut c_void,
    name: *const c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(p)) = (unsafe { client(client_, "jack_port_rename") }, unsafe {
            port(port_, "jack_port_rename")
        }) else {
            return -1;
        };
        // SAFETY: per the function contract.
        let Some(n) = (unsafe { ffi::str_arg(name) }) else {
            ffi::error("jack_port_rename: NULL name");
            return -1;
        };
        rename(lc, p, &n, "jack_port_rename")
    })
}

/// # Safety
/// `port` NULL or a port handle of an open client; `alias` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_set_alias(port_: *mut c_void, alias: *const c_char) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(p), Some(a)) = (unsafe { port(port_, "jack_port_set_alias") }, unsafe {
            ffi::str_arg(alias)
        }) else {
            return -1;
        };
        match p.client().client.set_port_alias(p.id, &a) {
            Ok(()) => 0,
            Err(e) => report("jack_port_set_alias", &e),
        }
    })
}

/// # Safety
/// `port` NULL or a port handle of an open client; `alias` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_unset_alias(port_: *mut c_void, alias: *const c_char) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(p), Some(a)) = (unsafe { port(port_, "jack_port_unset_alias") }, unsafe {
            ffi::str_arg(alias)
        }) else {
            return -1;
        };
        match p.client().client.unset_port_alias(p.id, &a) {
            Ok(()) => 0,
            Err(e) => report("jack_port_unset_alias", &e),
        }
    })
}

/// Copies the port's aliases into `aliases[0..2]` (each jack_port_name_size()
/// bytes); returns how many.
///
/// # Safety
/// `port` NULL or a handle; `aliases` NULL or two pointers to buffers of
/// jack_port_name_size() bytes (or NULL).
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_aliases(
    port_: *const c_void,
    aliases: *const *mut c_char,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_get_aliases") }) else {
            return -1;
        };
        if aliases.is_null() {
            ffi::error("jack_port_get_aliases: NULL alias array");
            return -1;
        }
        let Some(e) = p.table().port(p.id).filter(|e| e.state == 1) else {
            return 0;
        };
        let mut n = 0;
        for a in e.aliases.iter() {
            let s = resound_shm::get_name(a);
            if s.is_empty() {
                continue;
            }
            // SAFETY: aliases points to two entries; each is NULL or a buffer
            // of jack_port_name_size() bytes.
            unsafe {
                let dst = *aliases.add(n);
                ffi::copy_to(dst, PORT_NAME_MAX + 1, &s);
            }
            n += 1;
        }
        n as c_int
    })
}

#[no_mangle]
pub extern "C" fn jack_port_name_size() -> c_int {
    crate::ffi::guard(0, || PORT_NAME_MAX as c_int + 1)
}

#[no_mangle]
pub extern "C" fn jack_port_type_size() -> c_int {
    crate::ffi::guard(0, || PORT_TYPE_MAX as c_int + 1)
}

/// # Safety
/// `client` NULL or open; `port_type` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_type_get_buffer_size(
    client_: *mut c_void,
    ty: *const c_char,
) -> usize {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(t)) = (
            unsafe { client(client_, "jack_port_type_get_buffer_size") },
            unsafe { ffi::str_arg(ty) },
        ) else {
            return 0;
        };
        match &*t {
            AUDIO_TYPE => lc.client.buffer_size() as usize * 4,
            MIDI_TYPE => midi::MIDI_BUFFER_BYTES,
            _ => 0,
        }
    })
}
