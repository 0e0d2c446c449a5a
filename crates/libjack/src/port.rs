//! `jack_port_t`: registration, buffers, names, connections, aliases,
//! latencies, monitoring, and the port queries (jack_get_ports & co).
//!
//! A `jack_port_t *` is a boxed [`LjPort`] owned by the client that handed it
//! out (one per port id and client, like jackd's per-process port handles),
//! valid until that client is closed. Port data (name, flags, connections)
//! is read from the graph table in shared memory, so a handle always shows
//! the port's current state; `jack_port_name` returns a pointer into that
//! (read-only, always mapped) table.
//!
//! jack_port_get_buffer is real-time safe: an output gets its own buffer; an
//! input with one live source gets that source's buffer (zero copy), with
//! several the mix (audio) or the time-ordered merge (MIDI) in its own
//! buffer, with none its own buffer emptied. No allocation, no lock.

use crate::client::{client, LjClient};
use crate::ffi::{self, *};
use resound_client::{Code, Error, PortSnap};
use resound_shm::cycle::{input_buffer, midi_input_buffer};
use resound_shm::limits::{AUDIO_TYPE, MIDI_TYPE, PORT_NAME_MAX, PORT_TYPE_MAX};
use resound_shm::midi;
use resound_shm::sync::Ordering;
use resound_shm::{port_flags, port_type, Table};
use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::atomic::AtomicU32;

const MAGIC: u64 = u64::from_le_bytes(*b"rsJACKpt");
const NOT_TIED: u32 = u32::MAX;

/// The object behind `jack_port_t *`.
pub struct LjPort {
    magic: u64,
    client: *const LjClient,
    /// Port id (slot in the graph tables).
    pub id: u32,
    /// jack_port_tie: the input this output passes through (NOT_TIED: none).
    tied: AtomicU32,
}

// SAFETY: `client` points to the LjClient that owns this port handle and
// outlives it; the handle is otherwise plain data and atomics.
unsafe impl Send for LjPort {}
// SAFETY: as above.
unsafe impl Sync for LjPort {}

impl LjPort {
    /// The client that handed out this handle.
    pub fn client(&self) -> &LjClient {
        // SAFETY: see the Send impl: the client owns and outlives the handle.
        unsafe { &*self.client }
    }

    fn table(&self) -> Table<'_> {
        let c = self.client();
        c.client.view().table(c.table_index())
    }

    /// (state, owner, flags, type) from the current table.
    fn info(&self) -> Option<(u32, u32, u32, u32)> {
        self.table()
            .port_info(self.id)
            .filter(|(state, ..)| *state == 1)
    }
}

/// The interned handle of port `id` for client `lc`.
pub fn intern(lc: &LjClient, id: u32) -> *mut c_void {
    let mut ports = lc.ports.lock().unwrap_or_else(|e| e.into_inner());
    let p = ports.entry(id).or_insert_with(|| {
        Box::new(LjPort {
            magic: MAGIC,
            client: lc as *const LjClient,
            id,
            tied: AtomicU32::new(NOT_TIED),
        })
    });
    &**p as *const LjPort as *mut c_void
}

/// The port behind a `jack_port_t *` (None and an error for NULL or garbage).
///
/// # Safety
/// `p` is NULL or a handle from this library whose client is open.
pub unsafe fn port<'a>(p: *const c_void, func: &str) -> Option<&'a LjPort> {
    if p.is_null() {
        ffi::error(&format!("{func}: called with a NULL port"));
        return None;
    }
    // SAFETY: per the function contract.
    let lp = unsafe { &*(p as *const LjPort) };
    if lp.magic != MAGIC {
        ffi::error(&format!("{func}: not a JACK port"));
        return None;
    }
    Some(lp)
}

fn report(func: &str, e: &Error) -> c_int {
    ffi::error(&format!("{func}: {e}"));
    -1
}

