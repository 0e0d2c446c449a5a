//! # resound-shm
//!
//! The shared-memory ABI between the server and its clients, and the
//! real-time code both sides run on it. Nothing here talks over a socket
//! (that is `resound-protocol`) or sets a thread's scheduling (that is
//! `resound-sched`).
//!
//! The shared-memory ABI, re-exported at the crate root (`resound_shm::X`):
//!
//! * [`layout`]: where everything lies in the two segments (the
//!   server-written *control* segment and the shared *activation + buffers*
//!   segment), computed from four capacities.
//! * [`segment`]: memfd segments (create, map, seal, mlock).
//! * [`header`]: the control header and the timer of the current cycle.
//! * [`table`]: the graph tables and their bounds-checked reader.
//! * [`record`]: per-node activation records and client mailboxes.
//! * [`view`]: the bounds-checked [`View`] over both mapped segments.
//!
//! The runtime:
//!
//! * [`seqlock`]: the one sequence lock every multi-word shared record uses.
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
//! Threads: functions in [`seqlock`], [`sync`], [`cycle`], [`time`], [`midi`],
//! [`transport`] and the accessors of [`View`] are real-time safe (no
//! allocation, no lock, only the futex and clock syscalls). Segment creation
//! and mapping are for non-real-time threads only.

pub mod cycle;
#[doc(hidden)]
pub mod fixture;
pub mod header;
pub mod layout;
pub mod limits;
pub mod midi;
pub mod profile;
pub mod record;
pub mod segment;
pub mod seqlock;
pub mod sync;
pub mod table;
pub mod time;
pub mod transport;
pub mod view;

pub use header::*;
pub use layout::*;
pub use record::*;
pub use segment::*;
pub use table::*;
pub use view::*;
