//! Rescue of a client thread held by its reservation's throttle.
//!
//! The kernel charges a SCHED_DEADLINE thread for all the time it holds a
//! CPU, and on a virtual machine that includes, as far as the traces
//! below show, a stall of the virtual CPU the host does not report as
//! stolen time. A thread caught running in such a stall owes its
//! reservation milliseconds of runtime, and the
//! constant bandwidth server makes it pay them back at its own bandwidth:
//! its deadline moves ahead by the debt × period / budget (about eleven
//! times the stall for a client budgeted at 9 % of the period), and once
//! its budget is spent it is throttled until then. Traced at 10 clients ×
//! 7.5 % on the development VM: a client caught in a 5.9 ms stall was
//! throttled for 22 ms, while its upstream client ran about eight more
//! cycles whose blocks it never took. Changing its budget or deadline does not
//! help (the kernel keeps the old deadline), and switching it out of
//! SCHED_DEADLINE and straight back keeps it too; only a thread that stays
//! out of SCHED_DEADLINE until that deadline has passed comes back with
//! fresh parameters.
//!
//! So a client thread that was woken, is late and has finished nothing
//! for a whole cycle is looked at (procfs, [`ThreadReader`]): runnable
//! (state `R`) and its CPU time moved by less than a quarter of its budget
//! since the cycle before means the scheduler holds it, not that it works,
//! sleeps or is stopped. It then runs SCHED_FIFO (one below the driver's
//! fallback priority, as a refused client does) until its 0-lag time has
//! passed (its deadline, later by what it still owes at its bandwidth:
//! [`debt_hold_cycles`]), at most `hold_cycles` cycles, while its ledger
//! entry stays booked and its controller keeps learning; then its
//! reservation, as its controller has it then, is applied again, and the
//! kernel gives it fresh parameters. The deadline and what it owes are
//! read from `/proc/TID/sched` ([`EntityReader`]); where the kernel does
//! not print them, the hold is `hold_cycles`. A thread whose 0-lag time
//! comes within the next period is left alone: the kernel lets it go about
//! as soon as a rescue would (half of those the looks found held behind
//! the tests' spiking client). A thread spinning in
//! its callback uses its budget every period and is never rescued; one
//! asleep in a system call or stopped is not runnable. A thread whose
//! raise the ledger or the kernel refused lately is short of budget, not
//! held for a debt, and is left alone. A thread whose own work overran
//! far enough to be held a whole cycle is rescued too, but a slot is
//! rescued at most once in [`COOLDOWN_HOLDS`] holds, so a client that
//! overruns again and again stays under its reservation nearly all the
//! time.
//!
//! Off by default (`resoundd --throttle-rescue CYCLES` turns it on). On
//! SCHED_FIFO the rescued thread runs below every SCHED_DEADLINE thread,
//! and the benches disagree on whether that pays: side by side with
//! jackd2 at 10 × 7.5 % (five runs, alternated) the chain lost 101 blocks
//! with it against 437 without in a noisy hour, and 94 against 31 (with
//! more xruns in every run) in a quieter one (see docs/architecture.md).
//!
//! Threads: owned by the driver thread, inside [`Reservations`]; the per
//! slot state is allocated once.

use super::{kind, Mode, Reservations};
use crate::events::RtEvent;
use resound_sched::thread_run::{DeadlineEntity, ThreadRun};
use resound_sched::Policy;
use resound_shm::sync::Ordering;

/// Reads a thread's run state and CPU time without allocating (procfs; a
/// fake in tests).
pub type ThreadReader = fn(tid: i32) -> Option<ThreadRun>;

/// Reads a SCHED_DEADLINE thread's entity without allocating (procfs; a
/// fake in tests).
pub type EntityReader = fn(tid: i32) -> Option<DeadlineEntity>;

/// Where the kernel stands with a held thread, from `/proc/TID/sched`
/// ([`debt_hold_cycles`]).
#[derive(Debug, Clone, Copy)]
pub struct HeldEntity {
    /// The held thread's entity.
    pub entity: DeadlineEntity,
    /// Its reservation: budget and period (ns).
    pub budget_ns: u64,
    /// See `budget_ns`.
    pub period_ns: u64,
}

