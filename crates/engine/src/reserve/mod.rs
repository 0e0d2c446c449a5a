//! Reservations of the graph's real-time threads, owned by the driver thread.
//!
//! Every real-time thread of the graph gets its own reservation: the driver
//! thread (slot 0) and each active client's process thread (its slot). With
//! `--sched deadline` each has a [`Controller`] that, at every cycle begin,
//! feeds the CPU time the thread used in the last cycle into its predictor and
//! returns a new SCHED_DEADLINE reservation when the budget moved past the
//! threshold; only then is `sched_setattr` called. New clients and xruns flush
//! the window and bump the budget (Bagnoli's thesis "Design and development of a mechanism for low-latency
//! real time audio processing on Linux", §3.4.5). An own [`Ledger`] keeps the
//! admitted bandwidth; a refused reservation leaves that one thread on
//! SCHED_FIFO (then SCHED_OTHER) and is reported with what was asked and free.
//!
//! Threads: [`Reservations::cycle_begin`] and the command handling run on the
//! driver thread (real-time): all state is preallocated; the only syscalls
//! are the rare `sched_setattr`s. The control side talks to it through a
//! lock-free command ring ([`Command`]) and reads [`ResStat`] atomics.
//!
//! This module owns admission, attaching and detaching threads and the
//! commands; `feedback` owns the per-cycle side (controllers fed, changes
//! paced); `rescue` puts a client thread its reservation's throttle holds
//! on SCHED_FIFO for a while.

mod feedback;
mod rescue;

pub use rescue::{
    debt_hold_cycles, DriverEntity, EntityReader, HeldEntity, ThreadReader, COOLDOWN_HOLDS,
    DEFAULT_RESCUE_CYCLES, RESCUE_CYCLES,
};

use crate::departed::{self, Departed, Prober};
use crate::events::RtEvent;
use crate::wake_floor::WakeFloors;
use resound_sched::{Controller, ControllerConfig, Ledger, Policy, Reservation};
use resound_shm::sync::Ordering;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};
use std::sync::Arc;

/// Scheduling mode of the graph's real-time threads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// SCHED_DEADLINE reservations with (unless fixed) feedback-controlled budgets.
    Deadline {
        /// Controller settings (period, overprovision, window, fixed, reclaim...).
        cfg: ControllerConfig,
        /// Priority for threads whose reservation is refused.
        fallback_priority: i32,
    },
    /// SCHED_FIFO at this priority (driver; clients one less, applied by themselves).
    Fifo(i32),
    /// SCHED_OTHER.
    Other,
}

/// Requests from the control side to the driver thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// A client's process thread `tid` (already checked to belong to the client) joined the graph.
    Attach {
        /// Client slot.
        slot: u32,
        /// Kernel thread id.
        tid: i32,
    },
    /// The client left the graph (deactivated, closed or died).
    Detach {
        /// Client slot.
        slot: u32,
    },
    /// New relative deadline for a slot's reservation (critical-path mode).
    SetDeadline {
        /// Slot.
        slot: u32,
        /// Relative deadline (ns).
        deadline_ns: u64,
    },
    /// Admit (or with `ppm` 0 release) `ppm` millionths of a CPU for a
    /// thread outside the graph in the ledger; answered in
    /// [`crate::ExternalReply`] under `seq` (see [`crate::external`]).
    External {
        /// Kernel thread id (the caller checked it exists).
        tid: i32,
        /// Bandwidth in millionths of a CPU; 0 releases.
        ppm: u64,
        /// Request sequence number, echoed in the reply.
        seq: u64,
    },
}

/// `ResStat::kind` values.
pub mod kind {
    /// No thread attached.
    pub const NONE: u32 = 0;
    /// SCHED_OTHER.
    pub const OTHER: u32 = 1;
    /// SCHED_FIFO.
    pub const FIFO: u32 = 2;
    /// SCHED_DEADLINE.
    pub const DEADLINE: u32 = 3;
}

