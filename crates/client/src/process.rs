//! The process thread — the real-time path: [`Control`], [`ProcessHandler`],
//! the thread's setup ([`process_thread`]) and its handle on the cycles,
//! [`RtContext`] (wait for a cycle, run it, signal its end to the clients
//! downstream), with [`CycleInfo`] describing one cycle.
//!
//! Threads: the process thread only (real-time), except the start-up before
//! [`RtContext::ready`], which is thread initialisation.

use crate::client::Inner;
use crate::hold::{finished_late, hold_until, unread_downstream};
use crate::scope::{silence_outputs, ProcessScope};
use crate::wake_timer::{first_wake_at, hop_wake_at, last_run_ns, upstream_of, TimerLateness};
use resound_shm::cycle::{mark_asleep_on_driver, next_step, release, Step};
use resound_shm::sync::AtomicU32;
use resound_shm::sync::{current_cpu, futex, Ordering};
use resound_shm::time::{monotonic_ns, thread_cpu_ns};
use resound_shm::transport::TransportReader;
use resound_shm::{client_state, ActivationRecord, NodeStatus, Table, View};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::Arc;

/// What the process callback tells the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Keep running.
    Continue,
    /// Stop: the client is deactivated (as a non-zero return in JACK).
    Quit,
}
/// A process callback.
pub trait ProcessHandler: Send + 'static {
    /// Called once per cycle on the process thread. Must not allocate, lock or block.
    fn process(&mut self, ps: &mut ProcessScope<'_>) -> Control;
    /// Called once on the process thread before the first cycle.
    fn thread_init(&mut self) {}
}

impl<F: FnMut(&mut ProcessScope<'_>) -> Control + Send + 'static> ProcessHandler for F {
    fn process(&mut self, ps: &mut ProcessScope<'_>) -> Control {
        self(ps)
    }
}

/// The process thread: real-time scheduling, then the body, which runs the cycles.
pub(crate) fn process_thread(
    inner: Arc<Inner>,
    body: impl FnOnce(&mut RtContext),
    quit: Arc<AtomicBool>,
    ready: Sender<i32>,
    gen: u32,
) {
    let prio = inner.view.header().client_priority;
    let mut fifo_applied = false;
    let sched = if prio > 0 {
        let fifo = resound_sched::Policy::Fifo { priority: prio };
        match resound_sched::policy::apply_inheritable(0, &fifo) {
            Ok(()) => {
                fifo_applied = true;
                resound_sched::describe_thread(0)
            }
            Err(e) => format!("SCHED_OTHER (SCHED_FIFO {prio} refused: {e})"),
        }
    } else {
        "SCHED_OTHER".into()
    };
    *inner.rt_sched.lock().unwrap_or_else(|e| e.into_inner()) = sched;
    let tid = resound_sched::policy::gettid();
    inner.rt_tid.store(tid as u32, Ordering::Relaxed);
    if inner.view.record(inner.slot).is_none() {
        return;
    }
    let mut ctx = RtContext {
        inner,
        quit,
        ready: Some((ready, tid)),
        last: None,
        current: None,
        cpu_mark: 0,
        prewake: false,
        spun_for: None,
        held_for: None,
        spun_ns: 0,
        work_ns: 0,
        ready_lag_ns: None,
        timer_late: TimerLateness::default(),
        fifo_applied,
        synced: false,
        tb_gen: None,
        tb_locate: 0,
        gen,
        quitting: false,
        transport: TransportReader::default(),
        freewheel: false,
        fifo_before_freewheel: None,
    };
    body(&mut ctx);
    // A body that never waited still lets activate() return.
    ctx.send_ready();
    if let Some(c) = ctx.current.take() {
        ctx.finish(c, Control::Quit);
    }
    // The body ended (it signalled Quit, or just returned) while the client
    // may still be active: the server keeps arming it until the deactivation
    // is published, and its downstream clients wait for its signal. So, as
    // jackd's client deactivates from its real-time thread before it ends,
    // ask for the deactivation and keep the client's place in the graph
    // until deactivate() stops this thread: wait() now runs each cycle
    // silently (outputs silenced, downstream signalled) and returns None
    // only then (at once if the client is already being deactivated or the
    // server stops; a stopping server needs no deactivation request).
    let running = ctx.inner.view.header().running.load(Ordering::Acquire) != 0;
    if !ctx.quit.load(Ordering::Acquire) && running {
        ctx.request_quit();
    }
    while ctx.wait().is_some() {}
    // Leave any reservation the server gave this thread, ourselves, while running.
    let _ = resound_sched::drop_own_reservation();
}

/// One cycle as the process thread sees it (see [`RtContext::wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleInfo {
    /// Cycle number.
    pub cycle: u64,
    /// Frames in this cycle.
    pub frames: usize,
    /// Frame time of its first frame.
    pub frame_time: u64,
    /// CLOCK_MONOTONIC ns at which it began.
    pub cycle_start_ns: u64,
    /// CLOCK_MONOTONIC ns at which the next cycle begins.
    pub next_start_ns: u64,
    /// Index of the graph table in use for this cycle.
    pub table: usize,
}