/// The kernel's run-queue clock, read off the driver thread's entity
/// ([`debt_hold_cycles`]).
#[derive(Debug, Clone, Copy)]
pub struct DriverEntity {
    /// The driver thread's entity.
    pub entity: DeadlineEntity,
    /// Its relative deadline (ns).
    pub deadline_ns: u64,
    /// How long ago it woke for this cycle (ns).
    pub since_wake_ns: u64,
}

/// How many cycles of `period_ns` a rescued thread stays off
/// SCHED_DEADLINE: until its 0-lag time has passed (its deadline, later by
/// what it still owes at its own bandwidth), when the kernel forgets its
/// parameters and it comes back with fresh ones, plus a cycle; at most
/// `max`, and `max` when either entity is unknown. None when that time
/// comes within the next period: the kernel lets the thread go about as
/// soon as a rescue would, and the rescue would only cost it its place
/// among the reserved threads. The kernel's deadlines are on its
/// run-queue clock, not CLOCK_MONOTONIC; its "now" is taken from the
/// driver thread's own entity: the driver starts a new period at each
/// wake-up, so its deadline is that wake-up plus its relative deadline.
/// Real-time safe.
pub fn debt_hold_cycles(
    held: Option<HeldEntity>,
    driver: Option<DriverEntity>,
    period_ns: u64,
    max: u32,
) -> Option<u32> {
    let (Some(held), Some(driver)) = (held, driver) else {
        return Some(max);
    };
    if period_ns == 0 || held.budget_ns == 0 {
        return Some(max);
    }
    let now = driver
        .entity
        .deadline_ns
        .saturating_sub(driver.deadline_ns)
        .saturating_add(driver.since_wake_ns);
    let owed = held.entity.runtime_ns.min(0).unsigned_abs();
    let repaid_in = owed.saturating_mul(held.period_ns) / held.budget_ns;
    let left = held
        .entity
        .deadline_ns
        .saturating_add(repaid_in)
        .saturating_sub(now);
    if left <= period_ns {
        return None;
    }
    let cycles = left.div_ceil(period_ns).saturating_add(1);
    Some(u32::try_from(cycles).unwrap_or(u32::MAX).min(max))
}

/// The longest hold the tests and the measurements use
/// (`resoundd --throttle-rescue 100`): 267 ms at 128 frames and 48 kHz,
/// a debt of 24 ms at a 9 % budget.
pub const RESCUE_CYCLES: u32 = 100;

/// The server's default: no rescue (`resoundd --throttle-rescue`).
pub const DEFAULT_RESCUE_CYCLES: u32 = 0;

/// After a rescue, the slot is not rescued again for this many holds
/// (counted from the rescue).
pub const COOLDOWN_HOLDS: u64 = 11;

/// Per-slot rescue state.
pub(super) struct Rescues {
    /// The most cycles a rescued thread stays on SCHED_FIFO (0: no rescue).
    pub(super) hold_cycles: u32,
    /// Reads a thread's run state.
    pub(super) read: ThreadReader,
    /// Reads a SCHED_DEADLINE thread's entity.
    pub(super) read_entity: EntityReader,
    /// Per slot: the cycle of its last late look and its CPU time then.
    looked: Vec<Option<(u64, u64)>>,
    /// Per slot: the cycle at which a rescued thread gets its reservation
    /// back (0: not rescued).
    until: Vec<u64>,
    /// Per slot: the first cycle it may be rescued again.
    not_before: Vec<u64>,
    /// Slots to look at once this cycle is triggered (slot, first late
    /// cycle of its stall): the procfs reads take about 10 µs each and
    /// wait until the graph runs.
    queued: Vec<(u32, bool)>,
}

impl Rescues {
    /// State for `slots` slots (allocates).
    pub(super) fn new(slots: usize) -> Self {
        Rescues {
            hold_cycles: DEFAULT_RESCUE_CYCLES,
            read: resound_sched::thread_run::read_thread_run,
            read_entity: resound_sched::thread_run::read_deadline_entity,
            looked: vec![None; slots],
            until: vec![0; slots],
            not_before: vec![0; slots],
            queued: Vec::with_capacity(slots),
        }
    }

    /// Whether `slot`'s thread is on SCHED_FIFO for a rescue. Real-time safe.
    pub(super) fn holds(&self, slot: u32) -> bool {
        self.until.get(slot as usize).is_some_and(|&u| u != 0)
    }

