//! The per-cycle side of [`Reservations`], on the driver thread: the
//! controllers fed with the last cycle's CPU time, wake-up offsets and
//! xruns, and the changes they return paced ([`CHANGES_PER_CYCLE`] client
//! changes that give less per cycle, no raise for [`REFUSED_RAISE_PAUSE`]
//! cycles after a refusal). Admission, attaching and detaching threads and
//! the control side's commands are in the parent module.

use super::{kind, Mode, Reservations, CHANGES_PER_CYCLE, REFUSED_RAISE_PAUSE, RETRY_CYCLES};
use crate::departed;
use crate::events::RtEvent;
use crate::verdict::Verdict;
use resound_sched::Reservation;
use resound_shm::sync::Ordering;

impl Reservations {
    /// A change the controller of `slot` proposed: applied now if it gives
    /// the thread more (budget or deadline) than the kernel has, if it is
    /// the driver's, or if this cycle's allowance has room; else deferred:
    /// the controller goes back to what the kernel has and proposes it
    /// again next cycle (see [`CHANGES_PER_CYCLE`]). Real-time safe.
    fn change(&mut self, slot: u32, r: Reservation, emit: &mut impl FnMut(RtEvent)) {
        if self.rescues.holds(slot) {
            // Applied when the hold ends, as the controller has it then.
            return;
        }
        let s = &self.stats[slot as usize];
        let gives_more = r.runtime_ns > s.budget_ns.load(Ordering::Relaxed)
            || r.deadline_ns > s.deadline_ns.load(Ordering::Relaxed);
        let attached = self.tids[slot as usize] != 0;
        let spent = self.changes_left == 0;
        if slot != 0 && spent && !gives_more && attached && !self.freewheeling {
            self.keep_applied(slot);
            return;
        }
        self.update(slot, r, emit);
    }

    /// One `sched_setattr` for `slot` counted against this cycle's
    /// allowance (the driver's own are not). Real-time safe.
    pub(super) fn count_change(&mut self, slot: u32) {
        if slot != 0 {
            self.changes_left = self.changes_left.saturating_sub(1);
        }
    }

    /// Driver thread, at the start of a cycle's work: starts loading every
    /// attached thread's predictor window into the caches, so that the
    /// controllers, which run after the look-back, find them there.
    /// Real-time safe.
    pub fn prefetch(&self) {
        for (c, &tid) in self.controllers.iter().zip(&self.tids) {
            if tid != 0 {
                c.prefetch();
            }
        }
    }

    /// Driver thread, first in every cycle: the allowance of client
    /// reservation changes starts again (see [`CHANGES_PER_CYCLE`]).
    /// Real-time safe.
    pub fn start_cycle(&mut self) {
        self.changes_left = CHANGES_PER_CYCLE;
    }

    /// No raise for `slot` for [`REFUSED_RAISE_PAUSE`] cycles. Real-time safe.
    pub(super) fn pause_raises(&mut self, slot: u32) {
        self.raise_paused_until[slot as usize] = self.cycles + REFUSED_RAISE_PAUSE;
    }

    /// A refused update: the slot's controller goes back to what the kernel
    /// has, the reservation last published. Real-time safe.
    pub(super) fn keep_applied(&mut self, slot: u32) {
        let s = &self.stats[slot as usize];
        self.controllers[slot as usize].refused(Reservation {
            runtime_ns: s.budget_ns.load(Ordering::Relaxed),
            deadline_ns: s.deadline_ns.load(Ordering::Relaxed),
            period_ns: s.period_ns.load(Ordering::Relaxed),
        });
    }

    /// Driver thread, before the controllers: the graph's threads woke in
    /// the judged cycle, which started at `start_ns`, as its verdicts say
    /// (see [`Self::note_wake`]). Real-time safe.
    pub fn note_wakes(
        &mut self,
        start_ns: u64,
        verdicts: &[Verdict],
        emit: &mut impl FnMut(RtEvent),
    ) {
        for v in verdicts.iter().filter(|v| v.awake) {
            self.note_wake(v.slot, v.awake_ns.saturating_sub(start_ns), emit);
        }
    }

    /// Slot `slot`'s thread woke `offset_ns` after its cycle's start. A
    /// wake-up so much later than its earliest that, on the light shape, the
    /// kernel could hold the next one puts the thread on the full period,
    /// before the next cycle is triggered (the driver's own, before it
    /// sleeps again), and keeps it there for a window
    /// ([`resound_sched::Controller::leave_light`]). The margin is 7/8 of the light slack:
    /// the next wake-up is held only if it comes that slack earlier in its
    /// cycle than this one, hardly earlier than the floor; the eighth is room
    /// for a floor that crept up. Real-time safe.
    pub fn note_wake(&mut self, slot: u32, offset_ns: u64, emit: &mut impl FnMut(RtEvent)) {
        let Mode::Deadline { cfg, .. } = self.mode else {
            return;
        };
        if !cfg.light_shape() || self.tids.get(slot as usize).copied().unwrap_or(0) == 0 {
            return;
        }
        let c = &self.controllers[slot as usize];
        let slack = c.light_slack_ns();
        let (period, margin) = (c.reservation_period_ns(), slack - slack / 8);
        if self.wake_floors.note(slot, offset_ns, period, margin) {
            if let Some(r) = self.controllers[slot as usize].leave_light() {
                self.change(slot, r, emit);
            }
        }
    }