/// The process thread's handle on its cycles: wait for the next one, then
/// signal its end (which wakes the downstream clients). Lives on the
/// process thread only; every method is real-time safe.
pub struct RtContext {
    pub(crate) inner: Arc<Inner>,
    quit: Arc<AtomicBool>,
    ready: Option<(Sender<i32>, i32)>,
    /// Tag of the last cycle this thread ran (None before the first).
    last: Option<u32>,
    pub(crate) current: Option<CycleInfo>,
    /// The thread's CPU clock when it last finished a cycle (or first
    /// waited): each cycle's CPU time runs from here to its own finish.
    cpu_mark: u64,
    /// Its last cycle ran short enough (the header's `early_wake_us`) to
    /// wake the downstream threads as it starts the next, not only as it
    /// ends it.
    prewake: bool,
    /// The driver's tag of the cycle this thread last spun in (at most one
    /// spin per cycle).
    spun_for: Option<u32>,
    /// The driver's tag of the cycle this thread last held back for a
    /// client it feeds (at most one hold per cycle; see [`crate::hold`]).
    held_for: Option<u32>,
    /// Time spent spinning since `cpu_mark` (ns; all of it CPU time).
    spun_ns: u64,
    /// CPU time of its last cycle without the spinning (ns): what its own
    /// work and wake-ups cost, which a reservation's budget must cover.
    work_ns: u64,
    /// How long after its cycle's start its inputs were ready in its last
    /// cycle (ns; None before one, or when they were ready before the
    /// start): when its own timer expects them next (see
    /// [`crate::wake_timer`]).
    ready_lag_ns: Option<u64>,
    /// How late its own timer wake-ups run (see [`crate::wake_timer`]).
    timer_late: TimerLateness,
    /// The thread got SCHED_FIFO when it started.
    fifo_applied: bool,
    /// The sync callback ran successfully at least once since activation.
    pub(crate) synced: bool,
    /// Timebase generation and relocation generation the master last saw.
    pub(crate) tb_gen: Option<u32>,
    pub(crate) tb_locate: u64,
    /// This activation's generation (see `Inner::quit_requested`).
    gen: u32,
    /// Quit was signalled: the application is not called again; cycles run
    /// silently until the deactivation.
    quitting: bool,
    /// The transport as this thread last read it (bounded reads).
    pub(crate) transport: TransportReader,
    /// The server was freewheeling at this thread's last wake-up.
    freewheel: bool,
    /// This thread's own SCHED_FIFO, dropped while freewheeling, to take
    /// back when freewheeling ends.
    fifo_before_freewheel: Option<resound_sched::Policy>,
}

