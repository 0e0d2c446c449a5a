//! The profile ring: one record per audio cycle, written by the driver thread,
//! readable at any moment by any process that holds the segment.
//!
//! Seed 003 (timing measurements in JACK2) records, per cycle, the driver's
//! wake-up and end dates and, per client, its signal (activation), awake and
//! finish dates; JACK2 needs a special build and writes them out only at
//! shutdown. resound always records them, into a memfd segment that the
//! server maps read-write and everyone else read-only (sealed with
//! `F_SEAL_FUTURE_WRITE`), so `resound profile`, `resound monitor` and the
//! in-process `profiler` client read it while the server runs, without any
//! work on the server's side.
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
//! Each cycle record is a seqlock: the writer stores `seq = 2n+1`, a release
//! fence, the fields, then `seq = 2n+2` (release). A reader copies the fields
//! between an acquire load of `seq` and an acquire fence plus a second load,
//! and keeps the copy only if both loads returned `2n+2`. Node rows are
//! announced before they are written (`nodes_written` moves first, then a
//! release fence, then the rows), so a reader that copied rows `[f, f+c)`
//! and then (after an acquire fence) sees `nodes_written <= f + node_capacity`
//! knows none of them was being overwritten. Name records use a seqlock like
//! cycle records. Every field is an atomic, so a torn or concurrent read is a
//! detected retry, never undefined behaviour.
//!
//! All times are CLOCK_MONOTONIC nanoseconds (absolute), durations
//! nanoseconds. The measures derived from them live in [`measures`].

pub mod measures;

use crate::sync::{fence_acquire, fence_release, AtomicU32, AtomicU64, Ordering};

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

/// The segment's first page. Writers: see the field docs. Readers: everybody.
#[repr(C)]
pub struct ProfileHeader {
    /// [`PROFILE_MAGIC`]. Written once at creation.
    pub magic: u64,
    /// [`PROFILE_VERSION`]. Written once.
    pub version: u32,
    /// `size_of::<ProfileHeader>()`. Written once.
    pub header_size: u32,
    /// Slots of the cycle ring. Written once.
    pub cycle_capacity: u32,
    /// Slots of the node-row ring. Written once.
    pub node_capacity: u32,
    /// Slots of the name ring. Written once.
    pub name_capacity: u32,
    /// Padding.
    pub _pad: u32,
    /// Cycle records completed since the server started; record n is in
    /// slot `n % cycle_capacity`. Writer: driver thread (release).
    pub cycles_written: AtomicU64,
    /// Node rows announced since start (moves *before* the rows are written).
    /// Writer: driver thread.
    pub nodes_written: AtomicU64,
    /// Name records completed since start. Writer: control thread.
    pub names_written: AtomicU64,
}

/// One cycle, as the driver saw it. 128 bytes. Writer: driver thread.
#[repr(C, align(64))]
pub struct CycleRecord {
    /// Seqlock word: `2n+1` while record n is written, `2n+2` once complete.
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
    /// CPU time the driver thread used in the cycle (ns).
    pub cpu_ns: AtomicU64,
    /// Nominal period of the cycle (ns).
    pub period_ns: AtomicU64,
    /// Frames of the cycle.
    pub frames: AtomicU32,
    /// [`cycle_flags`] bits.
    pub flags: AtomicU32,
    /// Number of the first node row of this cycle.
    pub node_first: AtomicU64,
    /// Node rows of this cycle.
    pub node_count: AtomicU32,
    /// Padding.
    pub _pad: AtomicU32,
    /// The driver thread's reservation budget during the cycle (ns per reservation period; 0 without one).
    pub budget_ns: AtomicU64,
    /// The driver controller's prediction (ns; 0 without one).
    pub predicted_ns: AtomicU64,
    /// Reserved for later fields.
    pub _reserved: [AtomicU64; 4],
}

/// One client in one cycle. 64 bytes. Writer: driver thread.
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
    /// Its slot.
    pub slot: AtomicU32,
    /// [`node_flags`] bits.
    pub flags: AtomicU32,
}

/// A client's name, kept after it leaves. 128 bytes. Writer: control thread.
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

