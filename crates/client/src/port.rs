//! Ports of a client: [`Port`], its type ([`PortKind`]) and flags
//! ([`PortFlags`]), and the per-cycle audio and MIDI accessors the process
//! callback uses ([`Port::audio_in`], [`Port::audio_out`], [`Port::midi_in`],
//! [`Port::midi_out`], [`MidiIn`], [`MidiOut`]).
//!
//! Threads: the accessors run on the process thread and are real-time safe;
//! ports are registered from other threads (see [`crate::Client::register_port`]).

use crate::scope::ProcessScope;
use resound_shm::cycle::{input_buffer, midi_input_buffer};
use resound_shm::limits::{AUDIO_TYPE, MIDI_TYPE};
use resound_shm::port_flags;

/// Port data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    /// 32-bit float mono audio.
    Audio,
    /// Raw MIDI events.
    Midi,
}

impl PortKind {
    /// The JACK type name.
    pub fn type_name(self) -> &'static str {
        match self {
            PortKind::Audio => AUDIO_TYPE,
            PortKind::Midi => MIDI_TYPE,
        }
    }
}

/// JACK port flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortFlags(pub u32);

impl PortFlags {
    /// JackPortIsInput.
    pub const INPUT: PortFlags = PortFlags(port_flags::IS_INPUT);
    /// JackPortIsOutput.
    pub const OUTPUT: PortFlags = PortFlags(port_flags::IS_OUTPUT);
    /// JackPortIsTerminal.
    pub const TERMINAL: PortFlags = PortFlags(port_flags::IS_TERMINAL);
}

impl std::ops::BitOr for PortFlags {
    type Output = PortFlags;
    fn bitor(self, o: PortFlags) -> PortFlags {
        PortFlags(self.0 | o.0)
    }
}

/// A port of this client. Not `Clone`: the handle that writes an output
/// buffer is unique, so two `&mut` to one buffer cannot exist.
#[derive(Debug)]
pub struct Port {
    id: u32,
    name: String,
    slot: u32,
}

impl Port {
    /// A handle on port `id` called `name`, owned by client `slot`.
    pub(crate) fn new(id: u32, name: String, slot: u32) -> Port {
        Port { id, name, slot }
    }

    /// Port id (slot), as JACK's `jack_port_id_t`.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Full name "client:port".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This cycle's input signal (silence when unconnected; the source's own
    /// buffer for a single connection; a mix for several). Real-time safe.
    pub fn audio_in<'s>(&'s self, ps: &'s ProcessScope<'_>) -> &'s [f32] {
        let p = input_buffer(ps.view, &ps.table, self.id, self.slot, ps.frames);
        // SAFETY: input_buffer returns a pointer to ≥ frames f32 in a mapped
        // segment (silence, a source buffer, or this port's own buffer).
        // Other processes write a source buffer only when they are late,
        // which gives wrong samples, never invalid memory.
        unsafe { std::slice::from_raw_parts(p, ps.frames) }
    }

    /// This cycle's output buffer (must be filled every cycle). Real-time safe.
    pub fn audio_out<'s>(&'s mut self, ps: &'s ProcessScope<'_>) -> &'s mut [f32] {
        match ps.view.port_buffer(self.slot, self.id) {
            // SAFETY: our own output port's buffer (max_frames ≥ frames f32);
            // `&mut self` makes this the only mutable view in this process.
            Some(p) => unsafe { std::slice::from_raw_parts_mut(p, ps.frames) },
            None => &mut [],
        }
    }

    /// This cycle's MIDI events at a MIDI input (merged in time order when
    /// several outputs are connected). Real-time safe.
    pub fn midi_in<'s>(&'s self, ps: &'s ProcessScope<'_>) -> MidiIn<'s> {
        let buf = midi_input_buffer(ps.view, &ps.table, self.id, self.slot, ps.frames);
        MidiIn {
            buf,
            next: 0,
            _l: std::marker::PhantomData,
        }
    }

    /// This cycle's MIDI output buffer, emptied (write events in time order).
    /// Real-time safe.
    pub fn midi_out<'s>(&'s mut self, ps: &'s ProcessScope<'_>) -> MidiOut<'s> {
        let buf = ps
            .view
            .port_buffer(self.slot, self.id)
            .map_or(std::ptr::null_mut(), |p| p as *mut u8);
        if !buf.is_null() {
            // SAFETY: our own output port's buffer (≥ MIDI_BUFFER_BYTES, aligned).
            unsafe { resound_shm::midi::init(buf, ps.frames as u32) };
        }
        MidiOut {
            buf,
            _l: std::marker::PhantomData,
        }
    }
}

/// One MIDI event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MidiEvent<'a> {
    /// Frame offset within the cycle.
    pub time: u32,
    /// The raw MIDI bytes.
    pub bytes: &'a [u8],
}

/// Iterator over a MIDI input's events this cycle.
pub struct MidiIn<'a> {
    buf: *const u8,
    next: u32,
    _l: std::marker::PhantomData<&'a ()>,
}

impl<'a> Iterator for MidiIn<'a> {
    type Item = MidiEvent<'a>;
    /// The next event. Real-time safe.
    fn next(&mut self) -> Option<MidiEvent<'a>> {
        // SAFETY: `buf` is a MIDI buffer of MIDI_BUFFER_BYTES in a mapped
        // segment (a port buffer or the silence buffer) valid for 'a; `event`
        // checks every range, so the slice lies inside it.
        unsafe {
            while self.next < resound_shm::midi::event_count(self.buf) {
                let i = self.next;
                self.next += 1;
                if let Some(e) = resound_shm::midi::event(self.buf, i) {
                    return Some(MidiEvent {
                        time: e.time,
                        bytes: std::slice::from_raw_parts(e.data, e.size as usize),
                    });
                }
            }
        }
        None
    }
}

/// Writer of a MIDI output's events this cycle.
pub struct MidiOut<'a> {
    buf: *mut u8,
    _l: std::marker::PhantomData<&'a mut ()>,
}

impl MidiOut<'_> {
    /// Writes an event at frame `time` (times must not decrease). Real-time safe.
    pub fn write(&mut self, time: u32, bytes: &[u8]) -> Result<(), resound_shm::midi::WriteError> {
        if self.buf.is_null() {
            return Err(resound_shm::midi::WriteError::Invalid);
        }
        // SAFETY: our own port's MIDI buffer, initialised by midi_out.
        unsafe { resound_shm::midi::write(self.buf, time, bytes.as_ptr(), bytes.len()) }
    }
}