impl RtContext {
    /// Once, at the first wait: lets the activation return, and starts the
    /// thread's CPU accounting (the thread-init callback is not a cycle's).
    fn send_ready(&mut self) {
        if let Some((tx, tid)) = self.ready.take() {
            self.cpu_mark = thread_cpu_ns();
            let _ = tx.send(tid);
        }
    }

    /// Thread initialisation is done: lets [`crate::Client::activate_with`] return
    /// (as jackd's activation waits only for its thread to start and run
    /// the thread-init callback). Called at the latest by the first
    /// [`RtContext::wait`]. Call it before running application code that
    /// may wait for what the activating thread does next, or call client
    /// methods. Like the rest of the thread initialisation it is not
    /// real-time safe (a channel send, once).
    pub fn ready(&mut self) {
        self.send_ready();
    }

    /// Asks for deactivation (once): the application is not called again.
    /// Real-time safe (a store and a futex wake).
    pub(crate) fn request_quit(&mut self) {
        if self.quitting {
            return;
        }
        self.quitting = true;
        self.inner.quit_requested.store(self.gen, Ordering::Release);
        futex::bump_and_wake(&self.inner.wake);
    }

    /// The shared-memory view. Real-time safe.
    pub fn view(&self) -> &View {
        &self.inner.view
    }

    /// This client's slot. Real-time safe.
    pub fn slot(&self) -> u32 {
        self.inner.slot
    }

    /// The cycle being processed (between [`RtContext::wait`] and
    /// [`RtContext::signal`]). Real-time safe.
    pub fn current(&self) -> Option<CycleInfo> {
        self.current
    }

    /// Sleeps until this client's next cycle and returns it; None when the
    /// client is being deactivated or the server stops (the body should then
    /// return). A cycle still open is signalled first. Real-time safe.
    ///
    /// After [`Control::Quit`] was signalled it returns only None: until the
    /// deactivation it runs every cycle itself, without the application,
    /// silencing the client's outputs and signalling downstream, so the
    /// clients after it are neither late nor fed stale buffers.
    pub fn wait(&mut self) -> Option<CycleInfo> {
        if let Some(c) = self.current.take() {
            self.finish(c, Control::Continue);
        }
        self.send_ready();
        loop {
            let c = self.next_cycle()?;
            if !self.quitting {
                self.current = Some(c);
                return Some(c);
            }
            let view = &self.inner.view;
            assert_no_alloc::assert_no_alloc(|| {
                silence_outputs(view, &view.table(c.table), self.inner.slot, c.frames);
            });
            self.finish(c, Control::Continue);
        }
    }

