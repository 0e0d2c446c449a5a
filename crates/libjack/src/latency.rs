//! Port latencies (ranges, the deprecated single values, recomputation) and
//! input monitoring. Reads come from the graph table; changes are requests
//! to the server (application threads).

use crate::client::client;
use crate::ffi::{self, *};
use crate::port::{port, report, LjPort};
use resound_shm::port_flags;
use std::ffi::{c_char, c_int, c_void};

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
        let Some(id) = lc.client.snapshot_now().port(&n).map(|p| p.id) else {
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