/// Writer side of a record's seqlock: runs `write` between `2n+1` and
/// `2n+2` (record number `n`), with the fence that keeps the stores after the
/// odd value.
#[inline]
fn seq_write(seq: &AtomicU64, n: u64, write: impl FnOnce()) {
    seq.store(2 * n + 1, Ordering::Relaxed);
    fence_release();
    write();
    seq.store(2 * n + 2, Ordering::Release);
}

/// Reader side: runs `read` and keeps its copy only if the sequence said
/// record `n` was complete before and after (see the module docs).
#[inline]
fn seq_read<T>(seq: &AtomicU64, n: u64, read: impl FnOnce() -> T) -> Result<T, ReadError> {
    let want = 2 * n + 2;
    let s1 = seq.load(Ordering::Acquire);
    if s1 != want {
        return Err(if s1 < want {
            ReadError::NotYet
        } else {
            ReadError::Overwritten
        });
    }
    let v = read();
    fence_acquire();
    if seq.load(Ordering::Relaxed) != s1 {
        return Err(ReadError::Overwritten);
    }
    Ok(v)
}

/// Typed access to a mapped profile segment (either side).
///
/// Holds a base pointer; the owner keeps the mapping alive (see
/// `resound_shm::Segment`).
#[derive(Debug, Clone, Copy)]
pub struct ProfileRing {
    base: *const u8,
    layout: ProfileLayout,
}

// SAFETY: all access through the pointer is to atomics; the mapping outlives
// the ring by the owner's contract (`ProfileRing::from_raw`).
unsafe impl Send for ProfileRing {}
// SAFETY: as above.
unsafe impl Sync for ProfileRing {}

impl ProfileRing {
    /// Initialises the header of a fresh zeroed segment (server side).
    ///
    /// # Safety
    /// `base` must point at a writable, zeroed, 4096-aligned mapping of
    /// `layout.bytes` bytes that stays mapped as long as the returned ring
    /// (and its copies) are used, and nobody else may use it yet.
    pub unsafe fn init(base: *mut u8, layout: ProfileLayout) -> ProfileRing {
        // SAFETY: the caller guarantees a private, writable, aligned mapping;
        // ProfileHeader is valid when zeroed.
        let h = unsafe { &mut *(base as *mut ProfileHeader) };
        h.magic = PROFILE_MAGIC;
        h.version = PROFILE_VERSION;
        h.header_size = std::mem::size_of::<ProfileHeader>() as u32;
        h.cycle_capacity = layout.cycle_capacity;
        h.node_capacity = layout.node_capacity;
        h.name_capacity = layout.name_capacity;
        ProfileRing { base, layout }
    }

    /// Validates a mapped segment of `len` bytes received from a server.
    ///
    /// # Safety
    /// `base` must point at a readable, 4096-aligned mapping of `len` bytes
    /// that stays mapped as long as the returned ring (and copies) are used.
    pub unsafe fn open(base: *const u8, len: usize) -> Result<ProfileRing, String> {
        if len < PROFILE_HEADER_BYTES {
            return Err("profile segment smaller than its header".into());
        }
        // SAFETY: len ≥ one page, aligned; the header is plain integers and atomics.
        let h = unsafe { &*(base as *const ProfileHeader) };
        if h.magic != PROFILE_MAGIC
            || h.version != PROFILE_VERSION
            || h.header_size as usize != std::mem::size_of::<ProfileHeader>()
        {
            return Err(format!(
                "server's profile layout is version {} (ours {PROFILE_VERSION}); rebuild client and server together",
                h.version
            ));
        }
        let layout = ProfileLayout::new(h.cycle_capacity, h.node_capacity, h.name_capacity)?;
        if layout.bytes != len {
            return Err(format!(
                "profile segment is {len} bytes, its header says {}",
                layout.bytes
            ));
        }
        Ok(ProfileRing { base, layout })
    }

    /// The layout.
    pub fn layout(&self) -> &ProfileLayout {
        &self.layout
    }

    /// The header.
    pub fn header(&self) -> &ProfileHeader {
        // SAFETY: validated at init/open; the mapping outlives self.
        unsafe { &*(self.base as *const ProfileHeader) }
    }

    fn cycle_slot(&self, n: u64) -> &CycleRecord {
        let i = (n % self.layout.cycle_capacity as u64) as usize;
        // SAFETY: i < cycle_capacity keeps the record inside the cycle ring;
        // all fields are atomics, valid for any bit pattern.
        unsafe { &*(self.base.add(self.layout.cycles_at) as *const CycleRecord).add(i) }
    }