    /// Sleeps until this client's inputs are ready for a cycle; None when
    /// it must stop. It sleeps on one word at a time: the done word of an
    /// upstream node that has not released the cycle, beside the header's
    /// epoch (a graph switch, the server stopping) and this client's own
    /// wake word (deactivation). Woken before its inputs are ready (an
    /// upstream thread's early wake-up), it first spins on that word, once
    /// per cycle, for at most the header's `early_wake_us`. Real-time safe.
    fn next_cycle(&mut self) -> Option<CycleInfo> {
        let inner = self.inner.clone();
        let view = &inner.view;
        let h = view.header();
        let rec = view.record(inner.slot)?;
        let stop =
            |q: &AtomicBool| q.load(Ordering::Acquire) || h.running.load(Ordering::Acquire) == 0;
        let mut slept = false;
        loop {
            let epoch = h.epoch.load(Ordering::Acquire);
            let woken = inner.rt_wake.load(Ordering::Acquire);
            // Checked after reading the two words: a stop that bumps them
            // from now on ends the sleep below.
            if stop(&self.quit) {
                return None;
            }
            self.follow_freewheel(h.freewheel_in_effect.load(Ordering::Acquire) != 0);
            let next = assert_no_alloc::assert_no_alloc(|| self.poll(view, rec));
            let (word, seen) = match next {
                Poll::Run(c) => return Some(c),
                Poll::Hold(word, seen) => {
                    let until = hold_until(monotonic_ns(), h.period_ns.load(Ordering::Relaxed));
                    let words = [(&h.epoch, epoch), (&inner.rt_wake, woken), (word, seen)];
                    // Woken while the word still holds `seen` (the
                    // downstream thread's early wake-up of its own
                    // downstream, as it begins the block): hold on.
                    while words.iter().all(|(w, v)| w.load(Ordering::Acquire) == *v)
                        && monotonic_ns() < until
                    {
                        futex::wait_any(&words, Some(until));
                    }
                    continue;
                }
                Poll::Sleep(word, seen) => (Some(word), seen),
                Poll::Idle => (None, 0),
            };
            let bound_ns = spin_bound_ns(
                h.early_wake_ns(),
                h.cycle_budget_us(inner.slot),
                self.work_ns,
            );
            let started = view.record(0).map(|d| d.done.load(Ordering::Acquire));
            if let (true, Some(w)) = (slept, word) {
                if bound_ns > 0 && started.is_some() && self.spun_for != started {
                    // Woken before its inputs were ready: by an upstream
                    // thread starting its cycle early enough to wake us,
                    // by its own timer (the first client), or by a graph
                    // change; wait for the release awake, unless it is the
                    // driver's and this is the driver's CPU (then sleep on,
                    // untimed, until it releases).
                    self.spun_for = started;
                    if worth_spinning(view, inner.slot, w) {
                        let from = monotonic_ns();
                        spin_until_changed(w, seen, (&h.epoch, epoch), bound_ns);
                        self.spun_ns += monotonic_ns().saturating_sub(from);
                        continue;
                    }
                }
            }
            rec.status
                .store(NodeStatus::Waiting as u32, Ordering::Relaxed);
            let mut words: [(&AtomicU32, u32); 3] = [
                (&h.epoch, epoch),
                (&inner.rt_wake, woken),
                (&h.epoch, epoch),
            ];
            let n = match word {
                Some(w) => {
                    words[2] = (w, seen);
                    3
                }
                None => 2,
            };
            let timer = match (word, started) {
                (Some(w), Some(started)) => self.own_timer(view, w, started, bound_ns),
                _ => None,
            };
            // The driver wakes its word's sleepers only if one says so.
            let on_driver = word.is_some_and(|w| is_driver_word(view, w));
            if on_driver {
                mark_asleep_on_driver(rec, true);
            }
            futex::wait_any(&words[..n], timer);
            if on_driver {
                mark_asleep_on_driver(rec, false);
            }
            if let Some(at) = timer {
                self.note_timer_wake(at);
            }
            slept = true;
        }
    }

    /// When this thread, about to sleep on `word` (the done word of the
    /// node it waits for; the driver's done word holds `started`), wakes by
    /// its own timer to spin for the release instead ([`crate::wake_timer`]);
    /// None: it sleeps until released. Not while freewheeling (cycles are
    /// not paced), nor when it cannot spin (`bound_ns` 0). Real-time safe.
    fn own_timer(&self, view: &View, word: &AtomicU32, started: u32, bound_ns: u64) -> Option<u64> {
        let driver = view.record(0)?;
        if bound_ns == 0 || self.freewheel {
            return None;
        }
        let at = if std::ptr::eq(word, &driver.done) {
            self.first_client_timer(view, driver, started, bound_ns)?
        } else {
            self.hop_timer(view, word, started, bound_ns)?
        };
        (at > monotonic_ns()).then_some(at)
    }

    /// After a sleep with its own timer set to expire at `at`: a return at
    /// or after `at` tells how late its timer wake-ups run (a return before
    /// it, woken by a release or a graph change, tells nothing).
    /// Real-time safe.
    fn note_timer_wake(&mut self, at: u64) {
        if let Some(late) = monotonic_ns().checked_sub(at) {
            self.timer_late.note(late);
        }
    }

