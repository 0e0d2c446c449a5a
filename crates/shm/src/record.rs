//! The per-node records of the shared segment, which every client maps
//! read-write: [`ActivationRecord`] (one per node slot, the driver's slot 0
//! included) and [`Mailbox`] (a client's requests to the driver). Any
//! client may scribble on any of them, so every reader sanitises what it
//! reads and follows no index from here. Written and read by real-time
//! threads (driver and client process threads).

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::transport::PositionCell;

/// Status of a node's activation record (`ActivationRecord::status`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Not part of the running graph.
    Idle = 0,
    /// Armed by the driver for this cycle, waiting for its inputs.
    Waiting = 1,
    /// Its counter reached zero; its thread has been woken.
    Triggered = 2,
    /// Its thread is running the process callback.
    Running = 3,
    /// It finished this cycle and signalled its outputs.
    Finished = 4,
}

impl NodeStatus {
    /// Decodes a raw value a client may have scribbled on.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Idle,
            1 => Self::Waiting,
            2 => Self::Triggered,
            3 => Self::Running,
            4 => Self::Finished,
            _ => return None,
        })
    }
}

/// Per-node activation record in the shared segment, one cache-line pair each.
/// Every field may be scribbled on by any client; readers sanitise.
#[repr(C, align(128))]
pub struct ActivationRecord {
    /// Cycle-tagged activation counter ([`crate::sync::activation`]).
    /// Writers: driver (reset), upstream nodes (decrement).
    pub counter: AtomicU64,
    /// Futex word the node's thread sleeps on; bumped by whoever triggers it.
    pub trigger: AtomicU32,
    /// [`NodeStatus`] as u32. Writers: driver (Waiting), triggerer (Triggered), the node (Running, Finished).
    pub status: AtomicU32,
    /// Cycle the node was last triggered for. Writer: triggerer, before bumping `trigger`.
    pub cycle: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node was triggered. Writer: triggerer.
    pub signal_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node's thread woke for `cycle`. Writer: the node.
    pub awake_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which its process callback returned. Writer: the node.
    pub finish_ns: AtomicU64,
    /// CPU time its thread used in one cycle, from wake-up to going back to
    /// sleep (CLOCK_THREAD_CPUTIME_ID delta), *tagged with that cycle*:
    /// `(cycle as u32) << 32 | min(ns, u32::MAX)`. One atomic store, so a
    /// reader never pairs one cycle's tag with another's time. Writer: the
    /// node, as its last store of the cycle, *after* `finished_cycle` and
    /// signalling downstream (so the figure includes that work): a reader
    /// that sees `finished_cycle == k` may still find the tag of `k - 1`
    /// here, and must then treat the CPU time of `k` as not yet known.
    /// Use [`ActivationRecord::store_cpu`] / [`ActivationRecord::cpu_of`].
    pub cpu: AtomicU64,
    /// Last cycle the node completed. Writer: the node.
    pub finished_cycle: AtomicU64,
}

impl ActivationRecord {
    /// Writer side: records `cpu_ns` as the CPU time used in `cycle`
    /// (saturated at u32::MAX ns, 4.3 s). Real-time safe.
    pub fn store_cpu(&self, cycle: u64, cpu_ns: u64) {
        let packed = ((cycle as u32 as u64) << 32) | cpu_ns.min(u32::MAX as u64);
        self.cpu.store(packed, Ordering::Release);
    }

    /// CPU time (ns) the node used in `cycle`, or None if the value stored
    /// belongs to another cycle (not stored yet, or stale). Real-time safe.
    pub fn cpu_of(&self, cycle: u64) -> Option<u64> {
        let (tag, ns) = self.last_cpu();
        (tag == cycle as u32).then_some(ns)
    }

    /// The last CPU time stored, whatever its cycle: (cycle tag, ns). For
    /// displays that only want "the latest figure". Real-time safe.
    pub fn last_cpu(&self) -> (u32, u64) {
        let v = self.cpu.load(Ordering::Acquire);
        ((v >> 32) as u32, v & u32::MAX as u64)
    }
}

/// A client's requests to the driver, one per node slot in the shared
/// segment. Writer: the client (any of its threads, real-time safe: plain
/// atomics). Reader: the driver, which sanitises everything and follows no
/// index from here. Reset by the server when a client takes the slot
/// (except the two request counters, see [`Mailbox::reset`]).
#[repr(C, align(64))]
pub struct Mailbox {
    /// Transport command: `(sequence << 8) | command`
    /// ([`crate::transport::command`]); a new sequence is a new command.
    pub transport_cmd: AtomicU64,
    /// Relocation request counter: a new value means `locate_pos` holds a new request.
    pub locate_req: AtomicU64,
    /// Requested position (frame, and BBT/timecode fields if their valid bits are set).
    pub locate_pos: PositionCell,
    /// The transport `sync_gen` this slow-sync client is ready to roll for.
    pub sync_ready: AtomicU64,
    /// Cycle in which the timebase master wrote `timebase_pos`.
    pub timebase_cycle: AtomicU64,
    /// The timebase master's extended position for the cycle after `timebase_cycle`.
    pub timebase_pos: PositionCell,
}

impl Mailbox {
    /// Back to the state of a fresh slot (server, when a client opens).
    ///
    /// `transport_cmd` and `locate_req` are left alone: the driver detects a
    /// request by the word *changing* from the value it last saw, and clients
    /// always advance the word from its current value. Zeroing them could
    /// lose a request: if the driver never observed the zero, the new
    /// client's first word could equal the previous occupant's last one.
    pub fn reset(&self) {
        self.sync_ready.store(0, Ordering::Relaxed);
        self.timebase_cycle.store(0, Ordering::Relaxed);
        self.locate_pos.seq.store(0, Ordering::Relaxed);
        self.timebase_pos.seq.store(0, Ordering::Release);
    }
}
