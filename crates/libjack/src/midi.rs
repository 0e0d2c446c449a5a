//! midiport.h on resound's MIDI buffer format ([`resound_shm::midi`]).
//! Real-time safe: no allocation, no lock, no message.

use crate::ffi::*;
use resound_shm::midi;
use std::ffi::{c_int, c_void};

/// # Safety
/// `buf` is NULL or a buffer from jack_port_get_buffer on a MIDI port.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_get_event_count(buf: *mut c_void) -> u32 {
    crate::ffi::guard(0, || {
        if buf.is_null() {
            return 0;
        }
        // SAFETY: per the function contract: a MIDI buffer of MIDI_BUFFER_BYTES.
        unsafe { midi::event_count(buf as *const u8) }
    })
}

/// # Safety
/// `event` NULL or writable; `buf` as in jack_midi_get_event_count.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_event_get(
    event: *mut jack_midi_event_t,
    buf: *mut c_void,
    index: u32,
) -> c_int {
    crate::ffi::guard(-libc::EINVAL, || {
        if event.is_null() || buf.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: per the function contract.
        unsafe {
            let b = buf as *const u8;
            if !midi::is_valid(b) {
                return -libc::EINVAL;
            }
            if index >= midi::event_count(b) {
                return -libc::ENOBUFS;
            }
            match midi::event(b, index) {
                Some(e) => {
                    event.write(jack_midi_event_t {
                        time: e.time,
                        size: e.size as usize,
                        buffer: e.data as *mut u8,
                    });
                    0
                }
                None => -libc::EINVAL,
            }
        }
    })
}

/// # Safety
/// `buf` is NULL or an output MIDI buffer of this process.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_clear_buffer(buf: *mut c_void) {
    crate::ffi::guard((), || {
        if !buf.is_null() {
            // SAFETY: per the function contract.
            unsafe { midi::clear(buf as *mut u8) }
        }
    })
}

/// # Safety
/// As jack_midi_clear_buffer.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_reset_buffer(buf: *mut c_void) {
    crate::ffi::guard((), || {
        if !buf.is_null() {
            // SAFETY: per the function contract.
            unsafe {
                let b = buf as *mut u8;
                let n = match midi::nframes(b) {
                    0 => resound_shm::limits::MAX_BUFFER_FRAMES,
                    n => n,
                };
                midi::init(b, n);
            }
        }
    })
}

/// # Safety
/// As jack_midi_get_event_count.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_max_event_size(buf: *mut c_void) -> usize {
    crate::ffi::guard(0, || {
        if buf.is_null() {
            return 0;
        }
        // SAFETY: per the function contract.
        unsafe { midi::max_event_size(buf as *const u8) }
    })
}

/// # Safety
/// As jack_midi_clear_buffer.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_event_reserve(
    buf: *mut c_void,
    time: jack_nframes_t,
    size: usize,
) -> *mut jack_midi_data_t {
    crate::ffi::guard(std::ptr::null_mut(), || {
        if buf.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: per the function contract.
        unsafe { midi::reserve(buf as *mut u8, time, size) }.unwrap_or(std::ptr::null_mut())
    })
}

/// # Safety
/// As jack_midi_clear_buffer; `data` points to `size` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_event_write(
    buf: *mut c_void,
    time: jack_nframes_t,
    data: *const jack_midi_data_t,
    size: usize,
) -> c_int {
    crate::ffi::guard(-libc::EINVAL, || {
        if buf.is_null() || (data.is_null() && size > 0) {
            return -libc::EINVAL;
        }
        // SAFETY: per the function contract.
        match unsafe { midi::write(buf as *mut u8, time, data, size) } {
            Ok(()) => 0,
            Err(midi::WriteError::Invalid) => -libc::EINVAL,
            Err(midi::WriteError::NoSpace) => -libc::ENOBUFS,
        }
    })
}

/// # Safety
/// As jack_midi_get_event_count.
#[no_mangle]
pub unsafe extern "C" fn jack_midi_get_lost_event_count(buf: *mut c_void) -> u32 {
    crate::ffi::guard(0, || {
        if buf.is_null() {
            return 0;
        }
        // SAFETY: per the function contract.
        unsafe { midi::lost_count(buf as *const u8) }
    })
}