/// # Safety
/// `client` is NULL or an open client; the strings NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_port_register(
    client_: *mut c_void,
    port_name: *const c_char,
    port_type: *const c_char,
    flags: c_ulong,
    _buffer_size: c_ulong,
) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_port_register") }) else {
            return std::ptr::null_mut();
        };
        // SAFETY: per the function contract.
        let (Some(name), Some(ty)) = (unsafe { ffi::str_arg(port_name) }, unsafe {
            ffi::str_arg(port_type)
        }) else {
            ffi::error("jack_port_register: NULL port name or type");
            return std::ptr::null_mut();
        };
        if name.is_empty() {
            ffi::error("jack_port_register: port name is empty");
            return std::ptr::null_mut();
        }
        let full = lc.client.name().len() + 1 + name.len();
        if full > PORT_NAME_MAX {
            ffi::error(&format!(
                "\"{}:{name}\" is too long to be used as a JACK port name; please use {PORT_NAME_MAX} characters or less",
                lc.client.name()
            ));
            return std::ptr::null_mut();
        }
        match lc.client.register_port_raw(&name, &ty, flags as u32) {
            Ok(p) => intern(lc, p.id()),
            Err(e) => {
                report("jack_port_register", &e);
                std::ptr::null_mut()
            }
        }
    })
}

/// # Safety
/// `client` NULL or open; `port` NULL or one of its port handles.
#[no_mangle]
pub unsafe extern "C" fn jack_port_unregister(client_: *mut c_void, port_: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(p)) = (unsafe { client(client_, "jack_port_unregister") }, unsafe {
            port(port_, "jack_port_unregister")
        }) else {
            return -1;
        };
        match p.info() {
            Some((_, owner, ..)) if owner == lc.client.slot() => {}
            _ => {
                ffi::error(&format!(
                    "jack_port_unregister: port {} is not owned by client \"{}\"",
                    p.id,
                    lc.client.name()
                ));
                return -1;
            }
        }
        match lc.client.unregister_port_id(p.id) {
            Ok(()) => {
                // Handles are interned per id and outlive the port: a tie
                // must not survive it (the id may be reused, even by another
                // client, whose buffer a tied output would then hand out).
                p.tied.store(NOT_TIED, Ordering::Relaxed);
                for q in lc.ports.lock().unwrap_or_else(|e| e.into_inner()).values() {
                    let _ = q.tied.compare_exchange(
                        p.id,
                        NOT_TIED,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
                0
            }
            Err(e) => report("jack_port_unregister", &e),
        }
    })
}

/// Silences this client's outputs for a cycle its process code skips.
/// Real-time safe.
pub fn silence_outputs(lc: &LjClient, table: usize, frames: usize) {
    let view = lc.client.view();
    resound_client::silence_outputs(view, &view.table(table), lc.client.slot(), frames);
}