    fn node_slot(&self, r: u64) -> &NodeRecord {
        let i = (r % self.layout.node_capacity as u64) as usize;
        // SAFETY: i < node_capacity; atomics only.
        unsafe { &*(self.base.add(self.layout.nodes_at) as *const NodeRecord).add(i) }
    }

    fn name_slot(&self, n: u64) -> &NameRecord {
        let i = (n % self.layout.name_capacity as u64) as usize;
        // SAFETY: i < name_capacity; atomics only.
        unsafe { &*(self.base.add(self.layout.names_at) as *const NameRecord).add(i) }
    }

    /// Cycle records completed so far.
    pub fn cycles_written(&self) -> u64 {
        self.header().cycles_written.load(Ordering::Acquire)
    }

    /// Driver thread only (single writer): appends one cycle and its node
    /// rows. Real-time safe: atomic stores into preallocated memory.
    pub fn write_cycle(&self, c: &CycleData, rows: impl ExactSizeIterator<Item = NodeData>) {
        let h = self.header();
        let n = h.cycles_written.load(Ordering::Relaxed);
        let count = (rows.len() as u32)
            .min(MAX_ROWS_PER_CYCLE)
            .min(self.layout.node_capacity);
        let first = h.nodes_written.load(Ordering::Relaxed);
        // Announce the rows before overwriting the slots they reuse.
        h.nodes_written
            .store(first + count as u64, Ordering::Relaxed);
        fence_release();
        for (i, d) in rows.take(count as usize).enumerate() {
            let r = self.node_slot(first + i as u64);
            r.uuid.store(d.uuid, Ordering::Relaxed);
            r.signal_ns.store(d.signal_ns, Ordering::Relaxed);
            r.awake_ns.store(d.awake_ns, Ordering::Relaxed);
            r.finish_ns.store(d.finish_ns, Ordering::Relaxed);
            r.cpu_ns.store(d.cpu_ns, Ordering::Relaxed);
            r.budget_ns.store(d.budget_ns, Ordering::Relaxed);
            r.predicted_ns.store(d.predicted_ns, Ordering::Relaxed);
            r.slot.store(d.slot, Ordering::Relaxed);
            r.flags.store(d.flags, Ordering::Relaxed);
        }
        let rec = self.cycle_slot(n);
        seq_write(&rec.seq, n, || {
            rec.cycle.store(c.cycle, Ordering::Relaxed);
            rec.start_ns.store(c.start_ns, Ordering::Relaxed);
            rec.awake_ns.store(c.awake_ns, Ordering::Relaxed);
            rec.end_ns.store(c.end_ns, Ordering::Relaxed);
            rec.cpu_ns.store(c.cpu_ns, Ordering::Relaxed);
            rec.period_ns.store(c.period_ns, Ordering::Relaxed);
            rec.frames.store(c.frames, Ordering::Relaxed);
            rec.flags.store(c.flags, Ordering::Relaxed);
            rec.node_first.store(first, Ordering::Relaxed);
            rec.node_count.store(count, Ordering::Relaxed);
            rec.budget_ns.store(c.budget_ns, Ordering::Relaxed);
            rec.predicted_ns.store(c.predicted_ns, Ordering::Relaxed);
        });
        h.cycles_written.store(n + 1, Ordering::Release);
    }

