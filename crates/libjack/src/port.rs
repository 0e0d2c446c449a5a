//! `jack_port_t`: the [`LjPort`] handle, registration, buffers and ties.
//! Names and aliases are in [`crate::port_info`], connections in
//! [`crate::connect`], latencies and monitoring in [`crate::latency`], the
//! port queries (jack_get_ports & co) in [`crate::port_query`].
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
use resound_client::Error;
use resound_shm::limits::PORT_NAME_MAX;
use resound_shm::sync::Ordering;
use resound_shm::{port_flags, Table};
use std::ffi::{c_char, c_int, c_ulong, c_void};
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
// SAFETY: shared references only read `id` and the LjClient (itself Sync)
// through `client`, which outlives the handle; `tied` is an atomic.
unsafe impl Sync for LjPort {}

impl LjPort {
    /// The client that handed out this handle.
    pub fn client(&self) -> &LjClient {
        // SAFETY: see the Send impl: the client owns and outlives the handle.
        unsafe { &*self.client }
    }

    /// The graph table this handle reads (see [`LjClient::table_index`]).
    pub(crate) fn table(&self) -> Table<'_> {
        let c = self.client();
        c.client.table(c.table_index())
    }

    /// (state, owner, flags, type) from the current table.
    pub(crate) fn info(&self) -> Option<(u32, u32, u32, u32)> {
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

/// Reports a failed request of `func` through the error callback; returns -1.
pub(crate) fn report(func: &str, e: &Error) -> c_int {
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
    lc.client.silence_own_outputs(table, frames);
}

/// The buffer of port `id` (tied to `tied`) for a cycle of `nframes`: the
/// client library's resolution (see the module docs), except that an
/// output tied to one of this client's live inputs hands out that input's
/// buffer (jack_port_tie). Real-time safe.
fn buffer(lc: &LjClient, id: u32, tied: u32, nframes: u32) -> *mut c_void {
    let table = lc.table_index();
    let port = if tied != NOT_TIED && tied != id && is_own_output_tie(lc, table, id, tied) {
        tied
    } else {
        id
    };
    lc.client
        .port_buffer(table, port, nframes as usize)
        .map_or(std::ptr::null_mut(), |b| b as *mut c_void)
}

/// Whether output `id` may pass input `tied` through: both live, `id` an
/// output of this client and `tied` an input this client still owns (never
/// another client's buffer for the application to write into). Real-time safe.
fn is_own_output_tie(lc: &LjClient, table: usize, id: u32, tied: u32) -> bool {
    let t = lc.client.table(table);
    let me = lc.client.slot();
    let own = |port: u32, dir: u32| matches!(t.port_info(port), Some((1, owner, flags, _)) if owner == me && flags & dir != 0);
    own(id, port_flags::IS_OUTPUT) && own(tied, port_flags::IS_INPUT)
}

/// This cycle's buffer of a port (see the module docs). Real-time safe.
///
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
