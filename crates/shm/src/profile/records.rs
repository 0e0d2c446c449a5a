//! The `#[repr(C)]` records of the profile segment and where they lie
//! ([`ProfileLayout`]). Pure layout: no thread runs code here beyond the
//! server's control thread sizing a new segment.
//!
//! The segment is sealed against writable mappings once the server created
//! it: only the server writes here, so readers need no sanitising beyond the
//! bounds they apply anyway (a cycle's row count is clamped to the ring).

use super::PROFILE_HEADER_BYTES;
use crate::sync::{AtomicU32, AtomicU64};

/// The segment's first page. Writers: see the field docs (*once*: by the
/// control thread at creation, before anyone else maps it). Readers: every
/// profile reader, to find the newest records.
#[repr(C)]
pub struct ProfileHeader {
    /// [`super::PROFILE_MAGIC`]. Once.
    pub magic: u64,
    /// [`super::PROFILE_VERSION`]. Once.
    pub version: u32,
    /// `size_of::<ProfileHeader>()` in bytes. Once.
    pub header_size: u32,
    /// Slots of the cycle ring. Once.
    pub cycle_capacity: u32,
    /// Slots of the node-row ring. Once.
    pub node_capacity: u32,
    /// Slots of the name ring. Once.
    pub name_capacity: u32,
    /// Padding.
    pub _pad: u32,
    /// Cycle records completed since the server started; record n is in
    /// slot `n % cycle_capacity`. Writer: driver thread (release, after
    /// the record's closing sequence store). Readers (acquire): the records
    /// below this count are complete unless overwritten since.
    pub cycles_written: AtomicU64,
    /// Node rows announced since start. Writer: driver thread, *before* it
    /// writes the rows (then a release fence), so a reader that copied rows
    /// `[f, f + c)` and then (after an acquire fence) finds this count
    /// `<= f + node_capacity` knows none of them was being overwritten.
    pub nodes_written: AtomicU64,
    /// Name records completed since start. Writer: control thread (release,
    /// after the record). Readers: [`super::ProfileRing::names`].
    pub names_written: AtomicU64,
}

/// One cycle, as the driver saw it. 128 bytes. Writer: the driver thread,
/// at the start of the next cycle, every field under `seq`
/// ([`crate::seqlock::write_numbered`]). Readers: any profile reader
/// ([`super::ProfileRing::read_cycle`], [`crate::seqlock::read_numbered`]).
#[repr(C, align(64))]
pub struct CycleRecord {
    /// Sequence word: `2n+1` while record n is written, `2n+2` once complete.
    pub seq: AtomicU64,
    /// Cycle number (first cycle is 1).
    pub cycle: AtomicU64,
    /// Nominal start: the cycle's absolute CLOCK_MONOTONIC deadline (ns).
    pub start_ns: AtomicU64,
    /// When the driver thread woke for it (ns, absolute).
    pub awake_ns: AtomicU64,
    /// When the driver thread finished its work of the cycle (ns, absolute):
    /// in sync mode after the graph ended and playback was written, in async
    /// mode after writing last cycle's output and triggering the graph.
    pub end_ns: AtomicU64,
    /// CPU time the driver thread used in the cycle (ns, CLOCK_THREAD_CPUTIME_ID delta).
    pub cpu_ns: AtomicU64,
    /// Nominal period of the cycle (ns).
    pub period_ns: AtomicU64,
    /// Frames of the cycle.
    pub frames: AtomicU32,
    /// [`super::cycle_flags`] bits.
    pub flags: AtomicU32,
    /// Number of the first node row of this cycle (row r is in node slot
    /// `r % node_capacity`).
    pub node_first: AtomicU64,
    /// Node rows of this cycle (readers clamp it to
    /// [`super::MAX_ROWS_PER_CYCLE`] and the node capacity).
    pub node_count: AtomicU32,
    /// Padding.
    pub _pad: AtomicU32,
    /// The driver thread's reservation budget during the cycle (ns per reservation period; 0 without one).
    pub budget_ns: AtomicU64,
    /// The driver controller's prediction (ns; 0 without one).
    pub predicted_ns: AtomicU64,
    /// Reserved for later fields (zero).
    pub _reserved: [AtomicU64; 4],
}

/// One client in one cycle. 64 bytes. Writer: the driver thread, after
/// announcing it in [`ProfileHeader::nodes_written`] and before the cycle
/// record that points at it. Readers: with their cycle record
/// ([`super::ProfileRing::read_cycle`]), checked against `nodes_written`.
/// The times are copies of the client's activation record, which the
/// client could scribble on: numbers to display, never control input.
#[repr(C, align(64))]
pub struct NodeRecord {
    /// The client's uuid (names: the name ring, or the graph).
    pub uuid: AtomicU64,
    /// When it was triggered (ns, absolute; valid with `SIGNALLED`).
    pub signal_ns: AtomicU64,
    /// When its thread woke (ns, absolute; valid with `AWAKE`).
    pub awake_ns: AtomicU64,
    /// When its process callback returned (ns, absolute; valid with `FINISHED`).
    pub finish_ns: AtomicU64,
    /// CPU time its thread used, wake to sleep (ns; valid with `FINISHED`).
    pub cpu_ns: AtomicU64,
    /// Its reservation budget (ns per reservation period; 0 without one).
    pub budget_ns: AtomicU64,
    /// Its controller's prediction (ns; 0 without one).
    pub predicted_ns: AtomicU64,
    /// Its node slot.
    pub slot: AtomicU32,
    /// [`super::node_flags`] bits.
    pub flags: AtomicU32,
}