    /// Reads record `n` into `rows` (no allocation: real-time safe). Returns
    /// the cycle and the number of rows copied.
    pub fn read_cycle(
        &self,
        n: u64,
        rows: &mut [NodeData],
    ) -> Result<(CycleData, usize), ReadError> {
        let rec = self.cycle_slot(n);
        let (c, first, count) = seq_read(&rec.seq, n, || {
            let c = CycleData {
                cycle: rec.cycle.load(Ordering::Relaxed),
                start_ns: rec.start_ns.load(Ordering::Relaxed),
                awake_ns: rec.awake_ns.load(Ordering::Relaxed),
                end_ns: rec.end_ns.load(Ordering::Relaxed),
                cpu_ns: rec.cpu_ns.load(Ordering::Relaxed),
                period_ns: rec.period_ns.load(Ordering::Relaxed),
                frames: rec.frames.load(Ordering::Relaxed),
                flags: rec.flags.load(Ordering::Relaxed),
                budget_ns: rec.budget_ns.load(Ordering::Relaxed),
                predicted_ns: rec.predicted_ns.load(Ordering::Relaxed),
            };
            let first = rec.node_first.load(Ordering::Relaxed);
            (c, first, rec.node_count.load(Ordering::Relaxed))
        })?;
        let count = count.min(MAX_ROWS_PER_CYCLE).min(self.layout.node_capacity);
        if count as usize > rows.len() {
            return Err(ReadError::RowsDontFit(count));
        }
        for (i, d) in rows.iter_mut().take(count as usize).enumerate() {
            let r = self.node_slot(first.wrapping_add(i as u64));
            *d = NodeData {
                uuid: r.uuid.load(Ordering::Relaxed),
                slot: r.slot.load(Ordering::Relaxed),
                flags: r.flags.load(Ordering::Relaxed),
                signal_ns: r.signal_ns.load(Ordering::Relaxed),
                awake_ns: r.awake_ns.load(Ordering::Relaxed),
                finish_ns: r.finish_ns.load(Ordering::Relaxed),
                cpu_ns: r.cpu_ns.load(Ordering::Relaxed),
                budget_ns: r.budget_ns.load(Ordering::Relaxed),
                predicted_ns: r.predicted_ns.load(Ordering::Relaxed),
            };
        }
        fence_acquire();
        let announced = self.header().nodes_written.load(Ordering::Relaxed);
        if announced > first.saturating_add(self.layout.node_capacity as u64) {
            return Err(ReadError::Overwritten);
        }
        Ok((c, count as usize))
    }

    /// Control thread only (single writer): records a client's name.
    pub fn write_name(&self, uuid: u64, slot: u32, pid: u32, name: &str) {
        let h = self.header();
        let n = h.names_written.load(Ordering::Relaxed);
        let rec = self.name_slot(n);
        seq_write(&rec.seq, n, || {
            rec.uuid.store(uuid, Ordering::Relaxed);
            rec.slot.store(slot, Ordering::Relaxed);
            rec.pid.store(pid, Ordering::Relaxed);
            let b = name.as_bytes();
            for (w, word) in rec.name.iter().enumerate() {
                let mut bytes = [0u8; 8];
                for (j, x) in bytes.iter_mut().enumerate() {
                    let k = w * 8 + j;
                    // The last byte stays NUL: at most 63 bytes of name.
                    if k < b.len() && k < 63 {
                        *x = b[k];
                    }
                }
                word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            }
        });
        h.names_written.store(n + 1, Ordering::Release);
    }

    /// Every name record still in the ring: (uuid, slot, pid, name), oldest first.
    /// Not real-time (allocates).
    pub fn names(&self) -> Vec<(u64, u32, u32, String)> {
        let written = self.header().names_written.load(Ordering::Acquire);
        let cap = self.layout.name_capacity as u64;
        let mut out = Vec::new();
        for n in written.saturating_sub(cap)..written {
            let rec = self.name_slot(n);
            let copy = seq_read(&rec.seq, n, || {
                let mut bytes = [0u8; 64];
                for (chunk, w) in bytes.chunks_exact_mut(8).zip(&rec.name) {
                    chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
                }
                (
                    rec.uuid.load(Ordering::Relaxed),
                    rec.slot.load(Ordering::Relaxed),
                    rec.pid.load(Ordering::Relaxed),
                    bytes,
                )
            });
            if let Ok((uuid, slot, pid, bytes)) = copy {
                out.push((uuid, slot, pid, crate::get_name(&bytes)));
            }
        }
        out
    }

    /// Reads up to the newest `max` records starting at record `from`
    /// (clamped to what the ring still holds). Returns the cycles with their
    /// rows, and how many records from `from` on were lost (overwritten
    /// before they could be read). Not real-time (allocates).
    pub fn read_from(&self, from: u64, max: usize) -> (Vec<(CycleData, Vec<NodeData>)>, u64) {
        let written = self.cycles_written();
        let cap = self.layout.cycle_capacity as u64;
        let oldest = written.saturating_sub(cap);
        let mut start = from.max(oldest).max(written.saturating_sub(max as u64));
        let mut lost = start.saturating_sub(from).min(oldest.saturating_sub(from));
        let mut out = Vec::with_capacity((written - start.min(written)) as usize);
        let mut rows = vec![NodeData::default(); MAX_ROWS_PER_CYCLE as usize];
        while start < written {
            match self.read_cycle(start, &mut rows) {
                Ok((c, k)) => out.push((c, rows[..k].to_vec())),
                Err(ReadError::NotYet) => break,
                Err(_) => lost += 1,
            }
            start += 1;
        }
        (out, lost)
    }
}