    /// The timer for the driver's release after `started` ([`first_wake_at`]).
    /// Only the first client in the activation order sets one, when the
    /// server asks for it (the header's `first_wake_timer`: `resoundd
    /// --first-wake`): one thread spinning beside a driver about to
    /// release, never several taking every CPU from it; and not when it
    /// spun already for this release. Real-time safe.
    fn first_client_timer(
        &self,
        view: &View,
        driver: &ActivationRecord,
        started: u32,
        bound_ns: u64,
    ) -> Option<u64> {
        if view.header().first_wake_timer.load(Ordering::Relaxed) == 0
            || self.spun_for == Some(started)
            || first_in_order(&view.table(view.current_index())) != Some(self.inner.slot)
        {
            return None;
        }
        let t = view.timer();
        let released = driver.release_ns.load(Ordering::Relaxed);
        // Only a SCHED_FIFO thread's timer is set early for its lateness:
        // woken before the cycle start, it spins where the driver, of
        // higher priority, preempts it. A SCHED_OTHER spinner could hold
        // the driver's CPU, and under a reservation, with a deadline then
        // earlier than the driver's, it measured no better in two benches
        // and lost more blocks in a third, also with the driver's deadline
        // made the earlier one (see docs/architecture.md).
        let fifo = self.fifo_applied && view.header().cycle_budget_us(self.inner.slot) == 0;
        let late = if fifo { self.timer_late.ns() } else { 0 };
        Some(first_wake_at(
            t.start_ns,
            t.next_start_ns,
            released,
            bound_ns,
            late,
        ))
    }

    /// The timer for an upstream client's release, whose done word is
    /// `word` ([`hop_wake_at`]): at the lag its inputs had in this thread's
    /// last cycle, after the start of the cycle it waits for (the next one
    /// if it ran the driver's last, `started`). Not when that client's last
    /// cycle ran shorter than the early wake-up bound (it wakes this thread
    /// as it starts), nor in a cycle this thread spun in already.
    /// Real-time safe.
    fn hop_timer(&self, view: &View, word: &AtomicU32, started: u32, bound_ns: u64) -> Option<u64> {
        let lag = self.ready_lag_ns?;
        let waits_for_next = self.last == Some(started);
        if !waits_for_next && self.spun_for == Some(started) {
            return None;
        }
        let table = view.table(view.current_index());
        let up = upstream_of(view, &table, self.inner.slot, word)?;
        let early_ns = view.header().early_wake_ns();
        if last_run_ns(up)? < early_ns {
            return None;
        }
        let t = view.timer();
        let start = if waits_for_next {
            t.next_start_ns
        } else {
            t.start_ns
        };
        Some(hop_wake_at(start, lag, bound_ns))
    }

