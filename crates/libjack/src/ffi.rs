//! C types of the JACK headers (exact layouts) and the helpers every
//! exported function uses: panic containment, C string handling, error
//! reporting through `jack_error_callback`, and `malloc`ed results the caller
//! frees with `jack_free`.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};

pub type jack_nframes_t = u32;
pub type jack_time_t = u64;
pub type jack_uuid_t = u64;
pub type jack_port_id_t = u32;
pub type jack_port_type_id_t = u32;
pub type jack_intclient_t = u64;
pub type jack_options_t = c_int;
pub type jack_status_t = c_int;
pub type jack_transport_state_t = c_int;
pub type jack_latency_callback_mode_t = c_int;
pub type jack_midi_data_t = u8;
pub type jack_native_thread_t = libc::pthread_t;

pub type JackProcessCallback = unsafe extern "C" fn(jack_nframes_t, *mut c_void) -> c_int;
pub type JackThreadCallback = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
pub type JackThreadInitCallback = unsafe extern "C" fn(*mut c_void);
pub type JackGraphOrderCallback = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type JackXRunCallback = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type JackBufferSizeCallback = unsafe extern "C" fn(jack_nframes_t, *mut c_void) -> c_int;
pub type JackSampleRateCallback = unsafe extern "C" fn(jack_nframes_t, *mut c_void) -> c_int;
pub type JackPortRegistrationCallback = unsafe extern "C" fn(jack_port_id_t, c_int, *mut c_void);
pub type JackClientRegistrationCallback = unsafe extern "C" fn(*const c_char, c_int, *mut c_void);
pub type JackPortConnectCallback =
    unsafe extern "C" fn(jack_port_id_t, jack_port_id_t, c_int, *mut c_void);
pub type JackPortRenameCallback =
    unsafe extern "C" fn(jack_port_id_t, *const c_char, *const c_char, *mut c_void);
pub type JackFreewheelCallback = unsafe extern "C" fn(c_int, *mut c_void);
pub type JackShutdownCallback = unsafe extern "C" fn(*mut c_void);
pub type JackInfoShutdownCallback = unsafe extern "C" fn(jack_status_t, *const c_char, *mut c_void);
pub type JackLatencyCallback = unsafe extern "C" fn(jack_latency_callback_mode_t, *mut c_void);
pub type JackSyncCallback =
    unsafe extern "C" fn(jack_transport_state_t, *mut jack_position_t, *mut c_void) -> c_int;
pub type JackTimebaseCallback = unsafe extern "C" fn(
    jack_transport_state_t,
    jack_nframes_t,
    *mut jack_position_t,
    c_int,
    *mut c_void,
);
pub type JackPropertyChangeCallback =
    unsafe extern "C" fn(jack_uuid_t, *const c_char, c_int, *mut c_void);
pub type JackSessionCallback = unsafe extern "C" fn(*mut c_void, *mut c_void);
pub type jack_thread_creator_t = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    JackThreadCallback,
    *mut c_void,
) -> c_int;

/// `JackOptions`.
pub mod options {
    use std::ffi::c_int;
    pub const NO_START_SERVER: c_int = 0x01;
    pub const USE_EXACT_NAME: c_int = 0x02;
    pub const SERVER_NAME: c_int = 0x04;
    pub const LOAD_NAME: c_int = 0x08;
    pub const LOAD_INIT: c_int = 0x10;
    pub const SESSION_ID: c_int = 0x20;
    /// JackOpenOptions.
    pub const OPEN: c_int = SESSION_ID | SERVER_NAME | NO_START_SERVER | USE_EXACT_NAME;
    /// JackLoadOptions.
    pub const LOAD: c_int = LOAD_INIT | LOAD_NAME | USE_EXACT_NAME;
}

/// `JackStatus`.
pub mod status {
    use std::ffi::c_int;
    pub const FAILURE: c_int = 0x01;
    pub const INVALID_OPTION: c_int = 0x02;
    pub const NAME_NOT_UNIQUE: c_int = 0x04;
    pub const SERVER_STARTED: c_int = 0x08;
    pub const SERVER_FAILED: c_int = 0x10;
    pub const SERVER_ERROR: c_int = 0x20;
    pub const NO_SUCH_CLIENT: c_int = 0x40;
    pub const LOAD_FAILURE: c_int = 0x80;
    pub const INIT_FAILURE: c_int = 0x100;
    pub const SHM_FAILURE: c_int = 0x200;
    pub const VERSION_ERROR: c_int = 0x400;
    pub const BACKEND_ERROR: c_int = 0x800;
    pub const CLIENT_ZOMBIE: c_int = 0x1000;
}

