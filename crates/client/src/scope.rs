//! What the process code sees of a cycle: [`ProcessScope`], and the
//! resolution of port buffers for a cycle shared by the native API and
//! bindings ([`ProcessScope::port_buffer`], [`Client::port_buffer`]):
//! an output's own buffer; an own input with one live source that source's
//! buffer (zero copy), with several the mix (audio) or time-ordered merge
//! (MIDI) in its own buffer, with none its own buffer emptied (never the
//! read-only silence buffer, since programs may write into inputs). Also
//! [`silence_outputs`] for cycles the process code skips.
//!
//! Threads: the process thread (everything here is real-time safe);
//! [`Client::port_buffer`] may also be called from other threads.

use crate::client::Client;
use resound_shm::cycle::{input_buffer, midi_input_buffer};
use resound_shm::{midi, port_flags, port_type, Table, View};

/// What the process callback sees of the current cycle.
pub struct ProcessScope<'a> {
    pub(crate) view: &'a View,
    pub(crate) table: Table<'a>,
    pub(crate) frames: usize,
    pub(crate) cycle: u64,
    pub(crate) frame_time: u64,
    pub(crate) cycle_start_ns: u64,
}

impl ProcessScope<'_> {
    /// Frames in this cycle. Real-time safe.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Cycle number (the server's first cycle is 1). Real-time safe.
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Frame time of the first frame of this cycle (JACK's jack_last_frame_time). Real-time safe.
    pub fn last_frame_time(&self) -> u64 {
        self.frame_time
    }

    /// CLOCK_MONOTONIC ns at which this cycle began. Real-time safe.
    pub fn cycle_start_ns(&self) -> u64 {
        self.cycle_start_ns
    }

    /// Raw buffer pointer of any port of the graph by id (for C bindings):
    /// inputs resolve their connections like [`crate::Port::audio_in`] (an
    /// unconnected input gives the read-only silence buffer). Real-time safe.
    pub fn raw_buffer(&self, port: u32, me: u32) -> Option<*mut f32> {
        let (state, owner, flags, _) = self.table.port_info(port)?;
        if state != 1 {
            return None;
        }
        if flags & port_flags::IS_INPUT != 0 && owner == me {
            Some(input_buffer(self.view, &self.table, port, me, self.frames) as *mut f32)
        } else {
            self.view.port_buffer(owner, port)
        }
    }

    /// The buffer of port `port` for this cycle, as this client's process
    /// code may use it (see the module docs); `me` is this client's slot.
    /// None for a port that is not live. Real-time safe.
    pub fn port_buffer(&self, port: u32, me: u32) -> Option<*mut u8> {
        resolve_buffer(self.view, &self.table, port, me, self.frames)
    }
}

impl Client {
    /// The buffer of port `port` for a cycle of `frames` frames run on graph
    /// table `table` (see the module docs and [`ProcessScope::port_buffer`]),
    /// for bindings that keep port ids and call from the process thread or
    /// any other. None for a port that is not live. Real-time safe.
    pub fn port_buffer(&self, table: usize, port: u32, frames: usize) -> Option<*mut u8> {
        let view = &self.inner.view;
        resolve_buffer(view, &view.table(table), port, self.inner.slot, frames)
    }
}

/// The one buffer-resolution rule (see the module docs). Real-time safe.
fn resolve_buffer(view: &View, t: &Table<'_>, id: u32, me: u32, frames: usize) -> Option<*mut u8> {
    let Some((1, owner, flags, ty)) = t.port_info(id) else {
        return None;
    };
    let own = view.port_buffer(owner, id)?;
    if owner != me {
        return Some(own as *mut u8);
    }
    let frames = frames.min(view.layout().caps.max_frames as usize);
    let midi_port = ty == port_type::MIDI;
    if flags & port_flags::IS_INPUT != 0 {
        return Some(if midi_port {
            own_midi_input(view, t, id, me, frames, own as *mut u8)
        } else {
            own_audio_input(view, t, id, me, frames, own)
        });
    }
    if midi_port {
        // SAFETY: our own output's buffer (≥ MIDI_BUFFER_BYTES), written
        // only by this client.
        unsafe {
            let b = own as *mut u8;
            if !midi::is_valid(b) || midi::nframes(b) != frames as u32 {
                midi::init(b, frames as u32);
            }
        }
    }
    Some(own as *mut u8)
}

/// An own audio input: the resolved source, or `own` zeroed for silence.
/// Real-time safe.
fn own_audio_input(
    view: &View,
    t: &Table<'_>,
    id: u32,
    me: u32,
    frames: usize,
    own: *mut f32,
) -> *mut u8 {
    let b = input_buffer(view, t, id, me, frames);
    if b != view.silence() {
        return b as *mut u8;
    }
    // The silence buffer is read-only shared memory; programs may write
    // into their input buffers, so hand out zeroed own memory.
    // SAFETY: our own input's buffer (≥ max_frames f32 ≥ frames), written only by us.
    unsafe { std::slice::from_raw_parts_mut(own, frames).fill(0.0) };
    own as *mut u8
}

/// An own MIDI input: the resolved source or merge, or `own` emptied.
/// Real-time safe.
fn own_midi_input(
    view: &View,
    t: &Table<'_>,
    id: u32,
    me: u32,
    frames: usize,
    own: *mut u8,
) -> *mut u8 {
    let b = midi_input_buffer(view, t, id, me, frames);
    if b != view.silence() as *const u8 {
        return b as *mut u8;
    }
    // SAFETY: our own input's buffer (≥ MIDI_BUFFER_BYTES); written only by us.
    unsafe { midi::init(own, frames as u32) };
    own
}

/// Silences every output port of client `slot` for a cycle of `frames`
/// frames: audio zeroed, MIDI emptied. For cycles a client's process code
/// skips. Real-time safe (no allocation, lock or syscall).
pub fn silence_outputs(view: &View, table: &Table<'_>, slot: u32, frames: usize) {
    let frames = frames.min(view.layout().caps.max_frames as usize);
    for id in 0..table.port_hw() {
        let Some((1, owner, flags, ty)) = table.port_info(id) else {
            continue;
        };
        if owner != slot || flags & port_flags::IS_OUTPUT == 0 {
            continue;
        }
        if let Some(b) = view.port_buffer(slot, id) {
            // SAFETY: an output port of `slot`, the caller's own: its buffer
            // holds max_frames f32 (≥ frames) and at least a MIDI buffer, and
            // only its owner writes it.
            unsafe {
                if ty == port_type::MIDI {
                    midi::init(b as *mut u8, frames as u32);
                } else {
                    std::slice::from_raw_parts_mut(b, frames).fill(0.0);
                }
            }
        }
    }
}

impl Client {
    /// Silences this client's outputs for a cycle of `frames` frames on
    /// graph table `table` that its process code skips (see
    /// [`silence_outputs`]). Real-time safe.
    pub fn silence_own_outputs(&self, table: usize, frames: usize) {
        let view = &self.inner.view;
        silence_outputs(view, &view.table(table), self.inner.slot, frames);
    }
}
