//! One audio cycle, as a short sequence of named steps:
//!
//! 1. (before: the driver's wait, in [`crate::engine`], and at its
//!    wake-up the lines this cycle reads and writes fetched at once,
//!    see `warm.rs`); first, the reservation controllers' windows are
//!    prefetched, to arrive in the caches during the look-back;
//! 2. look back at the previous cycle: a. one [`Verdict`] per active node
//!    (`judge_prev`, a copy of its record, which the arming overwrites);
//!    b. xrun events, profile record, DSP load (`look_back`);
//! 3. the reservation controllers on the verdicts (first, a light thread
//!    that woke far later than usual leaves its light shape);
//! 4. async mode: the previous cycle's playback goes to the driver;
//! 5. switch to the pending graph table if any (one CAS);
//! 6. capture into the capture ports, publish the cycle's timer fields;
//! 7. the transport state machine;
//! 8. release the cycle to the driver's downstream nodes (its done word),
//!    and after a graph switch wake every sleeping process thread; then
//!    the throttle rescue's looks at late threads (procfs reads);
//! 9. sync mode or freewheel: wait for the graph's end (bounded by the
//!    next cycle's start; freewheeling, by a long bound or, for offline
//!    rendering, until it is done), then playback.
//!
//! Runs on the driver thread (real-time): no allocation, lock or log.

use crate::clock::Clock;
use crate::driver::Driver;
use crate::engine::{CycleArgs, Engine, FREEWHEEL_WAIT_NS};
use crate::events::RtEvent;
use crate::load::LoadStats;
use crate::verdict::{judge_all, Outcome, Verdict};
use resound_shm::cycle::{mix_sources, readiness, release_to_sleepers, Readiness};
use resound_shm::profile::cycle_flags;
use resound_shm::sync::{futex, switch, Ordering};
use resound_shm::{Table, Timer, View};

impl<D: Driver, C: Clock> Engine<D, C> {
    /// One cycle. Real-time safe.
    ///
    /// The whole look-back and the controllers run before the graph is
    /// triggered. Running them after the trigger, while the clients run,
    /// woke the first client a little earlier but lost more blocks on this
    /// 2-CPU machine (the driver's bookkeeping competes with the chain for
    /// a CPU): 1586 lost blocks against 806 over the same 4 alternated
    /// `resound bench jackd --load 1` runs, and more lost chain cycles in
    /// two-minute soaks; see docs/bench-vs-jackd2.md.
    pub(crate) fn cycle(&mut self, view: &View, a: CycleArgs) {
        self.res.prefetch();
        let judged = self.judge_prev(view);
        self.digest_prev(view, a, judged);
        if !self.sync {
            self.async_playback(view, a.frames);
        }
        let (cur, switched, table) = switch_graph(view);
        self.read_capture(view, &table, a.frames);
        publish_timer(view, a);
        self.transport
            .cycle(view, &table, a.cycle, a.frames as u32, a.start);
        let started = start_graph(view, &table, a.cycle, switched);
        let (events, clock) = (&mut self.events, &self.clock);
        let since_wake = || clock.now_ns().saturating_sub(a.awake_ns);
        self.res.look_for_holds(since_wake, &mut |e| events.push(e));
        if !started {
            return;
        }
        self.prev = Some((cur, a.cycle));
        if self.sync || a.freewheel {
            let complete = self.wait_for_graph(view, &table, a);
            self.playback_cut = (!complete && !a.freewheel).then(|| (a.cycle, self.clock.now_ns()));
            self.write_playback(view, table, a.frames);
        }
    }

    /// Step 2a: the previous cycle's verdicts (cleared before the first);
    /// returns its number. Real-time safe.
    fn judge_prev(&mut self, view: &View) -> Option<u64> {
        let Some((pidx, pcycle)) = self.prev else {
            self.verdicts.clear();
            return None;
        };
        let mut verdicts = std::mem::take(&mut self.verdicts);
        judge_all(view, view.table(pidx), pcycle, &mut verdicts);
        if let Some((cycle, cut_ns)) = self.playback_cut.take() {
            if cycle == pcycle {
                verdicts.iter_mut().for_each(|v| v.missed_playback(cut_ns));
            }
        }
        self.warm.note(view, &verdicts);
        self.verdicts = verdicts;
        Some(pcycle)
    }

    /// Steps 2b and 3: the judged cycle's consumers, then the controllers.
    /// Real-time safe.
    fn digest_prev(&mut self, view: &View, a: CycleArgs, judged: Option<u64>) {
        let judged_start = self.prev_start.0;
        if let Some(pcycle) = judged {
            if self.look_back(view, pcycle) {
                view.header()
                    .xrun_delayed_us
                    .store((a.delay_ns / 1000) as u32, Ordering::Relaxed);
            }
        }
        self.prev_start = (a.start, a.next - a.start);
        self.run_controllers(view, judged.unwrap_or(0), judged_start);
    }