/// A profile ring together with the memfd mapping it lives in.
pub struct ProfileSegment {
    seg: crate::Segment,
    ring: ProfileRing,
}

impl ProfileSegment {
    /// Server side: creates, initialises and seals (read-only for everyone
    /// else, fixed size) a profile segment.
    pub fn create(layout: ProfileLayout) -> std::io::Result<ProfileSegment> {
        let seg = crate::Segment::create("resound-profile", layout.bytes)?;
        // Touch every page now, so the driver never takes a page fault (a
        // trip into the kernel to allocate memory) on its first pass through
        // the ring.
        for off in (0..layout.bytes).step_by(4096) {
            // SAFETY: off < layout.bytes, inside our private writable mapping,
            // which nobody else has yet.
            unsafe { std::ptr::write_volatile(seg.base().add(off), 0u8) };
        }
        // SAFETY: a fresh zeroed, page-aligned private mapping of layout.bytes;
        // the ring is stored beside the segment, which outlives it.
        let ring = unsafe { ProfileRing::init(seg.base(), layout) };
        seg.seal(true)?;
        Ok(ProfileSegment { seg, ring })
    }

    /// Reader side: maps a profile segment received from the server (read-only).
    pub fn open(fd: rustix::fd::OwnedFd) -> std::io::Result<ProfileSegment> {
        let len = rustix::fs::fstat(&fd)?.st_size as usize;
        let seg = crate::Segment::map(fd, len, false)?;
        // SAFETY: a read-only mapping of exactly `len` bytes, page-aligned,
        // stored beside the ring, so it outlives every use through `ring()`.
        let ring = unsafe { ProfileRing::open(seg.base(), len) }
            .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
        Ok(ProfileSegment { seg, ring })
    }

    /// The ring (valid as long as this segment lives).
    pub fn ring(&self) -> &ProfileRing {
        &self.ring
    }