    /// Driver thread, at cycle begin: handles commands, then runs every
    /// attached controller on the last cycle's CPU time: the driver's own
    /// (`driver_cpu_ns`, None if not measured) and each client's from its
    /// look-back verdict (only a client that finished; a late one is handled
    /// as an xrun). `period_ns` is the audio period now. Real-time safe.
    pub fn cycle_begin(
        &mut self,
        period_ns: u64,
        driver_cpu_ns: Option<u64>,
        verdicts: &[Verdict],
        emit: &mut impl FnMut(RtEvent),
    ) {
        // Requests of the control side wait for the next cycle once the
        // allowance is spent, but one goes through every cycle.
        for i in 0..16 {
            if i > 0 && self.changes_left == 0 {
                break;
            }
            let Ok(cmd) = self.commands.pop() else { break };
            self.command(cmd, emit);
        }
        let samples = driver_cpu_ns
            .map(|c| (0, c))
            .into_iter()
            .chain(verdicts.iter().filter_map(|v| Some((v.slot, v.cpu_ns?))));
        let Mode::Deadline { .. } = self.mode else {
            self.record_used(samples);
            return;
        };
        self.cycles += 1;
        if self.cycles.is_multiple_of(RETRY_CYCLES) && !self.pending.is_empty() {
            self.retry_pending(emit);
        }
        if self.cycles.is_multiple_of(departed::CHECK_CYCLES) && !self.departed.is_empty() {
            self.check_departed(emit);
        }
        self.end_rescues(emit);
        self.follow_period(period_ns, emit);
        for (slot, used) in samples {
            if self.tids.get(slot as usize).copied().unwrap_or(0) != 0 {
                self.sample(slot, used, emit);
            }
        }
    }

    /// The audio period changed: every controller follows. Real-time safe.
    fn follow_period(&mut self, period: u64, emit: &mut impl FnMut(RtEvent)) {
        if period == self.audio_period_ns || period == 0 {
            return;
        }
        self.audio_period_ns = period;
        for slot in 0..self.tids.len() as u32 {
            if let Some(r) = self.controllers[slot as usize].set_audio_period(period) {
                self.change(slot, r, emit);
            }
        }
    }

    /// Feeds one CPU sample to an attached slot's controller. Real-time safe.
    fn sample(&mut self, slot: u32, used: u64, emit: &mut impl FnMut(RtEvent)) {
        let s = &self.stats[slot as usize];
        s.used_ns.store(used, Ordering::Relaxed);
        let c = &mut self.controllers[slot as usize];
        let per_cycle_budget =
            c.reservation().runtime_ns / c.config().effective_multiplier() as u64;
        if used >= per_cycle_budget {
            s.throttles.fetch_add(1, Ordering::Relaxed);
        }
        let next = c.cycle_begin(used);
        s.predicted_ns.store(c.predicted_ns(), Ordering::Relaxed);
        if let Some(r) = next {
            self.change(slot, r, emit);
        }
    }

    /// Without reservations, still publish the CPU used per thread for status. Real-time safe.
    fn record_used(&self, samples: impl Iterator<Item = (u32, u64)>) {
        for (slot, used) in samples {
            if let Some(s) = self.stats.get(slot as usize) {
                if s.kind.load(Ordering::Relaxed) != kind::NONE {
                    s.used_ns.store(used, Ordering::Relaxed);
                }
            }
        }
    }

    /// A node did not finish its cycle: counted as its xrun. Its budget is
    /// bumped only if it had been woken (`woken`), i.e. it ran short itself,
    /// and it finished some cycle since its last bump (`last_finished`, the
    /// last cycle its record says it finished, moved): a thread late cycle
    /// after cycle that finishes nothing in between is not short of budget
    /// but stopped or hung, and bumping it every cycle would only pile its
    /// reservation up to the maximum (measured in the soak: SIGSTOPped
    /// clients reached 0.9 CPU each and, until they could drop it, held that
    /// bandwidth in the kernel after the ledger had let it go, so the
    /// kernel refused everyone else's raises). A throttled thread still
    /// finishes its cycles, late, and is bumped at each. A woken thread is
    /// also watched for a throttle that holds it (see `rescue`). Real-time
    /// safe.
    pub fn on_late(
        &mut self,
        slot: u32,
        woken: bool,
        last_finished: u64,
        emit: &mut impl FnMut(RtEvent),
    ) {
        let at = slot as usize;
        let progressed = self
            .bumped_at
            .get(at)
            .is_some_and(|&b| b != Some(last_finished));
        if woken && progressed {
            self.bumped_at[at] = Some(last_finished);
            self.on_xrun(slot, emit);
        } else if let Some(s) = self.stats.get(slot as usize) {
            s.xruns.fetch_add(1, Ordering::Relaxed);
        }
        if woken {
            self.watch_held(slot, progressed);
        }
    }

    /// An xrun attributed to `slot`: flush and bump its budget. Real-time safe.
    pub fn on_xrun(&mut self, slot: u32, emit: &mut impl FnMut(RtEvent)) {
        if let Some(s) = self.stats.get(slot as usize) {
            s.xruns.fetch_add(1, Ordering::Relaxed);
        }
        if !matches!(self.mode, Mode::Deadline { .. })
            || self.tids.get(slot as usize).copied().unwrap_or(0) == 0
        {
            return;
        }
        if let Some(r) = self.controllers[slot as usize].on_xrun() {
            self.change(slot, r, emit);
        }
    }
}