    /// Forgets `slot` (its thread left). Real-time safe.
    pub(super) fn forget(&mut self, slot: u32) {
        if let Some(l) = self.looked.get_mut(slot as usize) {
            *l = None;
        }
        if let Some(u) = self.until.get_mut(slot as usize) {
            *u = 0;
        }
        if let Some(n) = self.not_before.get_mut(slot as usize) {
            *n = 0;
        }
    }
}

impl Reservations {
    /// Sets how many cycles a rescued thread stays on SCHED_FIFO (0: never
    /// rescue). Call before the driver loop.
    pub fn with_rescue_cycles(mut self, cycles: u32) -> Self {
        self.rescues.hold_cycles = cycles;
        self
    }

    /// Replaces the procfs reader (tests: a fake).
    pub fn with_thread_reader(mut self, read: ThreadReader) -> Self {
        self.rescues.read = read;
        self
    }

    /// Replaces the procfs reader of deadline entities (tests: a fake).
    pub fn with_entity_reader(mut self, read: EntityReader) -> Self {
        self.rescues.read_entity = read;
        self
    }

    /// `slot`'s thread was woken and is late: `first` for the first late
    /// cycle of a stall (its budget was just bumped), else it finished
    /// nothing since. Queues a look at it for after the trigger
    /// ([`Self::look_for_holds`]) unless it cannot be rescued now.
    /// Real-time safe.
    pub(super) fn watch_held(&mut self, slot: u32, first: bool) {
        if self.rescuable(slot) && self.rescues.queued.len() < self.rescues.queued.capacity() {
            self.rescues.queued.push((slot, first));
        }
    }

    /// Whether `slot`'s thread may be rescued now. Real-time safe.
    fn rescuable(&self, slot: u32) -> bool {
        let tid = self.tids.get(slot as usize).copied().unwrap_or(0);
        let r = &self.rescues;
        matches!(self.mode, Mode::Deadline { .. })
            && r.hold_cycles != 0
            && slot != 0
            && tid != 0
            && !self.freewheeling
            && !r.holds(slot)
            && self.cycles >= r.not_before[slot as usize]
            && self.cycles >= self.raise_paused_until[slot as usize]
    }

    /// Driver thread, once the cycle is triggered: looks at the late
    /// client threads the look-back queued (their run state from procfs)
    /// and puts those their throttle holds on SCHED_FIFO until their 0-lag
    /// time has passed (`resoundd --throttle-rescue`);
    /// `since_wake_ns` says how long ago the driver thread woke for this
    /// cycle, asked only for a rescue. Real-time safe.
    pub fn look_for_holds(
        &mut self,
        since_wake_ns: impl Fn() -> u64,
        emit: &mut impl FnMut(RtEvent),
    ) {
        for i in 0..self.rescues.queued.len() {
            let (slot, first) = self.rescues.queued[i];
            self.look_at(slot, first, &since_wake_ns, emit);
        }
        self.rescues.queued.clear();
    }

    /// One queued look at `slot`'s thread. Real-time safe.
    fn look_at(
        &mut self,
        slot: u32,
        first: bool,
        since_wake_ns: &impl Fn() -> u64,
        emit: &mut impl FnMut(RtEvent),
    ) {
        let Mode::Deadline {
            fallback_priority, ..
        } = self.mode
        else {
            return;
        };
        if !self.rescuable(slot) {
            return;
        }
        let tid = self.tids[slot as usize];
        let Some(run) = (self.rescues.read)(tid) else {
            return;
        };
        let now = (self.cycles, run.cpu_ns);
        let Some((at, cpu)) = self.rescues.looked[slot as usize].replace(now) else {
            return;
        };
        let budget = self.stats[slot as usize].budget_ns.load(Ordering::Relaxed);
        let idle = run.cpu_ns.saturating_sub(cpu) < budget / 4;
        if !first && run.runnable && idle && self.cycles.saturating_sub(at) <= 2 {
            if let Some(hold) = self.hold_for(slot, since_wake_ns()) {
                self.rescue(slot, tid, (fallback_priority - 1).max(1), hold, emit);
            }
        }
    }