    /// Hands the judged cycle's verdicts to every consumer; returns whether
    /// it had an xrun. Real-time safe.
    pub(crate) fn look_back(&mut self, view: &View, cycle: u64) -> bool {
        let verdicts = std::mem::take(&mut self.verdicts);
        let any_late = self.report_late(&verdicts);
        if any_late {
            view.header().xruns.fetch_add(1, Ordering::Relaxed);
            self.emit(RtEvent::CycleChecked { cycle });
        }
        self.write_profile(&verdicts, cycle, any_late);
        let (start, period) = self.prev_start;
        let driver_cpu = view.record(0).map_or(0, |r| r.last_cpu().1);
        let busy = LoadStats::busy_ns(&verdicts, start, driver_cpu);
        self.load.add(busy, period, view.header());
        self.verdicts = verdicts;
        any_late
    }

    /// Corrupt and late nodes become events; a late node is the reservation
    /// controller's xrun. Returns whether any was late. Real-time safe.
    fn report_late(&mut self, verdicts: &[Verdict]) -> bool {
        let mut any_late = false;
        for v in verdicts {
            let woken = match v.outcome {
                Outcome::Finished => continue,
                Outcome::Corrupt(status) => {
                    self.emit(RtEvent::Corrupt {
                        slot: v.slot,
                        status,
                    });
                    continue;
                }
                Outcome::Woken => true,
                Outcome::Waiting => false,
            };
            any_late = true;
            let start = self.prev_start.0;
            let us = |on: bool, t: u64, from: u64| {
                if on {
                    (t.saturating_sub(from) / 1000).min(u32::MAX as u64 - 1) as u32
                } else {
                    u32::MAX
                }
            };
            self.emit(RtEvent::Late {
                cycle: v.cycle,
                slot: v.slot,
                woken,
                signal_us: us(v.signalled, v.signal_ns, start),
                wake_delay_us: us(v.awake, v.awake_ns, v.signal_ns),
            });
            // Only a node that had its inputs (was woken) and still did not
            // finish is short of budget; one still waiting was late because
            // of its upstream, and bumping it too would compound the bumps
            // along a chain.
            let events = &mut self.events;
            self.res
                .on_late(v.slot, woken, v.last_finished, &mut |e| events.push(e));
        }
        any_late
    }

    /// Appends the judged cycle to the profile ring (if profiling). Real-time safe.
    fn write_profile(&self, verdicts: &[Verdict], cycle: u64, any_late: bool) {
        let Some(p) = &self.profile else { return };
        if self.last.cycle != cycle {
            return;
        }
        let mut c = self.last;
        if any_late {
            c.flags |= cycle_flags::XRUN;
        }
        let res = &self.shared.res;
        let rows = verdicts
            .iter()
            .filter(|v| !matches!(v.outcome, Outcome::Corrupt(_)))
            .map(|v| {
                let r = &res[v.slot as usize];
                v.profile_row(
                    r.kind.load(Ordering::Relaxed),
                    r.budget_ns.load(Ordering::Relaxed),
                    r.predicted_ns.load(Ordering::Relaxed),
                )
            });
        // Counted first: the ring writes an exact number of rows.
        let n = rows.clone().count();
        p.ring().write_cycle(
            &c,
            ExactLen {
                inner: rows,
                left: n,
            },
        );
    }

    /// Step 3: the controllers on the judged cycle, which started at
    /// `prev_start`; first, a light thread that woke far later than usual in
    /// it leaves its light shape before this cycle wakes it. Real-time safe.
    fn run_controllers(&mut self, view: &View, prev_cycle: u64, prev_start: u64) {
        let period = view.header().period_ns.load(Ordering::Relaxed);
        let driver_cpu = view.record(0).and_then(|r| r.cpu_of(prev_cycle));
        let (events, shared) = (&mut self.events, &self.shared);
        self.res
            .note_wakes(prev_start, &self.verdicts, &mut |e| events.push(e));
        self.res
            .cycle_begin(period, driver_cpu, &self.verdicts, &mut |e| events.push(e));
        shared
            .ledger_ppm
            .store((self.res.ledger_used() * 1e6) as u64, Ordering::Relaxed);
        shared
            .departed_ppm
            .store((self.res.ledger_departed() * 1e6) as u64, Ordering::Relaxed);
    }

    /// Step 4 (async): the previous cycle's output goes out now, to be played
    /// next period. Real-time safe.
    fn async_playback(&mut self, view: &View, frames: usize) {
        if let Some((pidx, _)) = self.prev {
            self.write_playback(view, view.table(pidx), frames);
        }
    }

    /// Step 6: the driver's capture into the capture ports. Real-time safe.
    fn read_capture(&mut self, view: &View, table: &Table<'_>, frames: usize) {
        for &(port, ch) in &self.capture {
            let Some(dst) = view.port_buffer_in(table, port) else {
                continue;
            };
            // SAFETY: dst points at a port buffer of max_frames ≥ frames f32
            // in the driver's own node segment (capture ports belong to the
            // driver, slot 0, mapped read-write only here); capture ports are
            // written only by the driver thread, which is us, and no other
            // reference to this buffer lives past this statement.
            let dst = unsafe { std::slice::from_raw_parts_mut(dst, frames) };
            self.driver.capture(ch, dst);
        }
    }