    /// One look at the graph: the cycle to run if its inputs are ready,
    /// else the word to sleep on. Real-time safe.
    fn poll<'v>(&mut self, view: &'v View, rec: &ActivationRecord) -> Poll<'v> {
        let slot = self.inner.slot;
        let Some(driver) = view.record(0) else {
            return Poll::Idle;
        };
        let started = driver.done.load(Ordering::Acquire);
        let index = view.current_index();
        let table = view.table(index);
        if table.client_state(slot) != client_state::ACTIVE {
            return Poll::Idle;
        }
        match next_step(view, &table, slot, &driver.done, started, self.last) {
            Step::Sleep(word, seen) => Poll::Sleep(word, seen),
            Step::Run { tag, signal_ns } => {
                let late = finished_late(rec, driver);
                if let Some((word, seen)) = self.hold_for(view, &table, tag, late) {
                    return Poll::Hold(word, seen);
                }
                self.last = Some(tag);
                let c = begin_cycle(view, index, rec, tag, signal_ns);
                let period = c.next_start_ns.saturating_sub(c.cycle_start_ns);
                self.ready_lag_ns = signal_ns
                    .checked_sub(c.cycle_start_ns)
                    .filter(|&lag| lag > 0 && lag < period);
                if self.prewake {
                    // Wakes the downstream threads now, so that their
                    // wake-up overlaps this cycle's work; they spin for the
                    // release (see `spin_until_changed`). The driver, if
                    // downstream, sleeps on through it (`wait_released`).
                    futex::wake_early(&rec.done);
                }
                Poll::Run(c)
            }
        }
    }

    /// Before it runs cycle `tag`, if it finished its last block late
    /// (`finished_late`): the done word (and the value it holds) of a client
    /// this one feeds that has not yet taken that block, to sleep on for a
    /// while ([`crate::hold`]); at most once per cycle. Real-time safe.
    fn hold_for<'v>(
        &mut self,
        view: &'v View,
        table: &Table<'_>,
        tag: u32,
        finished_late: bool,
    ) -> Option<(&'v AtomicU32, u32)> {
        let last = self.last.filter(|&l| l != tag)?;
        if self.held_for == Some(tag) || !finished_late {
            return None;
        }
        let unread = unread_downstream(view, table, self.inner.slot, last)?;
        self.held_for = Some(tag);
        Some(unread)
    }

    /// Freewheeling drops this thread's real-time scheduling, as jackd's
    /// clients do: back-to-back cycles then share the CPU with the rest of
    /// the system. The thread leaves SCHED_FIFO or its reservation itself
    /// (a thread leaves SCHED_DEADLINE while running; see the sched crate)
    /// when it first wakes in freewheel mode (the header's
    /// `freewheel_in_effect`: after the driver stopped updating
    /// reservations, so none comes back behind it); when freewheeling ends it
    /// takes its own SCHED_FIFO back, and the server's driver gives a
    /// reservation back. Syscalls only on a change of mode (which is not
    /// real-time work: freewheeling is not paced).
    fn follow_freewheel(&mut self, on: bool) {
        if on == self.freewheel {
            return;
        }
        self.freewheel = on;
        if on {
            self.fifo_before_freewheel = resound_sched::current(0)
                .ok()
                .filter(|p| matches!(p, resound_sched::Policy::Fifo { .. }));
            let _ = resound_sched::policy::set_attr(0, &resound_sched::Policy::Other.to_attr());
        } else if let Some(p) = self.fifo_before_freewheel.take() {
            let _ = resound_sched::policy::apply_inheritable(0, &p);
        }
    }

    /// Ends the current cycle: stamps it finished and wakes the downstream
    /// clients. `Control::Quit` also asks for deactivation (as a non-zero
    /// return from a JACK process callback); the next [`RtContext::wait`]
    /// then returns None once the client is deactivated, running the cycles
    /// until then silently. Real-time safe.
    pub fn signal(&mut self, ctl: Control) {
        if let Some(c) = self.current.take() {
            self.finish(c, ctl);
        }
    }

    /// Stamps cycle `c` finished, releases it to the clients downstream
    /// (one store and one wake on this client's own done word), records
    /// its CPU time; Quit asks for deactivation. Real-time safe.
    ///
    /// A cycle's CPU time is the thread's CPU clock from its previous
    /// finish to this one: the way into its sleep, the wake-up, libjack's
    /// work and the callback. That is what a reservation is charged for the
    /// cycle, and it takes one clock read per cycle instead of two (the
    /// read is a system call, and one at the wake-up delayed every
    /// callback by it).
    fn finish(&mut self, c: CycleInfo, ctl: Control) {
        let inner = &self.inner;
        let view = &inner.view;
        let Some(rec) = view.record(inner.slot) else {
            return;
        };
        assert_no_alloc::assert_no_alloc(|| {
            let now = monotonic_ns();
            let ran = now.saturating_sub(rec.awake_ns.load(Ordering::Relaxed));
            let early_ns = view.header().early_wake_ns();
            self.prewake = ran < early_ns;
            rec.finish_ns.store(now, Ordering::Relaxed);
            rec.finished_cycle.store(c.cycle, Ordering::Release);
            rec.status
                .store(NodeStatus::Finished as u32, Ordering::Release);
            release(rec, c.cycle);
            let cpu = thread_cpu_ns();
            let used = cpu.saturating_sub(self.cpu_mark);
            rec.store_cpu(c.cycle, used);
            self.cpu_mark = cpu;
            self.work_ns = used.saturating_sub(std::mem::take(&mut self.spun_ns));
        });
        if ctl == Control::Quit {
            self.request_quit();
        }
    }

    /// What the process callback sees of a cycle. Real-time safe.
    pub fn scope(&self, c: &CycleInfo) -> ProcessScope<'_> {
        let view = &self.inner.view;
        ProcessScope {
            view,
            table: view.table(c.table),
            frames: c.frames,
            cycle: c.cycle,
            frame_time: c.frame_time,
            cycle_start_ns: c.cycle_start_ns,
        }
    }
}

