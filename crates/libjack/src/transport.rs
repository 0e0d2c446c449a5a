//! transport.h: state queries, start/stop/locate/reposition (real-time
//! safe: they only write the client's mailbox in shared memory), slow-sync
//! and timebase registration. The sync and timebase callbacks themselves run
//! on the process thread (see `client.rs`).

use crate::callbacks::Cb;
use crate::client::client;
use crate::ffi::{self, *};
use resound_client::Code;
use resound_shm::time::{monotonic_ns, ns_to_frames};
use resound_shm::transport::{state, valid};
use std::ffi::{c_int, c_void};

/// # Safety
/// `client` NULL or open; `pos` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_transport_query(
    client_: *const c_void,
    pos: *mut jack_position_t,
) -> jack_transport_state_t {
    ffi::guard(state::STOPPED as c_int, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_transport_query") }) else {
            return state::STOPPED as c_int;
        };
        let t = lc.client.transport();
        if !pos.is_null() {
            // SAFETY: per the function contract (packed: unaligned write).
            unsafe { std::ptr::write_unaligned(pos, ffi::position_to_c(&t.pos, t.cycle)) };
        }
        t.state as c_int
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_get_current_transport_frame(
    client_: *const c_void,
) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_get_current_transport_frame") }) else {
            return 0;
        };
        let t = lc.client.transport();
        if t.state != state::ROLLING {
            return t.pos.frame;
        }
        let elapsed_us = (monotonic_ns() / 1000).saturating_sub(t.pos.usecs);
        let frames = ns_to_frames(elapsed_us.saturating_mul(1000), t.pos.frame_rate);
        t.pos.frame.wrapping_add(frames as u32)
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_transport_start(client_: *mut c_void) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        if let Some(lc) = unsafe { client(client_, "jack_transport_start") } {
            lc.client.transport_start();
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_transport_stop(client_: *mut c_void) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        if let Some(lc) = unsafe { client(client_, "jack_transport_stop") } {
            lc.client.transport_stop();
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_transport_locate(
    client_: *mut c_void,
    frame: jack_nframes_t,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_transport_locate") }) else {
            return -1;
        };
        // Real-time safe (it may be called from the process callback): a
        // busy request cell gives the code, without a message (a message
        // would allocate and call into the application's error callback).
        match lc.client.transport_locate(frame) {
            Ok(()) => 0,
            Err(_) => -1,
        }
    })
}

/// # Safety
/// `client` NULL or open; `pos` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn jack_transport_reposition(
    client_: *mut c_void,
    pos: *const jack_position_t,
) -> c_int {
    ffi::guard(libc::EINVAL, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_transport_reposition") }) else {
            return libc::EINVAL;
        };
        if pos.is_null() {
            ffi::error("jack_transport_reposition: NULL position");
            return libc::EINVAL;
        }
        // SAFETY: per the function contract (packed: unaligned read).
        let p = unsafe { std::ptr::read_unaligned(pos) };
        if p.valid & !valid::REQUESTABLE != 0 {
            return libc::EINVAL;
        }
        // As jack_transport_locate: the code, without a message.
        match lc.client.transport_reposition(&ffi::position_from_c(&p)) {
            Ok(()) => 0,
            Err(_) => libc::EINVAL,
        }
    })
}

/// Makes the client a slow-sync client (allowed while active, as in jackd).
///
/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_set_sync_callback(
    client_: *mut c_void,
    f: Option<JackSyncCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_set_sync_callback") }) else {
            return -1;
        };
        lc.set_sync(Cb { f, arg });
        match lc.client.set_sync_client(f.is_some()) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_sync_callback: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_set_sync_timeout(client_: *mut c_void, usecs: jack_time_t) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_set_sync_timeout") }) else {
            return -1;
        };
        match lc.client.set_sync_timeout(usecs) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_sync_timeout: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_set_timebase_callback(
    client_: *mut c_void,
    conditional: c_int,
    f: Option<JackTimebaseCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_set_timebase_callback") }) else {
            return -1;
        };
        if f.is_none() {
            ffi::error("jack_set_timebase_callback: NULL callback");
            return libc::EINVAL;
        }
        // The callback must be in place before the server names us master.
        lc.set_timebase(Cb { f, arg });
        match lc.client.set_timebase(conditional != 0) {
            Ok(()) => 0,
            Err(e) => {
                lc.set_timebase(Cb::default());
                if e.code() == Some(Code::Exists) {
                    libc::EBUSY
                } else {
                    ffi::error(&format!("jack_set_timebase_callback: {e}"));
                    -1
                }
            }
        }
    })
}

/// # Safety
/// `client` NULL or open.
#[no_mangle]
pub unsafe extern "C" fn jack_release_timebase(client_: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_release_timebase") }) else {
            return -1;
        };
        match lc.client.release_timebase() {
            Ok(()) => {
                lc.set_timebase(Cb::default());
                0
            }
            Err(e) => {
                ffi::error(&format!("jack_release_timebase: {e}"));
                libc::EINVAL
            }
        }
    })
}

/// Deprecated in JACK and not implemented by jackd either.
///
/// # Safety
/// `client` is not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_engine_takeover_timebase(_client: *mut c_void) -> c_int {
    crate::ffi::guard(libc::ENOSYS, || libc::ENOSYS)
}

/// Deprecated: the old transport structure, filled from the current transport.
///
/// # Safety
/// `client` NULL or open; `tinfo` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_get_transport_info(
    client_: *mut c_void,
    tinfo: *mut jack_transport_info_t,
) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { client(client_, "jack_get_transport_info") }) else {
            return;
        };
        if tinfo.is_null() {
            return;
        }
        let t = lc.client.transport();
        let p = t.pos;
        let bbt = p.valid & valid::BBT != 0;
        let info = jack_transport_info_t {
            frame_rate: p.frame_rate,
            usecs: p.usecs,
            // JackTransportState | JackTransportPosition (| JackTransportBBT)
            valid: 0x1 | 0x2 | if bbt { 0x10 } else { 0 },
            transport_state: t.state as c_int,
            frame: p.frame,
            loop_start: 0,
            loop_end: 0,
            smpte_offset: 0,
            smpte_frame_rate: 0.0,
            bar: p.bar,
            beat: p.beat,
            tick: p.tick,
            bar_start_tick: p.bar_start_tick,
            beats_per_bar: p.beats_per_bar,
            beat_type: p.beat_type,
            ticks_per_beat: p.ticks_per_beat,
            beats_per_minute: p.beats_per_minute,
        };
        // SAFETY: per the function contract.
        unsafe { tinfo.write(info) };
    })
}

/// Deprecated and without effect (as in jackd).
///
/// # Safety
/// Arguments are not dereferenced.
#[no_mangle]
pub unsafe extern "C" fn jack_set_transport_info(
    _client: *mut c_void,
    _tinfo: *mut jack_transport_info_t,
) {
    crate::ffi::guard((), || {
        ffi::error(
            "jack_set_transport_info: deprecated and without effect; use jack_set_timebase_callback",
        );
    })
}
