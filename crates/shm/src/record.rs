//! The records of a node segment ([`crate::layout`]): [`ActivationRecord`]
//! (the owner's cycle stamps and its *done* word, the futex word its
//! downstream nodes sleep on) and [`Mailbox`] (a client's requests to the
//! driver). Only the owner writes them (a client its own; the driver
//! slot 0's); everyone else maps them read-only. The owner may still write
//! anything there, so every reader sanitises what it reads and follows no
//! index from here. Written and read by real-time threads (driver and
//! client process threads).

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::transport::PositionCell;

/// Status of a node's activation record (`ActivationRecord::status`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Not running a cycle (a fresh record).
    Idle = 0,
    /// Asleep, waiting for its inputs.
    Waiting = 1,
    /// Kept for the numbering of older layouts; nobody writes it now.
    Triggered = 2,
    /// Its thread is running the process callback.
    Running = 3,
    /// It finished its last cycle and released its downstream nodes.
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

/// A node's activation record, first thing in its node segment (slot 0:
/// the driver's). Written by the node only (a client's process thread, the
/// driver thread for slot 0); read by the nodes downstream of it (its
/// `done` word and `release_ns`) and by the driver (everything, at the
/// look-back). The owner may scribble on it: nobody follows a value from
/// here as an index, and the driver sanitises what it reads (see each
/// field); what a scribbled record can do is run its own downstream nodes
/// early, late or never, as a bad signal would.
///
/// Activation is data flow without any shared counter: a node runs cycle
/// `k` once the driver has started it (the driver's `done` word is `k`) and
/// every node upstream of it (its range in the table's `edges`) has
/// released `k` (their `done` words are `k`). It sleeps on the `done` word
/// of one upstream node that has not ([`crate::cycle::readiness`]), so each
/// release wakes exactly the nodes that read it, with one `FUTEX_WAKE`.
/// A node that fell behind (the driver started a later cycle) may still run
/// `k` when its upstream nodes released `k` and still hold it (see
/// [`crate::cycle::next_step`]).
///
/// Order within one cycle `k` of a node:
///
/// ```text
///   driver (cycle start)   run_cpu; release_ns; finished_cycle = k;
///                          done = k (release); wake
///   the node's thread      (finds every upstream done == k, acquire)
///                          cycle = k; signal_ns; awake_ns; run_cpu;
///                          status = Running;
///                          … process …; finish_ns; finished_cycle = k (release);
///                          status = Finished; release_ns; done = k (release);
///                          wake its downstream; cpu = (k, ns)
///   driver (cycle k + 1)   reads finished_cycle, status, stamps and cpu of
///                          every node for cycle k (profile, reservations,
///                          xruns), and the upstream nodes' release stamps
/// ```
#[repr(C, align(128))]
pub struct ActivationRecord {
    /// Futex word: the low 32 bits of the last cycle this node released
    /// (a client: finished and passed on; the driver: started). Writer: the
    /// owner (release, after everything it produced for that cycle), then
    /// `FUTEX_WAKE`. Readers: the downstream nodes (acquire), compared for
    /// equality with the cycle they wait for; the driver waits on the graph
    /// ends' words in sync mode.
    pub done: AtomicU32,
    /// [`NodeStatus`] as u32. Writer: the owner (Waiting before it sleeps,
    /// Running on wake-up, Finished after `finished_cycle`). Reader: the
    /// driver, which decodes it with [`NodeStatus::from_raw`] and reports a
    /// value outside the enum as a corrupt record instead of using it.
    pub status: AtomicU32,
    /// Cycle the node last woke up to run. Writer: the owner, first thing
    /// after it found its inputs ready. Reader: the driver (compared with
    /// its own cycle number only: "was it running k?").
    pub cycle: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node's inputs were all ready for
    /// `cycle` (the latest `release_ns` of its upstream nodes), as the node
    /// saw it. Writer: the owner, with `cycle`. Reader: tools showing a
    /// client's own view; the driver computes the same from the upstream
    /// records, which the node cannot misreport.
    pub signal_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which this node released its downstream nodes
    /// for `finished_cycle`. Writer: the owner, before `done`. Readers: the
    /// downstream nodes and the driver (their signal time), only when
    /// `finished_cycle` is the cycle they look at (a number, never used for
    /// control).
    pub release_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node's thread woke for `cycle`.
    /// Writer: the owner, first thing after waking. Reader: the driver
    /// (profile only).
    pub awake_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which its process callback returned. Writer: the
    /// owner, before `finished_cycle`. Reader: the driver, only when
    /// `finished_cycle` is the cycle it checks (profile, end of graph time).
    pub finish_ns: AtomicU64,
    /// CPU time its thread used for one cycle, from its previous cycle's
    /// finish to this one's (CLOCK_THREAD_CPUTIME_ID delta: the way into
    /// the sleep, the wake-up and the processing, what a reservation is
    /// charged for the cycle), *tagged with that cycle*:
    /// `(cycle as u32) << 32 | min(ns, u32::MAX)`. One atomic store, so a
    /// reader never pairs one cycle's tag with another's time. Writer: the
    /// owner, as its last store of the cycle, *after* `done` and the wake
    /// (so the figure includes that work): a reader that sees
    /// `finished_cycle == k` may still find the tag of `k - 1` here, and
    /// must then treat the CPU time of `k` as not yet known. Readers: the
    /// driver (reservation controller, profile) and status replies; a
    /// client can only misreport its own CPU time, at most u32::MAX ns. Use
    /// [`ActivationRecord::store_cpu`] / [`ActivationRecord::cpu_of`].
    pub cpu: AtomicU64,
    /// 1 while the owner's process thread sleeps, or is about to sleep, on
    /// the driver's `done` word; 0 otherwise. Writer: the owner, stored
    /// (seq-cst, then a full fence) before the futex wait, 0 after it.
    /// Reader: the driver, at each cycle start, after it stored its `done`
    /// word and a full fence: it makes its `FUTEX_WAKE` only if some node
    /// says 1 ([`crate::cycle::release_to_sleepers`]). One of the two
    /// always sees the other's store, so a sleeper is never missed: either
    /// the driver sees the 1, or the futex wait sees the new `done`. A
    /// record that lies costs its owner its own wake-up (0) or the driver
    /// one syscall (1), nothing else.
    pub sleeps_on_driver: AtomicU32,
    /// The CPU the owner's thread was on as it began its current cycle (a
    /// client: when it found its inputs ready; the driver: when its wait
    /// for the cycle's start returned). Writer: the owner, once per cycle,
    /// before it releases anything for that cycle. Readers: a downstream
    /// thread woken before this node released it, which spins for the
    /// release only on another CPU: spinning on the owner's own CPU would
    /// keep the owner from running (a SCHED_OTHER or reservation thread
    /// woken there may preempt it). A wrong value changes only whether
    /// that reader spins or sleeps.
    pub run_cpu: AtomicU32,
    /// Last cycle the node completed (the driver: last cycle it started).
    /// Writer: the owner (release, after `finish_ns`). Reader: the driver
    /// (acquire), compared with the cycle it checks: anything else means
    /// "late".
    pub finished_cycle: AtomicU64,
}

impl ActivationRecord {
    /// Writer side, the owner: it runs its current cycle on CPU `cpu`.
    /// Real-time safe.
    pub fn mark_run_cpu(&self, cpu: u32) {
        self.run_cpu.store(cpu, Ordering::Relaxed);
    }

    /// The CPU the owner began its current cycle on (see
    /// [`ActivationRecord::run_cpu`]). Real-time safe.
    pub fn run_cpu(&self) -> u32 {
        self.run_cpu.load(Ordering::Relaxed)
    }

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

/// A client's requests to the driver, in its node segment. Writer: the
/// client (any of its threads; real-time safe: plain atomics and bounded
/// seqlock writes). Reader: the driver, once per cycle start, which
/// sanitises everything and follows no index from here (see each field). A
/// new client's mailbox is a fresh segment: the driver takes its request
/// words as they are when the client appears (see
/// `resound_engine::transport`), so whatever a new segment holds is never
/// read as a request.
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
