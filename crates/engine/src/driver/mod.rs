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
//! * **ALSA**: `open` configures the PCMs (period, buffer, mmap) and links
//!   capture and playback; `start` prefills playback with silence and starts
//!   the stream; `wait` polls the PCM descriptors (with a timeout of a few
//!   periods: a dead card is [`Fault::DeviceLost`], `-EPIPE` is
//!   [`Fault::Xrun`]) and returns when a period is available; `capture` and
//!   `playback` copy between the mmap areas and the port buffers, converting
//!   the sample format; `recover` re-prepares and prefills after an xrun.
//! * **File** ([`mod@file`]): `wait` paces on the clock normally and does not
//!   wait at all when freewheeling (render faster than real time); the end
//!   of the input is [`Fault::EndOfStream`].
//! * **Network**: `wait` blocks on the socket for the next packet, a missing
//!   packet is [`Fault::Xrun`], a silent peer [`Fault::DeviceLost`].
//!
//! Runs on the driver thread (real-time): every method but `open`, `start`
//! and `stop` is called inside the cycle and must be real-time safe.

pub mod dummy;
pub mod file;
pub mod pace;

use crate::clock::Clock;

/// What went wrong with the device (a value, never a panic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The device over- or underran; [`Driver::recover`] restarts it.
    Xrun,
    /// The device is gone (unplugged, peer lost, end of input); the engine stops.
    DeviceLost,
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
    /// The device's latencies. Real-time safe.
    fn latencies(&self) -> Latencies;
    /// Brings the device back after `fault`; Err if it cannot. Real-time safe.
    fn recover(&mut self, fault: Fault) -> Result<(), Fault>;
    /// Whether a freewheeling cycle waits for the whole graph however long
    /// it takes (offline rendering: every cycle complete, the same output
    /// for the same input) instead of ending after
    /// [`crate::FREEWHEEL_WAIT_NS`] with an xrun. Real-time safe.
    fn freewheel_waits_for_graph(&self) -> bool {
        false
    }
}
