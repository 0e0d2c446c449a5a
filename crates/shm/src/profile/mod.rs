//! The profile ring: one record per audio cycle, written by the driver thread,
//! readable at any moment by any process that holds the segment.
//!
//! The report "Timing measurements in JACK2" (Letz, Fober, Orlarey) records, per cycle, the driver's
//! wake-up and end dates and, per client, its signal (activation), awake and
//! finish dates; JACK2 needs a special build and writes them out only at
//! shutdown. resound always records them, into a memfd segment that the
//! server maps read-write and everyone else read-only (sealed with
//! `F_SEAL_FUTURE_WRITE`), so `resound profile`, `resound monitor` and the
//! in-process `profiler` client read it while the server runs, without any
//! work on the server's side.
//!
//! Files: [`records`] (the `#[repr(C)]` structs and the segment layout),
//! `ring` (mapping them: [`ProfileRing`]), `write` (the driver's and the
//! control thread's side), `read` (readers), `segment` ([`ProfileSegment`]).
//!
//! ```text
//!   0                    ProfileHeader (one page)
//!   cycles_at            CycleRecord[cycle_capacity]   ring, record n in slot n % cycle_capacity
//!   nodes_at             NodeRecord[node_capacity]     ring, row r in slot r % node_capacity
//!   names_at             NameRecord[name_capacity]     ring, entry n in slot n % name_capacity
//! ```
//!
//! ## Writers and readers
//!
//! * Cycle and node records: the driver thread only ([`ProfileRing::write_cycle`]),
//!   at the start of cycle k+1 for cycle k (when every client of cycle k has
//!   either finished or is late). No allocation, no lock, no syscall: plain
//!   atomic stores into preallocated memory.
//! * Name records: the server's control thread ([`ProfileRing::write_name`]),
//!   when a client opens, so a profile read later still names clients that
//!   have left.
//! * Readers: any thread of any process ([`ProfileRing::read_cycle`]). A full
//!   ring overwrites the oldest records; readers detect it (sequence numbers)
//!   and report how many records they lost.
//!
//! ## Consistency
//!
//! Each cycle record is a ring slot of the crate's seqlock
//! ([`crate::seqlock::write_numbered`] / [`crate::seqlock::read_numbered`]):
//! the writer holds `seq = 2n+1` while it stores record `n` and ends with
//! `seq = 2n+2`; a reader keeps its copy only if `seq` was `2n+2` before and
//! after it. Node rows are
//! announced before they are written (`nodes_written` moves first, then a
//! release fence, then the rows), so a reader that copied rows `[f, f+c)`
//! and then (after an acquire fence) sees `nodes_written <= f + node_capacity`
//! knows none of them was being overwritten. Name records use a seqlock like
//! cycle records. Every field is an atomic, so a torn or concurrent read is a
//! detected retry, never undefined behaviour.
//!
//! All times are CLOCK_MONOTONIC nanoseconds (absolute), durations
//! nanoseconds.

pub mod measures;
mod read;
pub mod records;
mod ring;
mod segment;
mod write;

pub use records::*;
pub use ring::ProfileRing;
pub use segment::ProfileSegment;

/// `b"RSPROF\0\0"` as a little-endian u64.
pub const PROFILE_MAGIC: u64 = u64::from_le_bytes(*b"RSPROF\0\0");
/// Layout version of this module's structs.
pub const PROFILE_VERSION: u32 = 1;
/// Bytes of the header area.
pub const PROFILE_HEADER_BYTES: usize = 4096;
/// Most node rows one cycle record can hold (a bigger graph's rows are cut, see `CYCLE_TRUNCATED`).
pub const MAX_ROWS_PER_CYCLE: u32 = 1024;

/// [`CycleRecord::flags`] bits.
pub mod cycle_flags {
    /// At least one client of this cycle had not finished when the next began.
    pub const XRUN: u32 = 1;
    /// The driver woke more than a period late before this cycle (cycles were skipped).
    pub const DRIVER_LATE: u32 = 2;
    /// Not every active node got a row (the ring's per-cycle limit).
    pub const TRUNCATED: u32 = 4;
}

/// [`NodeRecord::flags`] bits.
pub mod node_flags {
    /// The node was triggered for this cycle: `signal_ns` is valid.
    pub const SIGNALLED: u32 = 1;
    /// Its thread woke for this cycle: `awake_ns` is valid.
    pub const AWAKE: u32 = 2;
    /// It finished this cycle: `finish_ns` and `cpu_ns` are valid.
    pub const FINISHED: u32 = 4;
    /// It had not finished when the next cycle began (an xrun).
    pub const LATE: u32 = 8;
    /// Shift of the 2-bit scheduling kind (0 none, 1 SCHED_OTHER, 2 SCHED_FIFO, 3 SCHED_DEADLINE).
    pub const KIND_SHIFT: u32 = 8;
}

/// What the driver writes per cycle (a plain copy of [`CycleRecord`]'s fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CycleData {
    /// Cycle number.
    pub cycle: u64,
    /// Nominal start (ns, absolute).
    pub start_ns: u64,
    /// Driver wake-up (ns, absolute).
    pub awake_ns: u64,
    /// Driver end (ns, absolute).
    pub end_ns: u64,
    /// Driver CPU (ns).
    pub cpu_ns: u64,
    /// Nominal period (ns).
    pub period_ns: u64,
    /// Frames.
    pub frames: u32,
    /// [`cycle_flags`].
    pub flags: u32,
    /// Driver budget (ns).
    pub budget_ns: u64,
    /// Driver prediction (ns).
    pub predicted_ns: u64,
}

/// One node row (a plain copy of [`NodeRecord`]'s fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeData {
    /// Client uuid.
    pub uuid: u64,
    /// Slot.
    pub slot: u32,
    /// [`node_flags`].
    pub flags: u32,
    /// Signal (ns, absolute).
    pub signal_ns: u64,
    /// Awake (ns, absolute).
    pub awake_ns: u64,
    /// Finish (ns, absolute).
    pub finish_ns: u64,
    /// CPU (ns).
    pub cpu_ns: u64,
    /// Budget (ns).
    pub budget_ns: u64,
    /// Prediction (ns).
    pub predicted_ns: u64,
}

/// Why a record could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// Not written yet.
    NotYet,
    /// Overwritten by newer records (the ring is full), or being overwritten.
    Overwritten,
    /// The caller's row buffer is too small for this record's rows.
    RowsDontFit(u32),
}

impl From<crate::seqlock::Stale> for ReadError {
    fn from(s: crate::seqlock::Stale) -> Self {
        match s {
            crate::seqlock::Stale::NotYet => ReadError::NotYet,
            crate::seqlock::Stale::Overwritten => ReadError::Overwritten,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