/// Per-slot figures the driver publishes for status and the profiler.
/// Writer: driver thread. Readers: control threads.
#[derive(Default)]
pub struct ResStat {
    /// Kernel thread id (0: none).
    pub tid: AtomicI32,
    /// [`kind`] value.
    pub kind: AtomicU32,
    /// Reservation period (ns).
    pub period_ns: AtomicU64,
    /// Budget set in the kernel (runtime per period, ns).
    pub budget_ns: AtomicU64,
    /// Relative deadline set (ns).
    pub deadline_ns: AtomicU64,
    /// Last prediction, scaled to the reservation period (ns).
    pub predicted_ns: AtomicU64,
    /// CPU time used in the last cycle (ns).
    pub used_ns: AtomicU64,
    /// Cycles in which the thread used at least its whole per-cycle budget (so it was, or would have been, throttled).
    pub throttles: AtomicU64,
    /// Xruns attributed to this thread.
    pub xruns: AtomicU64,
    /// `sched_setattr` calls made for it.
    pub updates: AtomicU64,
    /// Times it was put on SCHED_FIFO for a while because its reservation's
    /// throttle held it (see `rescue`).
    pub rescues: AtomicU64,
}

/// The driver thread's reservation state.
pub struct Reservations {
    mode: Mode,
    controllers: Vec<Controller>,
    tids: Vec<i32>,
    ledger: Ledger,
    stats: Arc<[ResStat]>,
    commands: rtrb::Consumer<Command>,
    audio_period_ns: u64,
    reclaim: bool,
    /// Client threads whose reservation was refused: (slot, tid), retried every [`RETRY_CYCLES`].
    pending: Vec<(u32, i32)>,
    cycles: u64,
    /// The driver left SCHED_FIFO for SCHED_OTHER while freewheeling.
    freewheel_dropped: bool,
    /// Freewheeling: the client threads dropped their real-time scheduling
    /// themselves; their reservations are not re-applied until it ends.
    freewheeling: bool,
    /// Per slot: the last finished cycle its record showed when its budget
    /// was last bumped for an xrun (None: not bumped since it attached);
    /// see [`Self::on_late`].
    bumped_at: Vec<Option<u64>>,
    /// Per slot: until which of [`Self::cycles`] a raise of its
    /// reservation is not asked again after one was refused (see
    /// [`REFUSED_RAISE_PAUSE`]).
    raise_paused_until: Vec<u64>,
    /// Client reservation changes the driver may still make in this cycle
    /// (see [`CHANGES_PER_CYCLE`]).
    changes_left: u32,
    /// Sets a thread's policy (`sched_setattr`; a fake in tests).
    apply: Applier,
    /// Reads a thread's policy (`sched_getattr`; a fake in tests).
    probe: Prober,
    /// Threads that left the graph still under their reservation in the
    /// kernel; their ledger entries stay until they let go.
    departed: Departed,
    /// Where [`Command::External`] is answered (None: such requests are ignored).
    external: Option<Arc<crate::ExternalReply>>,
    /// How early in its cycle each slot's thread wakes at best (light
    /// threads leave their shape after a wake-up far later than that).
    wake_floors: WakeFloors,
    /// Where each slot's budget per audio cycle is shown to the client
    /// threads (`ControlHeader::cycle_budget_us`; None: nowhere, as in
    /// tests without a segment).
    budget_board: Option<Arc<resound_shm::View>>,
    /// Client threads held by their throttle, put on SCHED_FIFO for a while.
    rescues: rescue::Rescues,
    /// The ledger refused a reservation once: every budget floor above the
    /// thesis' minimum went down to it, for the server's lifetime (see
    /// [`Self::lower_floors`]).
    floors_lowered: bool,
}

/// Sets policy `p` on thread `tid` (0: the calling thread) without
/// allocating; Err carries the errno. Real-time safe.
pub type Applier = fn(tid: i32, p: &Policy) -> Result<(), i32>;

/// How often refused reservations are retried (cycles).
pub const RETRY_CYCLES: u64 = 200;

