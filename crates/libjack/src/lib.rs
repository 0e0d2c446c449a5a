//! # resound-libjack: `libjack.so.0`
//!
//! The JACK C API (jack.h, types.h, transport.h, midiport.h, ringbuffer.h,
//! thread.h, statistics.h, intclient.h, metadata.h, uuid.h, and the
//! deprecated session.h) on top of [`resound_client`], so programs built
//! against JACK's libjack run unchanged on resound when this library comes
//! first in the loader path (`resound run -- PROGRAM`).
//!
//! This crate is a thin C layer: everything a client does (shared memory,
//! the process thread, requests, notifications) is resound-client's; here
//! are the C types with the distribution headers' exact layouts, the
//! mapping of JACK calls and callbacks onto the client library, and the
//! C shim (`shim.c`) for what stable Rust cannot express (the variadic
//! `jack_client_open`, the exported data symbols, leaving a
//! `jack_set_process_thread` thread).
//!
//! Rules every exported function follows: NULL pointers and unknown ports
//! give JACK's failure value and a message through `jack_error_callback`;
//! no panic crosses the C boundary ([`ffi::guard`]); results the caller
//! frees are `malloc`ed (`jack_free`). On the process thread nothing of ours
//! allocates, locks or blocks.

#![allow(clippy::missing_safety_doc)]

pub mod callbacks;
pub mod client;
pub mod connect;
pub mod ffi;
pub mod in_server;
pub mod info;
pub mod intclient;
pub mod latency;
pub mod metadata;
pub mod midi;
pub mod notify;
pub mod port;
pub mod port_info;
pub mod port_query;
pub mod process;
pub mod registry;
pub mod ringbuffer;
pub mod session;
pub mod thread;
pub mod thread_reserve;
pub mod time;
pub mod transport;

use std::ffi::{c_char, c_int, CStr};

/// JACK version this library implements (jackd2's API level).
const VERSION: (c_int, c_int, c_int, c_int) = (1, 9, 21, 8);
const VERSION_STRING: &CStr = c"1.9.21 (resound)";

