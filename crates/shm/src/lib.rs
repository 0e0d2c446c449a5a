//! # resound-shm
//!
//! The shared-memory ABI between the server and its clients, and the
//! real-time code both sides run on it. Nothing here talks over a socket
//! (that is `resound-protocol`) or sets a thread's scheduling (that is
//! `resound-sched`).
//!
//! * [`layout`] (re-exported at the crate root): the `#[repr(C)]` layouts of
//!   the two shared-memory segments (the server-written *control* segment and
//!   the shared *activation + buffers* segment), memfd segments, and the
//!   bounds-checked [`View`] over them.
//! * [`sync`]: the two-state graph switch word, the cycle-tagged activation
//!   counter, cross-process futex wait/wake.
//! * [`cycle`]: the per-cycle operations both sides run: signal downstream,
//!   resolve and mix input buffers, merge MIDI inputs.
//! * [`profile`]: the per-cycle timing ring the driver writes and profilers read.
//! * [`time`]: CLOCK_MONOTONIC and CLOCK_THREAD_CPUTIME_ID in nanoseconds,
//!   frames ↔ nanoseconds.
//! * [`midi`]: the MIDI event buffer layout inside a MIDI port's buffer.
//! * [`transport`]: transport state and position, and the sequence-counted
//!   cells that carry them between the driver and the clients.
//! * [`limits`]: JACK's name limits and resound's capacity defaults.
//!
//! Threads: functions in [`sync`], [`cycle`], [`time`], [`midi`],
//! [`transport`] and the accessors of [`View`] are real-time safe (no
//! allocation, no lock, only the futex and clock syscalls). Segment creation
//! and mapping are for non-real-time threads only.

pub mod cycle;
pub mod layout;
pub mod limits;
pub mod midi;
pub mod profile;
pub mod sync;
pub mod time;
pub mod transport;

pub use layout::*;