/// After a raise of a thread's reservation was refused (by the ledger or
/// the kernel), no raise is asked for that thread for this many cycles: the
/// controller proposes its wanted budget again every cycle, and without a
/// pause a full ledger or kernel cost a refused `sched_setattr` and a log
/// line per thread per cycle (measured in a 60-minute soak: 57,644
/// refusals). Cuts and shape changes that do not raise the bandwidth go
/// through meanwhile.
pub const REFUSED_RAISE_PAUSE: u64 = 32;

/// Client reservation changes (`sched_setattr` calls) per cycle past which
/// the driver defers those that give a thread less: a budget cut, or a
/// shorter deadline (entering the light shape, following a shorter
/// period). A deferred change goes back to what the kernel has and is
/// proposed again at the next cycle, when it is still wanted. Changes that
/// give more (a raise, an xrun bump, a light-shape exit, a longer period)
/// and the driver's own are never deferred: a thread kept short of budget
/// is throttled, and a throttled driver stalls the whole graph.
///
/// Each call costs the driver 9 µs at the median and 37 µs at the 99th
/// percentile on the development VM, and events that move every thread at
/// once (a buffer-size change, a machine stall that wakes every light
/// thread late, and 100 cycles later their return to the light shape)
/// asked for ten or more in one cycle: the driver then overran its own
/// budget and the kernel throttled it, up to 5 ms, with the whole graph
/// behind it (measured in a 10-minute soak: 71 of the driver's 86
/// throttles came within 3 ms after four or more calls, which random 3 ms
/// windows hold 0.4 % of the time). Deferring every change past two a
/// cycle, raises included, took that to 33 throttles but lost more blocks
/// at 10 × 7.5 %, where xruns name several clients at once and their bumps
/// waited (see docs/architecture.md).
pub const CHANGES_PER_CYCLE: u32 = 2;

impl Reservations {
    /// Builds the state for `slots` slots (allocates; call before the driver loop).
    pub fn new(
        mode: Mode,
        slots: usize,
        ledger: Ledger,
        stats: Arc<[ResStat]>,
        commands: rtrb::Consumer<Command>,
    ) -> Self {
        let (controllers, audio_period_ns, reclaim) = match mode {
            Mode::Deadline { cfg, .. } => (
                (0..slots).map(|_| Controller::new(cfg)).collect(),
                cfg.audio_period_ns,
                cfg.reclaim,
            ),
            _ => (Vec::new(), 0, false),
        };
        Reservations {
            mode,
            controllers,
            tids: vec![0; slots],
            ledger,
            stats,
            commands,
            audio_period_ns,
            reclaim,
            pending: Vec::with_capacity(slots),
            cycles: 0,
            freewheel_dropped: false,
            freewheeling: false,
            bumped_at: vec![None; slots],
            raise_paused_until: vec![0; slots],
            changes_left: CHANGES_PER_CYCLE,
            apply: apply_rt,
            probe: departed::probe_rt,
            departed: Departed::new(slots),
            external: None,
            wake_floors: WakeFloors::new(slots),
            budget_board: None,
            rescues: rescue::Rescues::new(slots),
            floors_lowered: false,
        }
    }

    /// The ledger refused a reservation: a budget floor above the thesis'
    /// minimum (`--min-budget`) holds bandwidth that threads do not use, so
    /// every controller's floor goes down to the thesis' 5 % and the next
    /// feedback cuts give it back (the refused thread is retried as
    /// before). Once for the server's lifetime; says so once. Real-time
    /// safe.
    fn lower_floors(&mut self, emit: &mut impl FnMut(RtEvent)) {
        if self.floors_lowered {
            return;
        }
        self.floors_lowered = true;
        let mut lowered = false;
        for c in &mut self.controllers {
            lowered |= c.lower_floor(resound_sched::controller::THESIS_MIN_BUDGET_PCT);
        }
        if lowered {
            emit(RtEvent::FloorsLowered);
        }
    }