/// # Safety
/// Each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_get_version(
    major: *mut c_int,
    minor: *mut c_int,
    micro: *mut c_int,
    proto: *mut c_int,
) {
    crate::ffi::guard((), || {
        // SAFETY: per the function contract.
        unsafe {
            for (p, v) in [
                (major, VERSION.0),
                (minor, VERSION.1),
                (micro, VERSION.2),
                (proto, VERSION.3),
            ] {
                if !p.is_null() {
                    *p = v;
                }
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn jack_get_version_string() -> *const c_char {
    crate::ffi::guard(std::ptr::null(), || VERSION_STRING.as_ptr())
}

/// The layout of every public struct as this library sees it, one
/// `name size` or `name.field offset` per line, for the ABI test
/// (`tests/c/abi.c` compares it with the distribution headers).
#[no_mangle]
pub extern "C" fn resound_libjack_abi() -> *const c_char {
    crate::ffi::guard(std::ptr::null(), || {
        static ABI: std::sync::OnceLock<std::ffi::CString> = std::sync::OnceLock::new();
        ABI.get_or_init(|| {
            use ffi::*;
            use std::mem::{offset_of, size_of};
            let mut s = String::new();
            macro_rules! size {
                ($t:ty) => {
                    s += &format!("{} {}\n", stringify!($t), size_of::<$t>());
                };
            }
            macro_rules! off {
                ($t:ty, $($f:ident),+) => {
                    $( s += &format!("{}.{} {}\n", stringify!($t), stringify!($f).trim_end_matches('_'), offset_of!($t, $f)); )+
                };
            }
            size!(jack_position_t);
            off!(
                jack_position_t, unique_1, usecs, frame_rate, frame, valid, bar, beat, tick,
                bar_start_tick, beats_per_bar, beat_type, ticks_per_beat, beats_per_minute,
                frame_time, next_time, bbt_offset, audio_frames_per_video_frame, video_offset,
                tick_double, padding, unique_2
            );
            size!(jack_transport_info_t);
            off!(
                jack_transport_info_t, frame_rate, usecs, valid, transport_state, frame,
                loop_start, loop_end, smpte_offset, smpte_frame_rate, bar, beat, tick,
                bar_start_tick, beats_per_bar, beat_type, ticks_per_beat, beats_per_minute
            );
            size!(jack_latency_range_t);
            off!(jack_latency_range_t, min, max);
            size!(jack_midi_event_t);
            off!(jack_midi_event_t, time, size, buffer);
            size!(jack_ringbuffer_data_t);
            off!(jack_ringbuffer_data_t, buf, len);
            size!(jack_ringbuffer_t);
            off!(jack_ringbuffer_t, buf, write_ptr, read_ptr, size, size_mask, mlocked);
            size!(jack_property_t);
            off!(jack_property_t, key, data, type_);
            size!(jack_description_t);
            off!(jack_description_t, subject, property_cnt, properties, property_size);
            size!(jack_session_event_t);
            off!(jack_session_event_t, type_, session_dir, client_uuid, command_line, flags, future);
            size!(jack_session_command_t);
            off!(jack_session_command_t, uuid, client_name, command, flags);
            // The values this library uses for the headers' enums and constants.
            use resound_shm::port_flags as pf;
            use resound_shm::transport::{state, valid};
            let consts: &[(&str, i64)] = &[
                ("JackNullOption", 0),
                ("JackNoStartServer", options::NO_START_SERVER as i64),
                ("JackUseExactName", options::USE_EXACT_NAME as i64),
                ("JackServerName", options::SERVER_NAME as i64),
                ("JackLoadName", options::LOAD_NAME as i64),
                ("JackLoadInit", options::LOAD_INIT as i64),
                ("JackSessionID", options::SESSION_ID as i64),
                ("JackOpenOptions", options::OPEN as i64),
                ("JackLoadOptions", options::LOAD as i64),
                ("JackFailure", status::FAILURE as i64),
                ("JackInvalidOption", status::INVALID_OPTION as i64),
                ("JackNameNotUnique", status::NAME_NOT_UNIQUE as i64),
                ("JackServerStarted", status::SERVER_STARTED as i64),
                ("JackServerFailed", status::SERVER_FAILED as i64),
                ("JackServerError", status::SERVER_ERROR as i64),
                ("JackNoSuchClient", status::NO_SUCH_CLIENT as i64),
                ("JackLoadFailure", status::LOAD_FAILURE as i64),
                ("JackInitFailure", status::INIT_FAILURE as i64),
                ("JackShmFailure", status::SHM_FAILURE as i64),
                ("JackVersionError", status::VERSION_ERROR as i64),
                ("JackBackendError", status::BACKEND_ERROR as i64),
                ("JackClientZombie", status::CLIENT_ZOMBIE as i64),
                ("JackPortIsInput", pf::IS_INPUT as i64),
                ("JackPortIsOutput", pf::IS_OUTPUT as i64),
                ("JackPortIsPhysical", pf::IS_PHYSICAL as i64),
                ("JackPortCanMonitor", pf::CAN_MONITOR as i64),
                ("JackPortIsTerminal", pf::IS_TERMINAL as i64),
                ("JackTransportStopped", state::STOPPED as i64),
                ("JackTransportRolling", state::ROLLING as i64),
                ("JackTransportStarting", state::STARTING as i64),
                ("JackPositionBBT", valid::BBT as i64),
                ("JackPositionTimecode", valid::TIMECODE as i64),
                ("JackBBTFrameOffset", valid::BBT_FRAME_OFFSET as i64),
                ("JackAudioVideoRatio", valid::AUDIO_VIDEO_RATIO as i64),
                ("JackVideoFrameOffset", valid::VIDEO_FRAME_OFFSET as i64),
                ("JackTickDouble", valid::TICK_DOUBLE as i64),
                ("JACK_POSITION_MASK", valid::REQUESTABLE as i64),
                ("JackCaptureLatency", 0),
                ("JackPlaybackLatency", 1),
                (
                    "PropertyCreated",
                    resound_protocol::wire::property_change::CREATED as i64,
                ),
                (
                    "PropertyChanged",
                    resound_protocol::wire::property_change::CHANGED as i64,
                ),
                (
                    "PropertyDeleted",
                    resound_protocol::wire::property_change::DELETED as i64,
                ),
                ("jack_client_name_size", info::jack_client_name_size() as i64),
                ("jack_port_name_size", port_info::jack_port_name_size() as i64),
                ("jack_port_type_size", port_info::jack_port_type_size() as i64),
            ];
            for (n, v) in consts {
                s += &format!("{n} {v}\n");
            }
            std::ffi::CString::new(s).unwrap_or_default()
        })
        .as_ptr()
    })
}