/// `jack_position_t`: packed on every platform by the headers (136 bytes).
#[repr(C, packed)]
#[derive(Clone, Copy, Default)]
pub struct jack_position_t {
    pub unique_1: u64,
    pub usecs: jack_time_t,
    pub frame_rate: jack_nframes_t,
    pub frame: jack_nframes_t,
    pub valid: u32,
    pub bar: i32,
    pub beat: i32,
    pub tick: i32,
    pub bar_start_tick: f64,
    pub beats_per_bar: f32,
    pub beat_type: f32,
    pub ticks_per_beat: f64,
    pub beats_per_minute: f64,
    pub frame_time: f64,
    pub next_time: f64,
    pub bbt_offset: jack_nframes_t,
    pub audio_frames_per_video_frame: f32,
    pub video_offset: jack_nframes_t,
    pub tick_double: f64,
    pub padding: [i32; 5],
    pub unique_2: u64,
}

/// `jack_transport_info_t` (deprecated API; natural alignment).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct jack_transport_info_t {
    pub frame_rate: jack_nframes_t,
    pub usecs: jack_time_t,
    pub valid: c_int,
    pub transport_state: jack_transport_state_t,
    pub frame: jack_nframes_t,
    pub loop_start: jack_nframes_t,
    pub loop_end: jack_nframes_t,
    pub smpte_offset: libc::c_long,
    pub smpte_frame_rate: f32,
    pub bar: c_int,
    pub beat: c_int,
    pub tick: c_int,
    pub bar_start_tick: f64,
    pub beats_per_bar: f32,
    pub beat_type: f32,
    pub ticks_per_beat: f64,
    pub beats_per_minute: f64,
}

/// `jack_latency_range_t` (packed).
#[repr(C, packed)]
#[derive(Clone, Copy, Default)]
pub struct jack_latency_range_t {
    pub min: jack_nframes_t,
    pub max: jack_nframes_t,
}

/// `jack_midi_event_t`.
#[repr(C)]
pub struct jack_midi_event_t {
    pub time: jack_nframes_t,
    pub size: usize,
    pub buffer: *mut jack_midi_data_t,
}

/// `jack_ringbuffer_data_t`.
#[repr(C)]
pub struct jack_ringbuffer_data_t {
    pub buf: *mut c_char,
    pub len: usize,
}

/// `jack_ringbuffer_t`: its fields are public in the header, so this is the
/// exact layout programs may read.
#[repr(C)]
pub struct jack_ringbuffer_t {
    pub buf: *mut c_char,
    pub write_ptr: usize,
    pub read_ptr: usize,
    pub size: usize,
    pub size_mask: usize,
    pub mlocked: c_int,
}

/// `jack_property_t`.
#[repr(C)]
pub struct jack_property_t {
    pub key: *const c_char,
    pub data: *const c_char,
    pub type_: *const c_char,
}

/// `jack_description_t`.
#[repr(C)]
pub struct jack_description_t {
    pub subject: jack_uuid_t,
    pub property_cnt: u32,
    pub properties: *mut jack_property_t,
    pub property_size: u32,
}

/// `jack_session_event_t` (only freed here: sessions are not supported).
#[repr(C)]
pub struct jack_session_event_t {
    pub type_: c_int,
    pub session_dir: *const c_char,
    pub client_uuid: *const c_char,
    pub command_line: *mut c_char,
    pub flags: c_int,
    pub future: u32,
}

/// `jack_session_command_t`.
#[repr(C)]
pub struct jack_session_command_t {
    pub uuid: *const c_char,
    pub client_name: *const c_char,
    pub command: *const c_char,
    pub flags: c_int,
}

extern "C" {
    fn lj_report_error(msg: *const c_char);
    fn lj_report_info(msg: *const c_char);
}

fn to_cstring(msg: &str) -> CString {
    CString::new(msg.replace('\0', " ")).unwrap_or_default()
}

/// Reports an error through `jack_error_callback` (default: stderr).
pub fn error(msg: &str) {
    let c = to_cstring(msg);
    // SAFETY: lj_report_error (shim.c) reads a valid NUL-terminated string
    // and calls the application's callback with it.
    unsafe { lj_report_error(c.as_ptr()) }
}

/// Reports information through `jack_info_callback` (default: stderr).
pub fn info(msg: &str) {
    let c = to_cstring(msg);
    // SAFETY: as in `error`.
    unsafe { lj_report_info(c.as_ptr()) }
}

/// Runs `f`, turning a panic into `fallback` and an error message: no panic
/// ever unwinds into C code.
pub fn guard<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(e) => {
            let what = e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            error(&format!("resound libjack: internal error: {what}"));
            fallback
        }
    }
}

/// A borrowed C string as UTF-8 (lossy), None for NULL.
///
/// # Safety
/// `p` is NULL or a valid NUL-terminated string that outlives the result.
pub unsafe fn str_arg<'a>(p: *const c_char) -> Option<std::borrow::Cow<'a, str>> {
    if p.is_null() {
        None
    } else {
        // SAFETY: per the function contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy())
    }
}