    /// Shows each slot's budget per audio cycle to the client threads in
    /// `view`'s header, from now on (they bound their early wake-up spin
    /// by it). Call before the driver loop.
    pub fn with_budget_board(mut self, view: Arc<resound_shm::View>) -> Self {
        self.budget_board = Some(view);
        self
    }

    /// Shows slot `slot`'s budget per audio cycle (`runtime_ns` spread
    /// over the cycles its period spans; 0: no reservation). Real-time safe.
    fn show_budget(&self, slot: u32, runtime_ns: u64, period_ns: u64) {
        let Some(view) = &self.budget_board else {
            return;
        };
        let cycles = period_ns.div_ceil(self.audio_period_ns.max(1)).max(1);
        view.header().set_cycle_budget(slot, runtime_ns / cycles);
    }

    /// Answers [`Command::External`] requests in `reply` (the server's
    /// [`crate::EngineShared::external`]).
    pub fn with_external(mut self, reply: Arc<crate::ExternalReply>) -> Self {
        self.external = Some(reply);
        self
    }

    /// Admits or releases an external thread's bandwidth and answers.
    /// Real-time safe.
    fn external(&mut self, tid: i32, ppm: u64, seq: u64) {
        let free = self.ledger.free();
        let ok = if ppm == 0 {
            self.ledger.release(tid);
            true
        } else {
            self.ledger.reserve(tid, ppm as f64 / 1e6).is_ok()
        };
        if let Some(r) = &self.external {
            r.answer(seq, ok, free, self.ledger.used());
        }
    }

    /// Replaces the `sched_setattr` seam (tests: a fake that needs no privileges).
    pub fn with_applier(mut self, apply: Applier) -> Self {
        self.apply = apply;
        self
    }

    /// Replaces the `sched_getattr` seam (tests: a fake kernel).
    pub fn with_prober(mut self, probe: Prober) -> Self {
        self.probe = probe;
        self
    }

    /// Driver thread, before its loop: puts the driver itself (slot 0, the
    /// calling thread) under its policy. Returns the policy description for
    /// status (not real-time: builds a string).
    pub fn start_driver(&mut self, tid: i32, emit: &mut impl FnMut(RtEvent)) -> String {
        match self.mode {
            Mode::Deadline {
                fallback_priority, ..
            } => {
                self.controllers[0].on_activation();
                if self.attach_deadline(0, tid, emit) {
                    self.controllers[0]
                        .reservation()
                        .policy(self.reclaim)
                        .describe()
                } else {
                    self.fallback_desc(fallback_priority)
                }
            }
            Mode::Fifo(p) => self.fallback_desc(p),
            Mode::Other => {
                self.set_kind(0, resound_sched::policy::gettid(), kind::OTHER);
                "SCHED_OTHER".into()
            }
        }
    }

    /// The driver's FIFO/OTHER policy, described.
    fn fallback_desc(&mut self, prio: i32) -> String {
        if self.fallback(0, 0, prio) {
            format!("SCHED_FIFO {prio}")
        } else {
            format!("SCHED_OTHER (SCHED_FIFO {prio} not permitted)")
        }
    }

    /// Publishes the slot's thread and scheduling kind (clearing the
    /// reservation figures unless SCHED_DEADLINE). Real-time safe.
    fn set_kind(&self, slot: u32, tid: i32, k: u32) {
        if let Some(s) = self.stats.get(slot as usize) {
            s.tid.store(tid, Ordering::Relaxed);
            s.kind.store(k, Ordering::Relaxed);
            if k != kind::DEADLINE {
                self.show_budget(slot, 0, 0);
                s.budget_ns.store(0, Ordering::Relaxed);
                s.period_ns.store(0, Ordering::Relaxed);
                s.deadline_ns.store(0, Ordering::Relaxed);
                s.predicted_ns.store(0, Ordering::Relaxed);
            }
        }
    }

