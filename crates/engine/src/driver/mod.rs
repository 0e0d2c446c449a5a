//! The [`Driver`] seam: the audio device the engine drives.
//!
//! A driver owns the device side of a cycle: it paces the cycles (says when
//! the next one starts), delivers capture into the capture ports' buffers,
//! takes the mixed playback, and reports its latencies. It never panics the
//! server: everything that goes wrong comes back as a [`Fault`] value, which
//! the engine reports ([`crate::events::RtEvent::DriverFault`]) and answers
//! with [`Driver::recover`] (or stops, for [`Fault::DeviceLost`] and
//! [`Fault::EndOfStream`]).
//!
//! The shape is meant to fit the drivers to come:
//!
//! * **ALSA** ([`alsa`]): the PCMs are opened and negotiated before the
//!   engine exists; `start` links capture and playback, prefills playback
//!   with silence and starts the stream; `wait` polls the PCM descriptors
//!   (a timeout of a few periods is [`Fault::Xrun`], `-EPIPE` too,
//!   `-ESTRPIPE` [`Fault::Suspended`], `-ENODEV` [`Fault::DeviceLost`]) and
//!   reads the capture period; `capture` and `playback` convert the sample
//!   format; [`Driver::flush`] writes the period; `recover` re-prepares and
//!   prefills after an xrun, and after a lost device paces on the clock
//!   until the device is back ([`Driver::take_resumed`]).
//! * **File** ([`mod@file`]): `wait` paces on the clock normally and does not
//!   wait at all when freewheeling (render faster than real time); the end
//!   of the input is [`Fault::EndOfStream`].
//! * **Network**: `wait` blocks on the socket for the next packet, a missing
//!   packet is [`Fault::Xrun`], a silent peer [`Fault::DeviceLost`].
//!
//! Runs on the driver thread (real-time): every method but `open`, `start`
//! and `stop` is called inside the cycle and must be real-time safe.

pub mod alsa;
pub mod dll;
pub mod dummy;
pub mod file;
pub mod pace;

use crate::clock::Clock;

/// What went wrong with the device (a value, never a panic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The device over- or underran; [`Driver::recover`] restarts it.
    Xrun,
    /// The device is gone (unplugged, peer lost, end of input); the engine
    /// stops unless [`Driver::recover`] keeps the graph running without it.
    DeviceLost,
    /// The device was suspended (`-ESTRPIPE`); [`Driver::recover`] resumes it.
    Suspended,
    /// The device refused a setting (rate, period, channel count).
    Unsupported,
    /// An OS error (errno) the driver could not map to the above.
    Os(i32),
    /// The stream ended (offline rendering: the input is used up and the
    /// output complete); the engine stops, the server shuts down.
    EndOfStream,
}

/// Latencies of the device, in frames, on top of the period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latencies {
    /// From the converter to the capture buffer.
    pub capture_frames: u32,
    /// From the playback buffer to the converter.
    pub playback_frames: u32,
}

/// The period the engine asks for in [`Driver::wait`] (it may change between
/// cycles: `buffer_frames` in the control header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// Frames per cycle.
    pub frames: u32,
    /// Sample rate (Hz).
    pub rate: u32,
    /// Freewheeling: run as fast as the graph allows, no device pacing.
    pub freewheel: bool,
}

/// When a cycle starts, as told by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Nominal start of this cycle (ns, on the engine's clock).
    pub start_ns: u64,
    /// When the driver thread actually woke (ns).
    pub awake_ns: u64,
    /// Nominal start of the next cycle (ns).
    pub next_ns: u64,
    /// Whole periods skipped by a resync (the driver woke more than a period
    /// late); 0 normally.
    pub skipped: u64,
    /// How late the driver woke with respect to the planned start, before
    /// any resync (ns).
    pub delay_ns: u64,
}

/// An audio device driven by the engine.
pub trait Driver {
    /// Prepares the device (not real-time: may allocate). Returns its latencies.
    fn open(&mut self, max_frames: usize) -> Result<Latencies, Fault>;
    /// Starts the stream; the first cycle starts at `now_ns` at the earliest.
    fn start(&mut self, now_ns: u64) -> Result<(), Fault>;
    /// Stops the stream (after the last cycle).
    fn stop(&mut self);
    /// Waits for the next period and says when the cycle starts. The device's
    /// period boundary happens here. Real-time safe.
    fn wait(&mut self, clock: &dyn Clock, period: Period) -> Result<Wake, Fault>;
    /// Fills `dst` (one capture channel, `dst.len()` frames) from the device.
    /// Real-time safe.
    fn capture(&mut self, channel: usize, dst: &mut [f32]);
    /// Takes one playback channel's mixed output of this cycle. Real-time safe.
    fn playback(&mut self, channel: usize, src: &[f32]);
    /// Every playback channel of this cycle was handed over: a device that
    /// writes a whole period at once (ALSA) writes it now. A fault here is
    /// kept and returned by the next [`Driver::wait`]. Real-time safe.
    fn flush(&mut self) {}
    /// The device's latencies. Real-time safe.
    fn latencies(&self) -> Latencies;
    /// Brings the device back after `fault`; Err if it cannot. Real-time safe.
    fn recover(&mut self, fault: Fault) -> Result<(), Fault>;
    /// True once after the driver came back to its device from running on
    /// the clock after [`Fault::DeviceLost`]. Real-time safe.
    fn take_resumed(&mut self) -> bool {
        false
    }
    /// Whether a freewheeling cycle waits for the whole graph however long
    /// it takes (offline rendering: every cycle complete, the same output
    /// for the same input) instead of ending after
    /// [`crate::FREEWHEEL_WAIT_NS`] with an xrun. Real-time safe.
    fn freewheel_waits_for_graph(&self) -> bool {
        false
    }
}