    /// The memfd (server: to pass to readers).
    pub fn fd(&self) -> rustix::fd::BorrowedFd<'_> {
        self.seg.fd()
    }

    /// Locks the ring's pages in memory (see [`crate::Segment::lock`]).
    pub fn lock(&self) -> std::io::Result<()> {
        self.seg.lock()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[repr(C, align(4096))]
    struct Page([u8; 4096]);

    struct Mem(Vec<Page>);

    fn ring(cycles: u32, nodes: u32) -> (Mem, ProfileRing) {
        let l = ProfileLayout::new(cycles, nodes, 4).unwrap();
        let mut m = Mem((0..l.bytes / 4096).map(|_| Page([0; 4096])).collect());
        // SAFETY: zeroed, page-aligned, private, and it lives as long as the ring in each test.
        let r = unsafe { ProfileRing::init(m.0.as_mut_ptr() as *mut u8, l) };
        (m, r)
    }

    fn row(uuid: u64, t: u64) -> NodeData {
        NodeData {
            uuid,
            slot: uuid as u32,
            flags: node_flags::FINISHED,
            signal_ns: t,
            awake_ns: t + 1,
            finish_ns: t + 2,
            cpu_ns: 3,
            budget_ns: 4,
            predicted_ns: 5,
        }
    }

    #[test]
    fn records_round_trip_and_old_ones_are_reported_overwritten() {
        let (_m, r) = ring(8, 16);
        for k in 0..20u64 {
            let rows = [row(1, k * 10), row(2, k * 10 + 5)];
            r.write_cycle(
                &CycleData {
                    cycle: k + 1,
                    start_ns: k * 100,
                    ..Default::default()
                },
                rows.into_iter(),
            );
        }
        assert_eq!(r.cycles_written(), 20);
        let mut buf = [NodeData::default(); 4];
        let (c, n) = r.read_cycle(19, &mut buf).unwrap();
        assert_eq!((c.cycle, n), (20, 2));
        assert_eq!(buf[1], row(2, 195));
        assert_eq!(r.read_cycle(3, &mut buf), Err(ReadError::Overwritten));
        assert_eq!(r.read_cycle(20, &mut buf), Err(ReadError::NotYet));
        let (got, lost) = r.read_from(0, usize::MAX);
        assert_eq!(got.len(), 8, "the ring holds 8 cycles");
        assert_eq!(lost, 12, "12 older cycles were overwritten");
        assert_eq!(got[0].0.cycle, 13);
        assert_eq!(got[7].1, vec![row(1, 190), row(2, 195)]);
        let (got, lost) = r.read_from(18, 100);
        assert_eq!((got.len(), lost), (2, 0));
        let (got, _) = r.read_from(0, 3);
        assert_eq!(got.first().map(|c| c.0.cycle), Some(18));
    }

    #[test]
    fn rows_overwritten_before_their_cycle_are_detected() {
        // 8 cycle slots but only 4 row slots: cycle records outlive their rows.
        let (_m, r) = ring(8, 4);
        for k in 0..4u64 {
            r.write_cycle(
                &CycleData {
                    cycle: k + 1,
                    ..Default::default()
                },
                [row(1, k), row(2, k)].into_iter(),
            );
        }
        let mut buf = [NodeData::default(); 4];
        assert!(r.read_cycle(3, &mut buf).is_ok());
        assert!(r.read_cycle(2, &mut buf).is_ok());
        assert_eq!(r.read_cycle(1, &mut buf), Err(ReadError::Overwritten));
        assert_eq!(
            r.read_cycle(3, &mut buf[..1]),
            Err(ReadError::RowsDontFit(2))
        );
    }

    #[test]
    fn names_survive_and_are_truncated_to_63_bytes() {
        let (_m, r) = ring(4, 4);
        r.write_name(7, 3, 99, "synth");
        let long = "x".repeat(80);
        r.write_name(8, 4, 99, &long);
        let n = r.names();
        assert_eq!(n[0], (7, 3, 99, "synth".to_string()));
        assert_eq!(n[1].3.len(), 63);
        for i in 0..10 {
            r.write_name(100 + i, 1, 1, "later");
        }
        assert_eq!(r.names().len(), 4, "the name ring keeps its capacity");
    }

    #[test]
    fn concurrent_reader_never_sees_a_torn_record() {
        let (_m, r) = ring(4, 8);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for k in 0..200_000u64 {
                    // Every field of cycle k and of its rows derives from k.
                    r.write_cycle(
                        &CycleData {
                            cycle: k,
                            start_ns: k,
                            awake_ns: k,
                            end_ns: k,
                            cpu_ns: k,
                            period_ns: k,
                            frames: k as u32,
                            flags: 0,
                            budget_ns: k,
                            predicted_ns: k,
                        },
                        [row(k, k), row(k, k)].into_iter(),
                    );
                }
                stop.store(true, Ordering::Release);
            });
            let mut buf = [NodeData::default(); 4];
            let mut ok = 0u64;
            while !stop.load(Ordering::Acquire) {
                let w = r.cycles_written();
                if w == 0 {
                    continue;
                }
                for n in w.saturating_sub(4)..w {
                    if let Ok((c, k)) = r.read_cycle(n, &mut buf) {
                        assert_eq!(c.cycle, n);
                        assert!(c.start_ns == n && c.end_ns == n && c.predicted_ns == n);
                        assert_eq!(k, 2);
                        assert_eq!(buf[0], row(n, n));
                        assert_eq!(buf[1], row(n, n));
                        ok += 1;
                    }
                }
            }
            assert!(ok > 0);
        });
    }

    #[test]
    fn sizing_by_seconds_and_cap() {
        let l = ProfileLayout::for_history(30.0, 48000, 128, 16, 64);
        assert_eq!(l.cycle_capacity, 11250);
        assert!((l.seconds(48000, 128) - 30.0).abs() < 0.01);
        let huge = ProfileLayout::for_history(1e6, 192000, 16, 64, 1024);
        assert!(huge.bytes <= MAX_PROFILE_BYTES);
        let mem = [Page([0; 4096])];
        // SAFETY: one readable, aligned page that outlives the call.
        let e = unsafe { ProfileRing::open(mem.as_ptr() as *const u8, 4096) };
        assert!(e.unwrap_err().contains("version 0"));
    }
}