/// A `malloc`ed copy of `s` (free with `jack_free`/`free`); NULL on failure.
pub fn strdup(s: &str) -> *mut c_char {
    let bytes = s.as_bytes();
    // SAFETY: malloc of len+1 bytes; we write exactly that many.
    unsafe {
        let p = libc::malloc(bytes.len() + 1) as *mut c_char;
        if p.is_null() {
            return p;
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, p, bytes.len());
        *p.add(bytes.len()) = 0;
        p
    }
}

/// A NULL-terminated `const char **` array in ONE `malloc` block (pointers
/// then the strings), so `jack_free(array)` releases everything, as jackd's
/// callers expect. NULL for an empty list.
pub fn string_array<S: AsRef<str>>(items: &[S]) -> *mut *const c_char {
    if items.is_empty() {
        return std::ptr::null_mut();
    }
    let ptrs = (items.len() + 1) * std::mem::size_of::<*const c_char>();
    let chars: usize = items.iter().map(|s| s.as_ref().len() + 1).sum();
    // SAFETY: one allocation of ptrs + chars bytes; the pointer table is
    // written first, the strings after it, each NUL-terminated, all in bounds.
    unsafe {
        let base = libc::malloc(ptrs + chars) as *mut u8;
        if base.is_null() {
            return std::ptr::null_mut();
        }
        let table = base as *mut *const c_char;
        let mut at = base.add(ptrs);
        for (i, s) in items.iter().enumerate() {
            let b = s.as_ref().as_bytes();
            std::ptr::copy_nonoverlapping(b.as_ptr(), at, b.len());
            *at.add(b.len()) = 0;
            *table.add(i) = at as *const c_char;
            at = at.add(b.len() + 1);
        }
        *table.add(items.len()) = std::ptr::null();
        table
    }
}

/// Copies `s` into a caller buffer of `cap` bytes, NUL-terminated (truncating).
///
/// # Safety
/// `dst` points to `cap` writable bytes.
pub unsafe fn copy_to(dst: *mut c_char, cap: usize, s: &str) {
    if dst.is_null() || cap == 0 {
        return;
    }
    let n = s.len().min(cap - 1);
    // SAFETY: n + 1 <= cap bytes written.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, dst, n);
        *dst.add(n) = 0;
    }
}

/// Builds a [`resound_client::Position`] from a `jack_position_t`.
pub fn position_from_c(p: &jack_position_t) -> resound_client::Position {
    resound_client::Position {
        usecs: p.usecs,
        frame_rate: p.frame_rate,
        frame: p.frame,
        valid: p.valid,
        bar: p.bar,
        beat: p.beat,
        tick: p.tick,
        bar_start_tick: p.bar_start_tick,
        beats_per_bar: p.beats_per_bar,
        beat_type: p.beat_type,
        ticks_per_beat: p.ticks_per_beat,
        beats_per_minute: p.beats_per_minute,
        frame_time: p.frame_time,
        next_time: p.next_time,
        bbt_offset: p.bbt_offset,
        audio_frames_per_video_frame: p.audio_frames_per_video_frame,
        video_offset: p.video_offset,
        tick_double: p.tick_double,
    }
}

/// Fills a `jack_position_t` (unique_1 == unique_2: consistent).
pub fn position_to_c(p: &resound_client::Position, unique: u64) -> jack_position_t {
    jack_position_t {
        unique_1: unique,
        usecs: p.usecs,
        frame_rate: p.frame_rate,
        frame: p.frame,
        valid: p.valid,
        bar: p.bar,
        beat: p.beat,
        tick: p.tick,
        bar_start_tick: p.bar_start_tick,
        beats_per_bar: p.beats_per_bar,
        beat_type: p.beat_type,
        ticks_per_beat: p.ticks_per_beat,
        beats_per_minute: p.beats_per_minute,
        frame_time: p.frame_time,
        next_time: p.next_time,
        bbt_offset: p.bbt_offset,
        audio_frames_per_video_frame: p.audio_frames_per_video_frame,
        video_offset: p.video_offset,
        tick_double: p.tick_double,
        padding: [0; 5],
        unique_2: unique,
    }
}

/// `jack_free`: frees memory the library returned (jack_get_ports & co).
///
/// # Safety
/// `ptr` is NULL or was returned by this library for the caller to free.
#[no_mangle]
pub unsafe extern "C" fn jack_free(ptr: *mut c_void) {
    crate::ffi::guard((), || {
        // SAFETY: per the function contract, `ptr` came from malloc or is NULL.
        unsafe { libc::free(ptr) }
    })
}