/// How long a thread woken early may spin for its inputs (ns): the header's
/// early wake-up bound, and under a reservation (a budget per cycle of
/// `budget_us`, 0: none) at most half of what the budget leaves over its
/// last cycle's work (`work_ns`, its CPU time without the spinning), so
/// that spinning never takes the budget its own work needs: spinning is
/// charged to the budget, and a thread out of budget is throttled.
/// Real-time safe.
pub(crate) fn spin_bound_ns(header_bound_ns: u64, budget_us: u32, work_ns: u64) -> u64 {
    if budget_us == 0 {
        return header_bound_ns;
    }
    let spare = (u64::from(budget_us) * 1000).saturating_sub(work_ns);
    header_bound_ns.min(spare / 2)
}

/// Whether a thread woken before `word` changed (the done word of the
/// driver or of an upstream client of node `slot`) should spin for the
/// change: only on another CPU than the one its owner runs its cycle on.
/// On that CPU the spinner would keep the owner from running, or be
/// preempted by it: a SCHED_OTHER spinner woken there preempts the owner
/// (measured: an upstream client held for the spinner's whole bound), a
/// reservation may give the spinner an earlier deadline than the owner's,
/// and a SCHED_FIFO driver preempts the spinner anyway. The spinner sleeps
/// instead, and a wake-up on the owner's own CPU is cheap. Real-time safe.
fn worth_spinning(view: &View, slot: u32, word: &AtomicU32) -> bool {
    let owner = if is_driver_word(view, word) {
        view.record(0)
    } else {
        upstream_of(view, &view.table(view.current_index()), slot, word)
    };
    spin_beside(owner.map(|r| r.run_cpu()), current_cpu())
}

/// Whether `word` is the driver's done word. Real-time safe.
fn is_driver_word(view: &View, word: &AtomicU32) -> bool {
    view.record(0).is_some_and(|d| std::ptr::eq(word, &d.done))
}

/// [`worth_spinning`]'s rule on plain values: waiting for a node whose
/// thread runs on `owner_cpu` (None: unknown), on `my_cpu`. Real-time safe.
fn spin_beside(owner_cpu: Option<u32>, my_cpu: u32) -> bool {
    owner_cpu != Some(my_cpu)
}

/// The first client in the graph's activation order (the driver, slot 0,
/// is not a client). Real-time safe.
fn first_in_order(table: &Table<'_>) -> Option<u32> {
    (0..table.order_len())
        .filter_map(|i| table.order_at(i))
        .find(|&slot| slot != 0)
}

/// Spins until `word` no longer holds `seen` or the epoch word (`epoch.0`)
/// no longer holds `epoch.1`, for at most `bound_ns`; returns whether one
/// of them changed. Real-time safe (no system call: the clock is read
/// through the vDSO, every 64 looks).
pub(crate) fn spin_until_changed(
    word: &AtomicU32,
    seen: u32,
    epoch: (&AtomicU32, u32),
    bound_ns: u64,
) -> bool {
    let until = monotonic_ns().saturating_add(bound_ns);
    loop {
        for _ in 0..64 {
            if word.load(Ordering::Acquire) != seen || epoch.0.load(Ordering::Acquire) != epoch.1 {
                return true;
            }
            std::hint::spin_loop();
        }
        if monotonic_ns() >= until {
            return false;
        }
    }
}