    /// SCHED_FIFO at `prio`, else SCHED_OTHER, for the driver (tid 0 = calling
    /// thread) or a client thread. True for FIFO. Real-time safe.
    fn fallback(&mut self, slot: u32, tid: i32, prio: i32) -> bool {
        let real_tid = if tid == 0 {
            resound_sched::policy::gettid()
        } else {
            tid
        };
        if (self.apply)(tid, &Policy::Fifo { priority: prio }).is_ok() {
            self.set_kind(slot, real_tid, kind::FIFO);
            true
        } else {
            let _ = (self.apply)(tid, &Policy::Other);
            self.set_kind(slot, real_tid, kind::OTHER);
            false
        }
    }

    /// Admits and applies the slot's current reservation to `tid` (0 = calling
    /// thread). False if refused. Real-time safe.
    fn attach_deadline(&mut self, slot: u32, tid: i32, emit: &mut impl FnMut(RtEvent)) -> bool {
        let r = self.controllers[slot as usize].reservation();
        let real_tid = if tid == 0 {
            resound_sched::policy::gettid()
        } else {
            tid
        };
        if let Err(e) = self.ledger.reserve(real_tid, r.bandwidth()) {
            self.lower_floors(emit);
            emit(RtEvent::Refused {
                slot,
                asked_ppm: ppm(e.asked),
                free_ppm: ppm(e.free),
                errno: 0,
            });
            return false;
        }
        self.count_change(slot);
        match (self.apply)(tid, &r.policy(self.reclaim)) {
            Ok(()) => {
                self.tids[slot as usize] = real_tid;
                self.set_kind(slot, real_tid, kind::DEADLINE);
                self.publish(slot, &r);
                emit(RtEvent::Reserved {
                    slot,
                    runtime_ns: r.runtime_ns,
                    period_ns: r.period_ns,
                });
                true
            }
            Err(errno) => {
                self.ledger.release(real_tid);
                emit(RtEvent::Refused {
                    slot,
                    asked_ppm: ppm(r.bandwidth()),
                    free_ppm: ppm(self.ledger.free()),
                    errno,
                });
                false
            }
        }
    }

    /// Publishes the slot's reservation figures after a successful update.
    /// Real-time safe.
    fn publish(&self, slot: u32, r: &Reservation) {
        self.show_budget(slot, r.runtime_ns, r.period_ns);
        let s = &self.stats[slot as usize];
        s.budget_ns.store(r.runtime_ns, Ordering::Relaxed);
        s.period_ns.store(r.period_ns, Ordering::Relaxed);
        s.deadline_ns.store(r.deadline_ns, Ordering::Relaxed);
        s.predicted_ns.store(
            self.controllers[slot as usize].predicted_ns(),
            Ordering::Relaxed,
        );
        s.updates.fetch_add(1, Ordering::Relaxed);
    }

    /// Applies a new reservation to an attached slot (one admission check,
    /// one syscall). Real-time safe.
    fn update(&mut self, slot: u32, r: Reservation, emit: &mut impl FnMut(RtEvent)) {
        let tid = self.tids[slot as usize];
        if tid == 0 || (self.freewheeling && slot != 0) || self.rescues.holds(slot) {
            return;
        }
        let old = self.ledger.get(tid).unwrap_or(0.0);
        let raise = r.bandwidth() > old;
        if raise && self.cycles < self.raise_paused_until[slot as usize] {
            self.keep_applied(slot);
            return;
        }
        if let Err(e) = self.ledger.reserve(tid, r.bandwidth()) {
            self.keep_applied(slot);
            self.pause_raises(slot);
            self.lower_floors(emit);
            emit(RtEvent::Refused {
                slot,
                asked_ppm: ppm(e.asked),
                free_ppm: ppm(e.free),
                errno: 0,
            });
            return;
        }
        self.count_change(slot);
        match (self.apply)(tid, &r.policy(self.reclaim)) {
            Ok(()) => self.publish(slot, &r),
            Err(libc::ESRCH) => {
                // The thread is gone (its client died): forget it.
                self.ledger.release(tid);
                self.tids[slot as usize] = 0;
                self.set_kind(slot, 0, kind::NONE);
            }
            Err(errno) => {
                let _ = self.ledger.reserve(tid, old);
                self.keep_applied(slot);
                if raise {
                    self.pause_raises(slot);
                }
                emit(RtEvent::Refused {
                    slot,
                    asked_ppm: ppm(r.bandwidth()),
                    free_ppm: ppm(self.ledger.free()),
                    errno,
                });
            }
        }
    }

