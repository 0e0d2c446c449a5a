//! Events from the driver thread to the control side, and the lock-free ring
//! that carries them.
//!
//! The driver thread (real-time) pushes into an [`EventSink`]; a control
//! thread (the server's housekeeping) drains the matching
//! `rtrb::Consumer<RtEvent>`. Neither the reservations nor the cycle own
//! this: both depend on it.

/// Events from the driver thread to the control side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtEvent {
    /// A node armed in `cycle` had not finished when the next cycle began.
    Late {
        /// Cycle number.
        cycle: u64,
        /// Node slot.
        slot: u32,
        /// It had been woken (its inputs were ready) and ran short itself;
        /// false: it was still waiting for a late upstream node.
        woken: bool,
        /// When it was signalled, after the cycle's start (us; `u32::MAX`:
        /// not signalled).
        signal_us: u32,
        /// How long after its signal its thread woke (us; `u32::MAX`: it
        /// never woke in that cycle).
        wake_delay_us: u32,
    },
    /// The driver woke more than one period late: cycles were skipped.
    DriverLate {
        /// Cycle number after the resync.
        cycle: u64,
        /// How late it woke (ns).
        late_ns: u64,
    },
    /// A node's shared record holds garbage.
    Corrupt {
        /// Node slot.
        slot: u32,
        /// The status word found.
        status: u32,
    },
    /// End of the events of one cycle's look-back (lets the reader group them).
    CycleChecked {
        /// Cycle number that was checked.
        cycle: u64,
    },
    /// A thread got its SCHED_DEADLINE reservation.
    Reserved {
        /// Slot.
        slot: u32,
        /// Runtime (ns).
        runtime_ns: u64,
        /// Period (ns).
        period_ns: u64,
    },
    /// The ledger refused a reservation, and every budget floor above the
    /// thesis' 5 % (`--min-budget`) went down to it (once per server).
    FloorsLowered,
    /// A reservation (new or changed) was refused: by our ledger (errno 0) or by the kernel.
    Refused {
        /// Slot.
        slot: u32,
        /// Bandwidth asked, in millionths of a CPU.
        asked_ppm: u32,
        /// Bandwidth free in the ledger, in millionths of a CPU.
        free_ppm: u32,
        /// Kernel errno (0: refused by the ledger).
        errno: i32,
    },
    /// A thread left the graph still under its reservation in the kernel
    /// (stopped or hung: it can drop it only itself, while running); its
    /// bandwidth stays in the ledger until it lets go (see
    /// [`crate::departed`]).
    StillReserved {
        /// The slot it left.
        slot: u32,
        /// Kernel thread id.
        tid: i32,
        /// Bandwidth held, in millionths of a CPU.
        ppm: u32,
    },
    /// A thread of [`RtEvent::StillReserved`] let go of its reservation (or
    /// is gone): its bandwidth is back in the ledger.
    LetGo {
        /// Kernel thread id.
        tid: i32,
        /// Bandwidth given back, in millionths of a CPU.
        ppm: u32,
        /// About how long it was held after it left the graph (ms).
        held_ms: u32,
    },
    /// A client thread whose reservation was refused runs under the fallback policy.
    Fallback {
        /// Slot.
        slot: u32,
        /// true: SCHED_FIFO; false: SCHED_OTHER.
        fifo: bool,
    },
    /// A client thread held by its reservation's throttle (runnable, late,
    /// and not running for a whole cycle) runs SCHED_FIFO for a while (see
    /// `crate::reserve`'s rescue).
    Rescued {
        /// Slot.
        slot: u32,
        /// Kernel thread id.
        tid: i32,
        /// Cycles it stays on SCHED_FIFO before its reservation is applied again.
        hold_cycles: u32,
    },
    /// A rescued thread is under its reservation again.
    RescueEnded {
        /// Slot.
        slot: u32,
    },
    /// The driver reported a fault (see [`crate::driver::Fault`]).
    DriverFault {
        /// Cycle number at which it happened.
        cycle: u64,
        /// The fault.
        fault: crate::driver::Fault,
    },
    /// The driver is back on its device after [`crate::driver::Fault::DeviceLost`].
    DriverResumed {
        /// The first cycle on the device again.
        cycle: u64,
    },
}

/// The driver thread's end of the event ring. Never blocks: an event that
/// does not fit is counted as lost (the control side drains every few ms, so
/// a full ring means it is stalled).
pub struct EventSink {
    tx: rtrb::Producer<RtEvent>,
    lost: u64,
}

impl EventSink {
    /// Wraps the producer end of a ring (allocated by the caller).
    pub fn new(tx: rtrb::Producer<RtEvent>) -> EventSink {
        EventSink { tx, lost: 0 }
    }

    /// Pushes one event, or counts it as lost. Real-time safe.
    pub fn push(&mut self, e: RtEvent) {
        if self.tx.push(e).is_err() {
            self.lost += 1;
        }
    }

    /// Events lost since the last call (and resets the count). Real-time safe.
    pub fn take_lost(&mut self) -> u64 {
        std::mem::take(&mut self.lost)
    }
}