/// The buffer of port `id` (tied to `tied`) for a cycle of `nframes` (see the module docs).
fn buffer(lc: &LjClient, id: u32, tied: u32, nframes: u32) -> *mut c_void {
    let view = lc.client.view();
    let t = view.table(lc.table_index());
    let Some((1, owner, flags, ty)) = t.port_info(id) else {
        return std::ptr::null_mut();
    };
    let Some(own) = view.port_buffer(id) else {
        return std::ptr::null_mut();
    };
    let frames = (nframes as usize).min(view.layout().caps.max_frames as usize);
    let me = lc.client.slot();
    if owner != me {
        return own as *mut c_void;
    }
    let midi_port = ty == port_type::MIDI;
    if flags & port_flags::IS_INPUT != 0 {
        if midi_port {
            let b = midi_input_buffer(view, &t, id, me, frames);
            if b == view.silence() as *const u8 {
                // SAFETY: our own input's buffer; written only by us.
                unsafe { midi::init(own as *mut u8, frames as u32) };
                return own as *mut c_void;
            }
            return b as *mut c_void;
        }
        let b = input_buffer(view, &t, id, me, frames);
        if b == view.silence() {
            // The silence buffer is read-only shared memory; programs may
            // write into their input buffers, so hand out zeroed own memory.
            // SAFETY: our own input's buffer (≥ max_frames f32), written only by us.
            unsafe { std::slice::from_raw_parts_mut(own, frames).fill(0.0) };
            return own as *mut c_void;
        }
        return b as *mut c_void;
    }
    if tied != NOT_TIED && tied != id {
        // Only a tie to an input this client still owns: never hand out
        // another client's buffer for the application to write into.
        if let Some((1, towner, tflags, _)) = t.port_info(tied) {
            if towner == me && tflags & port_flags::IS_INPUT != 0 {
                return buffer(lc, tied, NOT_TIED, nframes);
            }
        }
    }
    if midi_port {
        // SAFETY: our own output's buffer (≥ MIDI_BUFFER_BYTES).
        unsafe {
            let b = own as *mut u8;
            if !midi::is_valid(b) || midi::nframes(b) != frames as u32 {
                midi::init(b, frames as u32);
            }
        }
    }
    own as *mut c_void
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_buffer(
    port_: *mut c_void,
    nframes: jack_nframes_t,
) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_get_buffer") }) else {
            return std::ptr::null_mut();
        };
        buffer(p.client(), p.id, p.tied.load(Ordering::Relaxed), nframes)
    })
}

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
        p.info()
            .and_then(|_| p.table().port_extra(p.id))
            .map_or(0, |(_, n, _)| n as c_int)
    })
}

/// Full names of the ports connected to `p`.
fn connections(p: &LjPort) -> Vec<String> {
    let snap = p.client().client.snapshot();
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
        let snap = p.client().client.snapshot();
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
        let snap = lc.client.snapshot();
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

/// # Safety
/// `src`, `dst` NULL or port handles of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_tie(src: *mut c_void, dst: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(s), Some(d)) = (unsafe { port(src, "jack_port_tie") }, unsafe {
            port(dst, "jack_port_tie")
        }) else {
            return -1;
        };
        let (Some((_, so, sf, _)), Some((_, dow, df, _))) = (s.info(), d.info()) else {
            return -1;
        };
        if so != dow || !std::ptr::eq(s.client, d.client) {
            ffi::error("jack_port_tie: the ports must belong to the same client");
            return -1;
        }
        if sf & port_flags::IS_INPUT == 0 || df & port_flags::IS_OUTPUT == 0 {
            ffi::error("jack_port_tie: tie an input (src) to an output (dst)");
            return -1;
        }
        d.tied.store(s.id, Ordering::Relaxed);
        0
    })
}

/// # Safety
/// `port` is NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_untie(port_: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_untie") }) else {
            return -1;
        };
        if p.tied.swap(NOT_TIED, Ordering::Relaxed) == NOT_TIED {
            ffi::error("jack_port_untie: the port is not tied");
            return -1;
        }
        0
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

/// # Safety
/// `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_request_monitor(port_: *mut c_void, onoff: c_int) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_request_monitor") }) else {
            return -1;
        };
        match p.client().client.request_monitor(p.id, onoff != 0) {
            Ok(()) => 0,
            Err(e) => report("jack_port_request_monitor", &e),
        }
    })
}

/// # Safety
/// `client` NULL or open; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_request_monitor_by_name(
    client_: *mut c_void,
    name: *const c_char,
    onoff: c_int,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let (Some(lc), Some(n)) = (
            unsafe { client(client_, "jack_port_request_monitor_by_name") },
            unsafe { ffi::str_arg(name) },
        ) else {
            return -1;
        };
        let Some(id) = lc.client.snapshot().port(&n).map(|p| p.id) else {
            ffi::error(&format!(
                "jack_port_request_monitor_by_name: no port named {n:?}"
            ));
            return -1;
        };
        match lc.client.request_monitor(id, onoff != 0) {
            Ok(()) => 0,
            Err(e) => report("jack_port_request_monitor_by_name", &e),
        }
    })
}