    /// Handles one request of the control side. Real-time safe.
    fn command(&mut self, cmd: Command, emit: &mut impl FnMut(RtEvent)) {
        match (cmd, self.mode) {
            (
                Command::Attach { slot, tid },
                Mode::Deadline {
                    fallback_priority, ..
                },
            ) if (slot as usize) < self.tids.len() => {
                self.detach(slot, emit);
                // A thread that comes back while still held (or a new one
                // with the id of one that died): the kernel replaces a
                // thread's reservation with the one asked for now, so the
                // held entry goes and the new one is admitted on its own.
                if self.departed.forget(tid) {
                    self.ledger.release(tid);
                }
                // A fresh start for the new thread (the slot may be reused), then
                // the activation bump of Bagnoli's thesis (§3.4.5).
                self.controllers[slot as usize].reset();
                self.controllers[slot as usize].on_activation();
                if !self.attach_deadline(slot, tid, emit) {
                    let fifo = self.fallback(slot, tid, (fallback_priority - 1).max(1));
                    if self.pending.len() < self.pending.capacity() {
                        self.pending.push((slot, tid));
                    }
                    emit(RtEvent::Fallback { slot, fifo });
                }
            }
            (Command::Attach { slot, tid }, mode) if (slot as usize) < self.tids.len() => {
                // fifo/other: the client applied its own policy; just record it.
                let k = if matches!(mode, Mode::Fifo(_)) {
                    kind::FIFO
                } else {
                    kind::OTHER
                };
                self.set_kind(slot, tid, k);
            }
            (Command::Detach { slot }, _) if (slot as usize) < self.tids.len() => {
                self.detach(slot, emit)
            }
            (Command::SetDeadline { slot, deadline_ns }, Mode::Deadline { .. })
                if (slot as usize) < self.tids.len() =>
            {
                if let Some(r) = self.controllers[slot as usize].set_deadline(deadline_ns) {
                    self.update(slot, r, emit);
                }
            }
            (Command::External { tid, ppm, seq }, _) => self.external(tid, ppm, seq),
            _ => {}
        }
    }