/// A client's name, kept after it leaves. 128 bytes. Writer: the server's
/// control thread when a client opens, every field under `seq`
/// ([`crate::seqlock::write_numbered`]). Readers:
/// [`super::ProfileRing::names`].
#[repr(C, align(64))]
pub struct NameRecord {
    /// Seqlock word, as [`CycleRecord::seq`].
    pub seq: AtomicU64,
    /// Client uuid.
    pub uuid: AtomicU64,
    /// Slot it had.
    pub slot: AtomicU32,
    /// Its process id.
    pub pid: AtomicU32,
    /// NUL-padded UTF-8 name, 8 bytes per word (little-endian).
    pub name: [AtomicU64; 8],
    /// Padding.
    pub _pad: [AtomicU64; 3],
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<ProfileHeader>() <= PROFILE_HEADER_BYTES);
    assert!(std::mem::size_of::<CycleRecord>() == 128);
    assert!(std::mem::size_of::<NodeRecord>() == 64);
    assert!(std::mem::size_of::<NameRecord>() == 128);
};

/// Byte offsets of the three rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileLayout {
    /// Cycle ring slots.
    pub cycle_capacity: u32,
    /// Node ring slots.
    pub node_capacity: u32,
    /// Name ring slots.
    pub name_capacity: u32,
    /// Offset of the cycle ring.
    pub cycles_at: usize,
    /// Offset of the node ring.
    pub nodes_at: usize,
    /// Offset of the name ring.
    pub names_at: usize,
    /// Total bytes.
    pub bytes: usize,
}

/// Largest profile segment the server creates (bytes).
pub const MAX_PROFILE_BYTES: usize = 256 << 20;

impl ProfileLayout {
    /// Layout for the given capacities (each at least 1).
    pub fn new(cycles: u32, nodes: u32, names: u32) -> Result<Self, String> {
        if cycles == 0 || nodes == 0 || names == 0 {
            return Err("profile ring capacities must be at least 1".into());
        }
        let cycles_at = PROFILE_HEADER_BYTES;
        let nodes_at = cycles_at + cycles as usize * std::mem::size_of::<CycleRecord>();
        let names_at = nodes_at + nodes as usize * std::mem::size_of::<NodeRecord>();
        let bytes =
            (names_at + names as usize * std::mem::size_of::<NameRecord>()).div_ceil(4096) * 4096;
        if bytes > MAX_PROFILE_BYTES {
            return Err(format!(
                "a profile ring of {cycles} cycles and {nodes} rows needs {} MiB (limit {} MiB)",
                bytes >> 20,
                MAX_PROFILE_BYTES >> 20
            ));
        }
        Ok(ProfileLayout {
            cycle_capacity: cycles,
            node_capacity: nodes,
            name_capacity: names,
            cycles_at,
            nodes_at,
            names_at,
            bytes,
        })
    }

    /// Sizing by seconds of history: `seconds` of cycles of `frames` at
    /// `rate`, with room for `avg_nodes` rows per cycle, and names for
    /// `4 * max_clients` clients. The segment is capped at
    /// [`MAX_PROFILE_BYTES`]: the history is shortened to fit.
    pub fn for_history(
        seconds: f64,
        rate: u32,
        frames: u32,
        avg_nodes: u32,
        max_clients: u32,
    ) -> Self {
        let per_cycle = std::mem::size_of::<CycleRecord>()
            + avg_nodes.max(1) as usize * std::mem::size_of::<NodeRecord>();
        let names = (4 * max_clients).max(16);
        let room = MAX_PROFILE_BYTES
            - PROFILE_HEADER_BYTES
            - names as usize * std::mem::size_of::<NameRecord>()
            - 4096;
        let wanted = (seconds.max(0.0) * rate as f64 / frames.max(1) as f64).ceil() as usize;
        let cycles = wanted.clamp(16, room / per_cycle) as u32;
        Self::new(cycles, cycles.saturating_mul(avg_nodes.max(1)), names)
            .expect("sized within the limit")
    }

    /// Seconds of history the cycle ring holds at `frames`/`rate`.
    pub fn seconds(&self, rate: u32, frames: u32) -> f64 {
        self.cycle_capacity as f64 * frames as f64 / rate.max(1) as f64
    }
}