/// # Safety
/// `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_ensure_monitor(port_: *mut c_void, onoff: c_int) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_ensure_monitor") }) else {
            return -1;
        };
        match p.client().client.ensure_monitor(p.id, onoff != 0) {
            Ok(()) => 0,
            Err(e) => report("jack_port_ensure_monitor", &e),
        }
    })
}

/// # Safety
/// `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_monitoring_input(port_: *mut c_void) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { port(port_, "jack_port_monitoring_input") }
            .and_then(|p| p.info().and_then(|_| p.table().port_extra(p.id)))
            .is_some_and(|(_, _, m)| m > 0) as c_int
    })
}

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
            .snapshot()
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

fn latency_of(p: &LjPort) -> Option<([u32; 4], bool)> {
    let (_, _, flags, _) = p.info()?;
    Some((
        p.table().port_latency(p.id)?,
        flags & port_flags::IS_OUTPUT != 0,
    ))
}

/// # Safety
/// `port` NULL or a handle; `range` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_latency_range(
    port_: *mut c_void,
    mode: jack_latency_callback_mode_t,
    range: *mut jack_latency_range_t,
) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_get_latency_range") }) else {
            return;
        };
        if range.is_null() {
            ffi::error("jack_port_get_latency_range: NULL range");
            return;
        }
        let l = latency_of(p).map_or([0; 4], |(l, _)| l);
        let i = if mode == 0 { 0 } else { 2 };
        // SAFETY: per the function contract (packed struct: unaligned write).
        unsafe {
            std::ptr::write_unaligned(
                range,
                jack_latency_range_t {
                    min: l[i],
                    max: l[i + 1],
                },
            )
        };
    })
}

/// # Safety
/// `port` NULL or a handle; `range` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn jack_port_set_latency_range(
    port_: *mut c_void,
    mode: jack_latency_callback_mode_t,
    range: *mut jack_latency_range_t,
) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_set_latency_range") }) else {
            return;
        };
        if range.is_null() {
            ffi::error("jack_port_set_latency_range: NULL range");
            return;
        }
        // SAFETY: per the function contract (packed struct: unaligned read).
        let r = unsafe { std::ptr::read_unaligned(range) };
        if let Err(e) = p
            .client()
            .client
            .set_latency_range(p.id, mode != 0, r.min, r.max)
        {
            report("jack_port_set_latency_range", &e);
        }
    })
}

/// Deprecated: sets the latency of the port's direction (output: capture,
/// input: playback) to `frames`.
///
/// # Safety
/// `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_set_latency(port_: *mut c_void, frames: jack_nframes_t) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        let Some(p) = (unsafe { port(port_, "jack_port_set_latency") }) else {
            return;
        };
        let Some((_, out)) = latency_of(p) else {
            return;
        };
        if let Err(e) = p
            .client()
            .client
            .set_latency_range(p.id, !out, frames, frames)
        {
            report("jack_port_set_latency", &e);
        }
    })
}

/// Deprecated: the maximum latency of the port's direction.
///
/// # Safety
/// `port` NULL or a port handle of an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_latency(port_: *mut c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { port(port_, "jack_port_get_latency") }
            .and_then(latency_of)
            .map_or(0, |(l, out)| if out { l[1] } else { l[3] })
    })
}

/// Deprecated: as jack_port_get_latency (latencies are always total here).
///
/// # Safety
/// `client` NULL or open; `port` NULL or a port handle.
#[no_mangle]
pub unsafe extern "C" fn jack_port_get_total_latency(
    _client: *mut c_void,
    port_: *mut c_void,
) -> jack_nframes_t {
    crate::ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { jack_port_get_latency(port_) }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_recompute_total_latencies(client_: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_recompute_total_latencies") }) else {
            return -1;
        };
        match lc.client.recompute_latencies() {
            Ok(()) => 0,
            Err(e) => report("jack_recompute_total_latencies", &e),
        }
    })
}