    /// Mixes every playback port's sources and hands them to the driver.
    /// Real-time safe.
    fn write_playback(&mut self, view: &View, table: Table<'_>, frames: usize) {
        for &(port, ch) in &self.playback {
            let out = &mut self.mix[..frames];
            out.fill(0.0);
            mix_sources(view, &table, port, out);
            self.driver.playback(ch, out);
        }
        self.driver.flush();
    }

    /// Step 9: waits until every end of the graph (the driver's upstream
    /// nodes) released the cycle, bounded by the next cycle's start;
    /// freewheeling, by [`FREEWHEEL_WAIT_NS`] or until the graph is done
    /// (see [`Self::keep_waiting`]). A stopping server is noticed at the
    /// latest at the bound. Returns whether the graph finished. Real-time
    /// safe.
    fn wait_for_graph(&mut self, view: &View, table: &Table<'_>, a: CycleArgs) -> bool {
        if a.freewheel && table.up_count(0) == 0 {
            // Nothing to run: do not spin, keep the pace of the clock.
            self.clock.sleep_until(a.next);
            return true;
        }
        let tag = a.cycle as u32;
        let mut deadline = self.graph_deadline(a);
        loop {
            let (word, seen) = match readiness(view, table, 0, tag) {
                Readiness::Ready { .. } | Readiness::Ahead => return true,
                Readiness::Behind(word, seen) => (word, seen),
            };
            match self.clock.wait_changed(word, seen, Some(deadline)) {
                futex::Wait::Changed(_) if self.shared.stop.load(Ordering::Acquire) => {
                    return false
                }
                futex::Wait::Changed(_) => {}
                futex::Wait::TimedOut if self.keep_waiting(view, a) => {
                    deadline = self.graph_deadline(a);
                }
                futex::Wait::TimedOut => return false,
            }
        }
    }

    /// Until when the graph is waited for in one go: the next cycle's start,
    /// freewheeling [`FREEWHEEL_WAIT_NS`] from now. Real-time safe.
    fn graph_deadline(&self, a: CycleArgs) -> u64 {
        if a.freewheel {
            self.clock.now_ns() + FREEWHEEL_WAIT_NS
        } else {
            a.next
        }
    }

    /// With a driver that asks for it (offline rendering), a freewheeling
    /// cycle ends only with the whole graph (deterministic renders), unless
    /// the server stops or a new graph is pending (a client left or the
    /// wiring changed: the old graph may never finish). Real-time safe.
    fn keep_waiting(&self, view: &View, a: CycleArgs) -> bool {
        let pending =
            view.header().switch.load(Ordering::Acquire) & (switch::PENDING | switch::WRITING);
        a.freewheel
            && self.driver.freewheel_waits_for_graph()
            && pending == 0
            && !self.shared.stop.load(Ordering::Acquire)
    }
}

/// Step 5: switches to the pending graph table, if any; returns the
/// current table's index, whether it switched, and the table. Real-time safe.
fn switch_graph(view: &View) -> (usize, bool, Table<'_>) {
    let (cur, switched) = switch::try_switch(&view.header().switch);
    (cur, switched, view.table(cur))
}

/// Step 6: the cycle's timer fields, under the timer seqlock. Real-time safe.
fn publish_timer(view: &View, a: CycleArgs) {
    view.header().publish_timer(&Timer {
        cycle: a.cycle,
        start_ns: a.start,
        frame_time: a.frame_time,
        next_start_ns: a.next,
        frames: a.frames as u32,
    });
}

/// Step 8: releases `cycle` to the nodes the driver starts (its done word;
/// every node waits for its upstream nodes' words, so nothing of theirs is
/// written here; the `FUTEX_WAKE` only if a node sleeps on the word, see
/// [`release_to_sleepers`]), then, after a graph switch, bumps the header's epoch so
/// that every sleeping process thread looks at the new table (it may be
/// waiting for a node that left, or have joined the graph). False without
/// a driver record. Real-time safe.
fn start_graph(view: &View, table: &Table<'_>, cycle: u64, switched: bool) -> bool {
    let Some(me) = view.record(0) else {
        return false;
    };
    me.cycle.store(cycle, Ordering::Relaxed);
    me.finished_cycle.store(cycle, Ordering::Release);
    release_to_sleepers(view, table, me, cycle);
    if switched {
        futex::bump_and_wake(&view.header().epoch);
    }
    true
}

/// An iterator that knows its length (the profile ring writes an exact
/// number of rows). Real-time safe.
struct ExactLen<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator> Iterator for ExactLen<I> {
    type Item = I::Item;
    /// The next row. Real-time safe.
    fn next(&mut self) -> Option<I::Item> {
        let x = self.inner.next()?;
        self.left -= 1;
        Some(x)
    }
    /// Exactly the rows left. Real-time safe.
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator> ExactSizeIterator for ExactLen<I> {}