    /// Tries again to give refused client threads their reservation (the
    /// others' budgets may have shrunk since). Real-time safe.
    fn retry_pending(&mut self, emit: &mut impl FnMut(RtEvent)) {
        let mut i = 0;
        while i < self.pending.len() && self.changes_left > 0 {
            let (slot, tid) = self.pending[i];
            let r = self.controllers[slot as usize].reservation();
            if self.ledger.free() + 1e-9 >= r.bandwidth() && self.attach_deadline(slot, tid, emit) {
                self.pending.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Forgets a slot's thread. The thread itself drops its reservation
    /// while running (resetting a sleeping deadline thread from another
    /// thread can leak admission bandwidth), or exits; until it has, its
    /// bandwidth stays in the ledger (see [`crate::departed`]). Real-time safe.
    fn detach(&mut self, slot: u32, emit: &mut impl FnMut(RtEvent)) {
        self.pending.retain(|&(s, _)| s != slot);
        self.wake_floors.forget(slot);
        self.rescues.forget(slot);
        let tid = std::mem::replace(&mut self.tids[slot as usize], 0);
        if tid != 0 {
            self.release_or_hold(slot, tid, emit);
        }
        self.bumped_at[slot as usize] = None;
        self.raise_paused_until[slot as usize] = 0;
        self.set_kind(slot, 0, kind::NONE);
    }

    /// The ledger entry of `tid`, which just left `slot`: let go at once if
    /// the kernel no longer has the thread under the reservation it was
    /// given (it dropped it, or is gone), else held until it has. Call
    /// before the slot's figures are cleared. Real-time safe.
    fn release_or_hold(&mut self, slot: u32, tid: i32, emit: &mut impl FnMut(RtEvent)) {
        let Some(bandwidth) = self.ledger.get(tid) else {
            return;
        };
        let s = &self.stats[slot as usize];
        let (runtime_ns, period_ns) = (
            s.budget_ns.load(Ordering::Relaxed),
            s.period_ns.load(Ordering::Relaxed),
        );
        if departed::still_holds(self.probe, tid, runtime_ns, period_ns)
            && self.departed.hold(tid, runtime_ns, period_ns, self.cycles)
        {
            emit(RtEvent::StillReserved {
                slot,
                tid,
                ppm: ppm(bandwidth),
            });
        } else {
            self.ledger.release(tid);
        }
    }

    /// Lets go of the ledger entries of departed threads the kernel no
    /// longer has under their reservation. Real-time safe.
    fn check_departed(&mut self, emit: &mut impl FnMut(RtEvent)) {
        let (ledger, period_ns, now) = (&mut self.ledger, self.audio_period_ns, self.cycles);
        self.departed.check(self.probe, |tid, since| {
            let bandwidth = ledger.release(tid);
            emit(RtEvent::LetGo {
                tid,
                ppm: ppm(bandwidth),
                held_ms: (now.saturating_sub(since) * period_ns / 1_000_000) as u32,
            });
        });
    }

    /// Bandwidth the ledger holds for threads that left the graph but keep
    /// their reservation in the kernel (CPUs). Real-time safe.
    pub fn ledger_departed(&self) -> f64 {
        self.departed
            .tids()
            .filter_map(|tid| self.ledger.get(tid))
            .sum()
    }

    /// Driver thread, when freewheeling starts or stops. A driver on
    /// SCHED_FIFO (fifo mode, or a refused reservation) drops to SCHED_OTHER
    /// while freewheeling, as jackd does: back-to-back cycles then share the
    /// CPU with everything else instead of starving it. A reservation
    /// already bounds the driver, so it stays. The client threads drop
    /// their own real-time scheduling while freewheeling (a thread leaves
    /// SCHED_DEADLINE itself, see `Reservations::detach`); their
    /// reservations are not touched meanwhile and are given back, as the
    /// controllers now have them, when freewheeling ends. One syscall per
    /// thread and transition. Real-time safe.
    pub fn set_freewheel(&mut self, on: bool, emit: &mut impl FnMut(RtEvent)) {
        self.freewheeling = on;
        if !on && matches!(self.mode, Mode::Deadline { .. }) {
            for slot in 1..self.tids.len() as u32 {
                let r = self.controllers[slot as usize].reservation();
                self.update(slot, r, emit);
            }
        }
        let prio = match self.mode {
            Mode::Fifo(p) => p,
            Mode::Deadline {
                fallback_priority, ..
            } => fallback_priority,
            Mode::Other => return,
        };
        if on && self.stats[0].kind.load(Ordering::Relaxed) == kind::FIFO {
            if (self.apply)(0, &Policy::Other).is_ok() {
                self.set_kind(0, resound_sched::policy::gettid(), kind::OTHER);
                self.freewheel_dropped = true;
            }
        } else if !on && self.freewheel_dropped {
            self.freewheel_dropped = false;
            self.fallback(0, 0, prio);
        }
    }

    /// Bandwidth currently admitted by the ledger (CPUs). Real-time safe.
    pub fn ledger_used(&self) -> f64 {
        self.ledger.used()
    }
}

/// A bandwidth (CPUs) in millionths of a CPU, saturated. Real-time safe.
fn ppm(x: f64) -> u32 {
    (x * 1e6).round().clamp(0.0, u32::MAX as f64) as u32
}

/// sched_setattr without allocating (the driver thread runs under the
/// no-allocation guard): Err carries the errno. The default [`Applier`].
/// Real-time safe.
pub fn apply_rt(tid: i32, p: &Policy) -> Result<(), i32> {
    resound_sched::policy::set_attr(tid, &p.to_attr())
}