/// What [`RtContext::poll`] found.
enum Poll<'v> {
    /// Run this cycle.
    Run(CycleInfo),
    /// Before running a cycle, sleep a while on this done word of a client
    /// downstream, which still holds this value ([`crate::hold`]).
    Hold(&'v AtomicU32, u32),
    /// Sleep on this upstream done word, which still holds this value.
    Sleep(&'v AtomicU32, u32),
    /// Not in the graph: sleep until the graph or the client changes.
    Idle,
}

/// Stamps this client's record as woken and running for the cycle with
/// tag `tag` (its inputs ready since `signal_ns`). Real-time safe.
fn begin_cycle(
    view: &View,
    table: usize,
    rec: &ActivationRecord,
    tag: u32,
    signal_ns: u64,
) -> CycleInfo {
    let awake = monotonic_ns();
    let t = view.timer();
    // The full cycle number whose low 32 bits are `tag` (the timer may
    // already show a later cycle if this thread runs late).
    let behind = t.cycle.wrapping_sub(tag as u64) as u32 as u64;
    let cycle = t.cycle.saturating_sub(behind);
    rec.cycle.store(cycle, Ordering::Relaxed);
    rec.signal_ns.store(signal_ns, Ordering::Relaxed);
    rec.awake_ns.store(awake, Ordering::Relaxed);
    rec.mark_run_cpu(current_cpu());
    rec.status
        .store(NodeStatus::Running as u32, Ordering::Relaxed);
    let frames = (t.frames as usize).min(view.layout().caps.max_frames as usize);
    let period = view.header().period_ns.load(Ordering::Relaxed);
    CycleInfo {
        cycle,
        frames,
        // A late thread runs after the driver began a newer cycle: its
        // frame time and start are those of *its* cycle.
        frame_time: t.frame_time.saturating_sub(behind * frames as u64),
        cycle_start_ns: t.start_ns.saturating_sub(behind * period),
        next_start_ns: t.next_start_ns.saturating_sub(behind * period),
        table,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn under_a_reservation_the_spin_takes_at_most_half_the_budget_left_over_the_work() {
        assert_eq!(spin_bound_ns(100_000, 0, 500_000), 100_000, "no budget");
        assert_eq!(spin_bound_ns(100_000, 133, 33_000), 50_000);
        assert_eq!(spin_bound_ns(100_000, 400, 100_000), 100_000, "header's");
        assert_eq!(spin_bound_ns(100_000, 133, 140_000), 0, "no spare");
        assert_eq!(spin_bound_ns(0, 133, 0), 0, "early wake-up off");
    }

    #[test]
    fn a_thread_spins_for_a_release_only_on_another_cpu_than_the_releasers() {
        assert!(spin_beside(Some(0), 1), "the releaser elsewhere");
        assert!(!spin_beside(Some(1), 1), "the releaser's CPU: sleep");
        assert!(spin_beside(None, 1), "a releaser not found: spin");
    }

    #[test]
    fn a_spin_ends_at_a_change_of_either_word_or_at_its_bound() {
        let (word, epoch) = (AtomicU32::new(1), AtomicU32::new(7));
        assert!(!spin_until_changed(&word, 1, (&epoch, 7), 50_000), "bound");
        assert!(
            spin_until_changed(&word, 0, (&epoch, 7), u64::MAX),
            "word differs"
        );
        assert!(
            spin_until_changed(&word, 1, (&epoch, 6), u64::MAX),
            "epoch moved"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(5));
                word.store(2, Ordering::Release);
            });
            // A bound of a minute: only the other thread's store ends it.
            assert!(spin_until_changed(&word, 1, (&epoch, 7), 60_000_000_000));
        });
    }
}