    /// How many cycles `slot`'s thread is to be held ([`debt_hold_cycles`],
    /// from its entity and the driver's); None if the kernel lets it go
    /// within the next cycle. Real-time safe.
    fn hold_for(&self, slot: u32, since_wake_ns: u64) -> Option<u32> {
        let read = self.rescues.read_entity;
        let s = &self.stats[slot as usize];
        let held = read(self.tids[slot as usize]).map(|entity| HeldEntity {
            entity,
            budget_ns: s.budget_ns.load(Ordering::Relaxed),
            period_ns: s.period_ns.load(Ordering::Relaxed),
        });
        let driver_tid = self.tids.first().copied().unwrap_or(0);
        let driver = (driver_tid != 0)
            .then(|| read(driver_tid))
            .flatten()
            .map(|entity| DriverEntity {
                entity,
                deadline_ns: self.stats[0].deadline_ns.load(Ordering::Relaxed),
                since_wake_ns,
            });
        debt_hold_cycles(held, driver, self.audio_period_ns, self.rescues.hold_cycles)
    }

    /// Puts `slot`'s thread on SCHED_FIFO at `priority` for `hold` cycles;
    /// its ledger entry and published figures stay. Real-time safe.
    fn rescue(
        &mut self,
        slot: u32,
        tid: i32,
        priority: i32,
        hold: u32,
        emit: &mut impl FnMut(RtEvent),
    ) {
        self.count_change(slot);
        if (self.apply)(tid, &Policy::Fifo { priority }).is_err() {
            return;
        }
        self.rescues.until[slot as usize] = self.cycles + u64::from(hold);
        self.rescues.not_before[slot as usize] = self.cycles + COOLDOWN_HOLDS * u64::from(hold);
        self.rescues.looked[slot as usize] = None;
        self.show_budget(slot, 0, 0);
        let s = &self.stats[slot as usize];
        s.kind.store(kind::FIFO, Ordering::Relaxed);
        s.rescues.fetch_add(1, Ordering::Relaxed);
        emit(RtEvent::Rescued {
            slot,
            tid,
            hold_cycles: hold,
        });
    }

    /// Driver thread, at cycle begin: threads whose hold is over get their
    /// reservation again. Real-time safe.
    pub(super) fn end_rescues(&mut self, emit: &mut impl FnMut(RtEvent)) {
        for slot in 1..self.tids.len() as u32 {
            let until = self.rescues.until[slot as usize];
            if until != 0 && self.cycles >= until && !self.freewheeling {
                self.rescues.until[slot as usize] = 0;
                self.restore(slot, emit);
            }
        }
    }

    /// Applies `slot`'s reservation again after a rescue: the one its
    /// controller has now if the ledger admits it, else the one it had.
    /// A refusal by the kernel leaves the thread on SCHED_FIFO, retried as a
    /// refused thread is. Real-time safe.
    fn restore(&mut self, slot: u32, emit: &mut impl FnMut(RtEvent)) {
        let tid = self.tids[slot as usize];
        if tid == 0 {
            return;
        }
        if self
            .ledger
            .reserve(
                tid,
                self.controllers[slot as usize].reservation().bandwidth(),
            )
            .is_err()
        {
            self.keep_applied(slot);
        }
        let r = self.controllers[slot as usize].reservation();
        self.count_change(slot);
        match (self.apply)(tid, &r.policy(self.reclaim)) {
            Ok(()) => {
                self.stats[slot as usize]
                    .kind
                    .store(kind::DEADLINE, Ordering::Relaxed);
                self.publish(slot, &r);
                emit(RtEvent::RescueEnded { slot });
            }
            Err(libc::ESRCH) => {
                self.ledger.release(tid);
                self.tids[slot as usize] = 0;
                self.set_kind(slot, 0, kind::NONE);
            }
            Err(errno) => {
                // As a refused attachment: no controller runs for it until
                // a retry admits it.
                self.ledger.release(tid);
                self.tids[slot as usize] = 0;
                self.set_kind(slot, tid, kind::FIFO);
                if self.pending.len() < self.pending.capacity() {
                    self.pending.push((slot, tid));
                }
                emit(RtEvent::Refused {
                    slot,
                    asked_ppm: super::ppm(r.bandwidth()),
                    free_ppm: super::ppm(self.ledger.free()),
                    errno,
                });
            }
        }
    }
}