/// Deprecated: latencies are recomputed by the server on every change.
///
/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_recompute_total_latency(
    _client: *mut c_void,
    _port: *mut c_void,
) -> c_int {
    crate::ffi::guard(-1, || 0)
}

/// A compiled POSIX extended regular expression (jackd matches port names
/// and types with regcomp/regexec, so the same patterns mean the same here).
struct Regex(libc::regex_t);

impl Regex {
    fn new(pattern: &CStr) -> Option<Regex> {
        // SAFETY: regex_t is plain data; regcomp initialises it and we only use
        // it (and regfree it) after success.
        unsafe {
            let mut r: libc::regex_t = std::mem::zeroed();
            if libc::regcomp(
                &mut r,
                pattern.as_ptr(),
                libc::REG_EXTENDED | libc::REG_NOSUB,
            ) != 0
            {
                return None;
            }
            Some(Regex(r))
        }
    }

    fn is_match(&self, s: &str) -> bool {
        let Ok(c) = std::ffi::CString::new(s) else {
            return false;
        };
        // SAFETY: a compiled regex and a valid C string; no match array.
        unsafe { libc::regexec(&self.0, c.as_ptr(), 0, std::ptr::null_mut(), 0) == 0 }
    }
}

impl Drop for Regex {
    fn drop(&mut self) {
        // SAFETY: compiled by regcomp in `new`.
        unsafe { libc::regfree(&mut self.0) }
    }
}

/// # Safety
/// `client` NULL or open; the patterns NULL or C strings.
#[no_mangle]
pub unsafe extern "C" fn jack_get_ports(
    client_: *mut c_void,
    port_pattern: *const c_char,
    type_pattern: *const c_char,
    flags: c_ulong,
) -> *mut *const c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_get_ports") }) else {
            return std::ptr::null_mut();
        };
        let compile = |p: *const c_char| -> Result<Option<Regex>, ()> {
            if p.is_null() {
                return Ok(None);
            }
            // SAFETY: per the function contract.
            let c = unsafe { CStr::from_ptr(p) };
            if c.is_empty() {
                return Ok(None);
            }
            Regex::new(c).map(Some).ok_or(())
        };
        let (Ok(pr), Ok(tr)) = (compile(port_pattern), compile(type_pattern)) else {
            ffi::error("jack_get_ports: cannot compile a regular expression");
            return std::ptr::null_mut();
        };
        let flags = flags as u32;
        let names: Vec<String> = lc
            .client
            .snapshot()
            .ports
            .iter()
            .filter(|p: &&PortSnap| p.flags & flags == flags)
            .filter(|p| pr.as_ref().is_none_or(|r| r.is_match(&p.name)))
            .filter(|p| tr.as_ref().is_none_or(|r| r.is_match(p.type_name)))
            .map(|p| p.name.clone())
            .collect();
        ffi::string_array(&names)
    })
}

/// # Safety
/// `client` NULL or open; `name` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_port_by_name(
    client_: *mut c_void,
    name: *const c_char,
) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_port_by_name") }) else {
            return std::ptr::null_mut();
        };
        // SAFETY: per the function contract.
        let Some(n) = (unsafe { ffi::str_arg(name) }) else {
            ffi::error("jack_port_by_name: called with a NULL port name");
            return std::ptr::null_mut();
        };
        match lc.client.snapshot().port(&n) {
            Some(p) => intern(lc, p.id),
            None => std::ptr::null_mut(),
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_port_by_id(client_: *mut c_void, id: jack_port_id_t) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_port_by_id") }) else {
            return std::ptr::null_mut();
        };
        let t = lc.client.view().table(lc.client.view().current_index());
        match t.port_info(id) {
            Some((1, ..)) => intern(lc, id),
            _ => std::ptr::null_mut(),
        }
    })
}
