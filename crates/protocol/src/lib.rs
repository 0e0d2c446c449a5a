//! # resound-protocol
//!
//! Everything the server and its clients must agree on, and nothing else:
//!
//! * [`limits`]: JACK's name limits and resound's capacity defaults.
//! * [`paths`]: where the per-user socket directory lives.
//! * [`wire`]: the messages on each client's Unix socket, their framing, and
//!   memfd passing (SCM_RIGHTS).
//! * [`shm`]: the `#[repr(C)]` layouts of the two shared-memory segments
//!   (the server-written *control* segment and the shared *activation +
//!   buffers* segment), and a bounds-checked view over them.
//! * [`sync`]: the lock-free primitives both sides run on the real-time path:
//!   the two-state graph switch word and the cycle-tagged activation counter,
//!   plus cross-process futex wait/wake.
//! * [`profile`]: the per-cycle timing ring the driver writes and profilers read.
//! * [`time`]: CLOCK_MONOTONIC and CLOCK_THREAD_CPUTIME_ID in nanoseconds.
//! * [`midi`]: the MIDI event buffer layout inside a MIDI port's buffer.
//! * [`transport`]: transport state and position, and the sequence-counted
//!   cells that carry them between the driver and the clients.
//!
//! Threads: functions in [`sync`], [`time`], [`midi`], [`transport`] and the accessors of
//! [`shm::View`] are real-time safe (no allocation, no lock, only the futex
//! and clock syscalls). [`wire`] and segment creation/mapping are for
//! non-real-time threads only.

pub mod cycle;
pub mod limits;
pub mod midi;
pub mod paths;
pub mod profile;
pub mod rt;
pub mod shm;
pub mod sync;
pub mod time;
pub mod transport;
pub mod wire;
