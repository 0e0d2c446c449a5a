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
    /// Real-time safe.
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

/// Per-node activation record in the shared segment, one cache-line pair
/// each, slot 0 the driver's. Every field may be scribbled on by any client;
/// nobody follows a value from here as an index, and the driver sanitises
/// what it reads (see each field).
///
/// Order within one cycle `k` of a node:
///
/// ```text
///   driver (cycle start)   status = Waiting; counter = (k, init_count)
///   last upstream node     counter → (k, 0); cycle = k; signal_ns; status = Triggered;
///                          trigger += 1 (release) and futex wake
///   the node's thread      (wakes on trigger, acquire) awake_ns; status = Running;
///                          … process …; finish_ns; finished_cycle = k (release);
///                          status = Finished (release); signals downstream; cpu = (k, ns)
///   driver (cycle k + 1)   reads finished_cycle, status, finish_ns, signal_ns,
///                          awake_ns, cpu for cycle k (profile, reservations, xruns)
/// ```
#[repr(C, align(128))]
pub struct ActivationRecord {
    /// Cycle-tagged activation counter: high 32 bits the cycle, low 32 bits
    /// the upstream nodes still to finish ([`crate::sync::activation`]).
    /// Writers: the driver (reset at cycle start, release), each upstream
    /// node (tag-checked CAS decrement). Reader: the decrementers. A
    /// scribbled value can only make a decrement a no-op (wrong tag) or
    /// trigger the node early or never; the driver then sees it late.
    pub counter: AtomicU64,
    /// Futex word the node's thread sleeps on; whoever triggers the node
    /// bumps it (release) after the stores of `cycle`, `signal_ns` and
    /// `status`, then wakes it. Reader: the node's thread (acquire). Only its
    /// changes matter, not its value.
    pub trigger: AtomicU32,
    /// [`NodeStatus`] as u32. Writers: the driver (Waiting at cycle start,
    /// Idle when the client leaves), the triggerer (Triggered), the node
    /// (Running on wake-up, Finished after `finished_cycle`). Reader: the
    /// driver, which decodes it with [`NodeStatus::from_raw`] and reports a
    /// value outside the enum as a corrupt record instead of using it.
    pub status: AtomicU32,
    /// Cycle the node was last triggered for. Writer: the triggerer, before
    /// bumping `trigger`. Readers: the node's thread after waking (the cycle
    /// to process), the driver (compared with its own cycle number only:
    /// "was it triggered for k?").
    pub cycle: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node was triggered. Writer: the
    /// triggerer, before bumping `trigger`. Reader: the driver, copied into
    /// the profile only when `cycle` says it belongs to the cycle profiled
    /// (a number, never used for control).
    pub signal_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node's thread woke for `cycle`.
    /// Writer: the node, first thing after waking. Reader: the driver, as
    /// `signal_ns` (profile only).
    pub awake_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which its process callback returned. Writer: the
    /// node, before `finished_cycle`. Reader: the driver, only when
    /// `finished_cycle` is the cycle it checks (profile, end of graph time).
    pub finish_ns: AtomicU64,
    /// CPU time its thread used in one cycle, from wake-up to going back to
    /// sleep (CLOCK_THREAD_CPUTIME_ID delta), *tagged with that cycle*:
    /// `(cycle as u32) << 32 | min(ns, u32::MAX)`. One atomic store, so a
    /// reader never pairs one cycle's tag with another's time. Writer: the
    /// node, as its last store of the cycle, *after* `finished_cycle` and
    /// signalling downstream (so the figure includes that work): a reader
    /// that sees `finished_cycle == k` may still find the tag of `k - 1`
    /// here, and must then treat the CPU time of `k` as not yet known.
    /// Readers: the driver (reservation controller, profile) and status
    /// replies; a client can only misreport its own CPU time, at most
    /// u32::MAX ns. Use [`ActivationRecord::store_cpu`] /
    /// [`ActivationRecord::cpu_of`].
    pub cpu: AtomicU64,
    /// Last cycle the node completed. Writer: the node (release, after
    /// `finish_ns`), the server (0 when a client takes the slot). Reader: the
    /// driver (acquire), compared with the cycle it checks: anything else
    /// means "late".
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
/// segment. Writers: the client (any of its threads; real-time safe: plain
/// atomics and bounded seqlock writes), and the server, which resets it when
/// a client takes the slot (except the two request words, see
/// [`Mailbox::reset`]). Reader: the driver, once per cycle start, which
/// sanitises everything and follows no index from here (see each field).
#[repr(C, align(64))]
pub struct Mailbox {
    /// Transport command: `(sequence << 8) | command`
    /// ([`crate::transport::command`]); a new sequence is a new command.
    /// Writer: the client (CAS, advancing the sequence from the current
    /// value). Reader: the driver (acquire), which acts only when the word
    /// changed since it last looked and the low byte is START or STOP; any
    /// other value is ignored.
    pub transport_cmd: AtomicU64,
    /// Relocation request counter: a new value means `locate_pos` holds a
    /// new request. Writer: the client, incremented (acq-rel) *after*
    /// `locate_pos` was written. Reader: the driver, which then reads
    /// `locate_pos`; a changed counter with a busy cell is retried next cycle.
    pub locate_req: AtomicU64,
    /// Requested position (frame, and BBT/timecode fields if their valid
    /// bits are set). Writer: the client (shared-writer seqlock, bounded).
    /// Reader: the driver (bounded read), which keeps only the requestable
    /// valid bits and zeroes non-finite numbers
    /// ([`crate::transport::Position::sanitised`]).
    pub locate_pos: PositionCell,
    /// The transport `sync_gen` this slow-sync client is ready to roll for.
    /// Writer: the client (release), after its sync callback returned true.
    /// Reader: the driver (acquire), compared for equality with its own
    /// `sync_gen` only.
    pub sync_ready: AtomicU64,
    /// Cycle in which the timebase master wrote `timebase_pos`. Writer: the
    /// master client (release), *after* `timebase_pos`. Reader: the driver
    /// (acquire), which uses `timebase_pos` only when this is the previous
    /// cycle and the writer is the current master.
    pub timebase_cycle: AtomicU64,
    /// The timebase master's extended position for the cycle after
    /// `timebase_cycle`. Writer: the master client (shared-writer seqlock,
    /// bounded). Reader: the driver (bounded read), which keeps only the
    /// extended valid bits, zeroes non-finite numbers and keeps its own
    /// frame, usecs and rate ([`crate::transport::Position::take_extended`]).
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
        self.locate_pos.clear();
        self.timebase_pos.clear();
    }
}
