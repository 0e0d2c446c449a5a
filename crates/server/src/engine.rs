//! The engine: the driver thread and one audio cycle.
//!
//! Runs on the driver thread only (real-time). Each cycle:
//!
//! 1. sleep until the cycle's absolute CLOCK_MONOTONIC deadline (dummy driver);
//! 2. look back at the previous cycle: every client armed then that has not
//!    finished it is late (an xrun, reported by name); a client whose shared
//!    record holds an impossible status is reported as corrupt;
//! 3. async mode: write the previous cycle's playback to the device;
//! 4. switch to the pending graph table if any (one CAS);
//! 5. read capture into the capture ports; publish the cycle's timer fields;
//! 6. arm every active node's activation counter for this cycle and
//!    decrement the driver's downstream nodes, waking those that reach zero;
//! 7. sync mode: wait (bounded by the next deadline) for the graph's end,
//!    then write playback.
//!
//! Between 5 and 6 the transport state machine runs ([`crate::transport`]).
//! **Freewheel** (`ControlHeader::freewheel`): no clock; each cycle starts as
//! soon as the previous one ended and always waits for the whole graph
//! (bounded by [`FREEWHEEL_WAIT_NS`]), whatever the sync mode. Statistics for
//! jack_cpu_load & co are kept here too (DSP load, wake-up delays).
//!
//! At the look-back of step 2 the driver also appends cycle k-1 to the
//! profile ring (`resound_shm::profile`): its own wake-up, end and CPU
//! time and every client's signal/awake/finish/CPU and reservation figures.
//!
//! Nothing here allocates, locks or logs: events go to the control side
//! through a lock-free ring ([`RtEvent`]). In debug builds the loop body runs
//! under `assert_no_alloc`, so an allocation aborts the server in tests.

use crate::reserve::Reservations;
use crate::transport::TransportEngine;
use resound_shm::cycle::{mix_sources, signal_downstream};
use resound_shm::profile::{cycle_flags, node_flags, CycleData, NodeData, ProfileSegment};
use resound_shm::sync::{activation, futex, switch, Ordering};
use resound_shm::time::{monotonic_ns, sleep_until, thread_cpu_ns};
use resound_shm::{client_state, NodeStatus, Table, View};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Longest a freewheeling cycle waits for the graph before counting an xrun.
pub const FREEWHEEL_WAIT_NS: u64 = 1_000_000_000;
/// Cycles over which the DSP load takes its maximum (as jackd).
const LOAD_WINDOW: u32 = 32;

/// Pushes an event for the control side; counts it as lost if the ring is full
/// (the control side drains every few ms, so that means it is stalled).
fn push_event(events: &mut rtrb::Producer<RtEvent>, shared: &EngineShared, e: RtEvent) {
    if events.push(e).is_err() {
        shared.dropped_events.fetch_add(1, Ordering::Relaxed);
    }
}

/// Events from the driver thread to the control side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtEvent {
    /// A node armed in `cycle` had not finished when the next cycle began.
    Late {
        /// Cycle number.
        cycle: u64,
        /// Node slot.
        slot: u32,
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
    /// A client thread whose reservation was refused runs under the fallback policy.
    Fallback {
        /// Slot.
        slot: u32,
        /// true: SCHED_FIFO; false: SCHED_OTHER.
        fifo: bool,
    },
}

/// A client's profile row for `cycle`, from its activation record (which the
/// client may have scribbled on: the numbers are only copied, never followed)
/// and its reservation figures. Real-time safe.
fn profile_row(
    r: &resound_shm::ActivationRecord,
    res: &crate::reserve::ResStat,
    slot: u32,
    uuid: u64,
    cycle: u64,
    finished: bool,
    status: u32,
) -> NodeData {
    let triggered = r.cycle.load(Ordering::Relaxed) == cycle;
    let mut flags = if finished {
        node_flags::SIGNALLED | node_flags::AWAKE | node_flags::FINISHED
    } else if triggered {
        // Late: woken for this cycle (and maybe running), or never triggered.
        node_flags::LATE
            | node_flags::SIGNALLED
            | if status == NodeStatus::Running as u32 {
                node_flags::AWAKE
            } else {
                0
            }
    } else {
        node_flags::LATE
    };
    flags |= (res.kind.load(Ordering::Relaxed) & 3) << node_flags::KIND_SHIFT;
    let get = |bit: u32, a: &resound_shm::sync::AtomicU64| {
        if flags & bit != 0 {
            a.load(Ordering::Relaxed)
        } else {
            0
        }
    };
    NodeData {
        uuid,
        slot,
        flags,
        signal_ns: get(node_flags::SIGNALLED, &r.signal_ns),
        awake_ns: get(node_flags::AWAKE, &r.awake_ns),
        finish_ns: get(node_flags::FINISHED, &r.finish_ns),
        cpu_ns: if flags & node_flags::FINISHED != 0 {
            r.cpu_of(cycle).unwrap_or(0)
        } else {
            0
        },
        budget_ns: res.budget_ns.load(Ordering::Relaxed),
        predicted_ns: res.predicted_ns.load(Ordering::Relaxed),
    }
}

/// Dummy audio device: what it plays and what it captures.
///
/// Model of a card with one period of output and one of input buffering:
/// what the driver writes during cycle k is played during period k+1, and
/// what is played during a period comes back (with `--loopback`) as capture
/// at the start of the next. So a signal written to playback in sync mode is
/// captured two cycles later, in async mode three.
pub struct DummyDevice {
    loopback: bool,
    /// Written by the driver during the current cycle.
    out: Vec<Vec<f32>>,
    /// Being played this period.
    playing: Vec<Vec<f32>>,
    /// Recorded last period, delivered as capture now.
    captured: Vec<Vec<f32>>,
}

impl DummyDevice {
    /// A device with `playback` output channels of `max_frames`.
    pub fn new(playback: usize, max_frames: usize, loopback: bool) -> Self {
        let ch = || vec![vec![0.0f32; max_frames]; playback];
        DummyDevice {
            loopback,
            out: ch(),
            playing: ch(),
            captured: ch(),
        }
    }

    /// Period boundary: what was played is recorded, what was written starts playing.
    fn boundary(&mut self) {
        if self.loopback {
            std::mem::swap(&mut self.captured, &mut self.playing);
            std::mem::swap(&mut self.playing, &mut self.out);
        }
        for b in &mut self.out {
            b.fill(0.0);
        }
    }
}

/// Settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Sync mode (wait for the graph's end within the cycle).
    pub sync: bool,
    /// Port slots of `system:capture_N`, in channel order.
    pub capture: Vec<u32>,
    /// Port slots of `system:playback_N`, in channel order.
    pub playback: Vec<u32>,
    /// Dummy device loopback (playback comes back as capture).
    pub loopback: bool,
}

/// What the driver thread shares with the control side.
pub struct EngineShared {
    /// Set to stop the driver thread.
    pub stop: AtomicBool,
    /// True while the driver loop runs.
    pub running: AtomicBool,
    /// Scheduling the driver thread got ("SCHED_FIFO 10", or the fallback).
    pub sched: std::sync::Mutex<String>,
    /// Events lost because the ring to the control side was full.
    pub dropped_events: std::sync::atomic::AtomicU64,
    /// Per-slot reservation figures (slot 0 = driver).
    pub res: Arc<[crate::reserve::ResStat]>,
    /// Bandwidth admitted by the ledger, millionths of a CPU.
    pub ledger_ppm: std::sync::atomic::AtomicU64,
}

/// What one cycle needs to know.
#[derive(Clone, Copy)]
struct CycleArgs {
    cycle: u64,
    /// Nominal start (ns).
    start: u64,
    /// Nominal start of the next cycle (ns).
    next: u64,
    frame_time: u64,
    frames: usize,
    freewheel: bool,
    /// How late the driver woke (ns).
    delay_ns: u64,
}

/// The driver loop. Owns the device; reports through `events`.
pub struct Engine {
    view: Arc<View>,
    shared: Arc<EngineShared>,
    cfg: EngineConfig,
    device: DummyDevice,
    events: rtrb::Producer<RtEvent>,
    res: Reservations,
    /// Ports of the driver: (port slot, channel) for capture and playback.
    capture: Vec<(u32, usize)>,
    playback: Vec<(u32, usize)>,
    /// Table and cycle of the previous cycle, for the look-back.
    prev: Option<(usize, u64)>,
    /// Start (ns) and period (ns) of the previous cycle.
    prev_start: (u64, u64),
    /// Transport state machine.
    transport: TransportEngine,
    /// DSP load: largest busy time in the current window (ns), cycles in it, smoothed load (%).
    load: (u64, u32, f32),
    /// The profile ring (None: profiling off).
    profile: Option<Arc<ProfileSegment>>,
    /// The driver's own figures of the previous cycle, for its profile record.
    last: CycleData,
    /// Node rows of the cycle being recorded (capacity: every slot; never grows).
    rows: Vec<NodeData>,
}

impl Engine {
    /// Builds an engine over a view, with the driver ports named in `cfg`.
    pub fn new(
        view: Arc<View>,
        shared: Arc<EngineShared>,
        mut cfg: EngineConfig,
        events: rtrb::Producer<RtEvent>,
        res: Reservations,
        profile: Option<Arc<ProfileSegment>>,
    ) -> Engine {
        let max_frames = view.layout().caps.max_frames as usize;
        let slots = view.layout().caps.max_clients as usize;
        let device = DummyDevice::new(cfg.playback.len(), max_frames, cfg.loopback);
        let transport = TransportEngine::new(view.layout().caps.max_clients);
        let capture = std::mem::take(&mut cfg.capture);
        let playback = std::mem::take(&mut cfg.playback);
        Engine {
            view,
            shared,
            cfg,
            device,
            events,
            res,
            capture: capture
                .into_iter()
                .enumerate()
                .map(|(i, p)| (p, i))
                .collect(),
            playback: playback
                .into_iter()
                .enumerate()
                .map(|(i, p)| (p, i))
                .collect(),
            prev: None,
            prev_start: (0, 0),
            transport,
            load: (0, 0, 0.0),
            profile,
            last: CycleData::default(),
            rows: Vec::with_capacity(slots),
        }
    }

    fn emit(&mut self, e: RtEvent) {
        push_event(&mut self.events, &self.shared, e);
    }

    /// Runs until `shared.stop` is set. Call on the dedicated driver thread.
    pub fn run(mut self) {
        let sched = {
            let (ev, sh) = (&mut self.events, &self.shared);
            self.res.start_driver(0, &mut |e| push_event(ev, sh, e))
        };
        *self.shared.sched.lock().unwrap_or_else(|e| e.into_inner()) = sched;
        self.shared.running.store(true, Ordering::Release);
        let view = self.view.clone();
        let h = view.header();
        let start = monotonic_ns();
        let mut deadline = start;
        let mut frame_time: u64 = 0;
        let mut was_freewheeling = false;
        while !self.shared.stop.load(Ordering::Acquire) {
            let freewheel = h.freewheel.load(Ordering::Acquire) != 0;
            // The first freewheeling cycle still starts on the clock (the
            // previous cycle had its period to finish); the following ones
            // start as soon as the graph is done; afterwards the clock
            // restarts now.
            let back_to_back = freewheel && was_freewheeling;
            if back_to_back || (!freewheel && was_freewheeling) {
                deadline = monotonic_ns();
            }
            if freewheel != was_freewheeling {
                self.res.set_freewheel(freewheel);
            }
            was_freewheeling = freewheel;
            if !back_to_back {
                sleep_until(deadline);
            }
            let cpu0 = thread_cpu_ns();
            let now = monotonic_ns();
            let frames = h.buffer_frames.load(Ordering::Relaxed) as u64;
            let rate = h.sample_rate.load(Ordering::Relaxed).max(1) as u64;
            let period = frames * 1_000_000_000 / rate;
            let cycle = h.cycle.load(Ordering::Relaxed) + 1;
            let delay_ns = now.saturating_sub(deadline);
            if !freewheel {
                h.max_delayed_us
                    .fetch_max((delay_ns / 1000) as u32, Ordering::Relaxed);
            }
            let mut flags = 0;
            if !freewheel && now > deadline + period {
                flags |= cycle_flags::DRIVER_LATE;
                // Woke more than a period late (machine stalled): resync
                // instead of running a burst of back-to-back cycles.
                let missed = (now - deadline) / period;
                deadline += missed * period;
                frame_time += missed * frames;
                h.xruns.fetch_add(1, Ordering::Relaxed);
                h.xrun_delayed_us
                    .store((delay_ns / 1000) as u32, Ordering::Relaxed);
                self.emit(RtEvent::DriverLate {
                    cycle,
                    late_ns: now - deadline,
                });
                let (ev, sh) = (&mut self.events, &self.shared);
                self.res.on_xrun(0, &mut |e| push_event(ev, sh, e));
            }
            let next = deadline + period;
            assert_no_alloc::assert_no_alloc(|| {
                self.cycle(
                    &view,
                    CycleArgs {
                        cycle,
                        start: deadline,
                        next,
                        frame_time,
                        frames: frames as usize,
                        freewheel,
                        delay_ns,
                    },
                )
            });
            let end = monotonic_ns();
            let cpu = thread_cpu_ns().saturating_sub(cpu0);
            if let Some(r) = view.record(0) {
                r.store_cpu(cycle, cpu);
            }
            let s0 = &self.shared.res[0];
            self.last = CycleData {
                cycle,
                start_ns: deadline,
                awake_ns: now,
                end_ns: end,
                cpu_ns: cpu,
                period_ns: period,
                frames: frames as u32,
                flags,
                budget_ns: s0.budget_ns.load(Ordering::Relaxed),
                predicted_ns: s0.predicted_ns.load(Ordering::Relaxed),
            };
            frame_time += frames;
            deadline = next;
        }
        self.shared.running.store(false, Ordering::Release);
    }

    /// One cycle (real-time, no allocation).
    fn cycle(&mut self, view: &View, a: CycleArgs) {
        let CycleArgs {
            cycle,
            start,
            next,
            frame_time,
            frames,
            freewheel,
            delay_ns,
        } = a;
        let h = view.header();
        // 2. Look back at the previous cycle; run the reservation controllers on it.
        let prev_cycle = self.prev.map_or(0, |(_, c)| c);
        if let Some((pidx, pcycle)) = self.prev {
            if self.look_back(view, view.table(pidx), pcycle) {
                h.xrun_delayed_us
                    .store((delay_ns / 1000) as u32, Ordering::Relaxed);
            }
        }
        self.prev_start = (start, next - start);
        {
            let (ev, sh) = (&mut self.events, &self.shared);
            self.res
                .cycle_begin(view, prev_cycle, &mut |e| push_event(ev, sh, e));
            sh.ledger_ppm
                .store((self.res.ledger_used() * 1e6) as u64, Ordering::Relaxed);
        }
        // Period boundary of the (dummy) device.
        self.device.boundary();
        // 3. Async: last cycle's output goes out now, to be played next period.
        if !self.sync() {
            if let Some((pidx, _)) = self.prev {
                self.write_playback(view, view.table(pidx), frames);
            }
        }
        // 4. Switch graph.
        let (cur, _) = switch::try_switch(&h.switch);
        let table = view.table(cur);
        // 5. Capture and timer.
        self.read_capture(view, frames);
        h.timer_seq.fetch_add(1, Ordering::AcqRel);
        h.cycle.store(cycle, Ordering::Release);
        h.cycle_start_ns.store(start, Ordering::Release);
        h.frame_time.store(frame_time, Ordering::Release);
        h.next_start_ns.store(next, Ordering::Release);
        h.cycle_frames.store(frames as u32, Ordering::Release);
        h.timer_seq.fetch_add(1, Ordering::AcqRel);
        // Transport of this cycle, before anyone runs.
        self.transport
            .cycle(view, &table, cycle, frames as u32, start);
        // 6. Arm and trigger.
        let tag = cycle as u32;
        let hw = table.client_hw();
        for slot in 1..hw {
            if table.client_state(slot) == client_state::ACTIVE {
                if let Some(r) = view.record(slot) {
                    r.status
                        .store(NodeStatus::Waiting as u32, Ordering::Relaxed);
                    activation::reset(&r.counter, tag, table.init_count(slot));
                }
            }
        }
        let Some(me) = view.record(0) else { return };
        let ends = table.init_count(0);
        activation::reset(&me.counter, tag, ends);
        me.cycle.store(cycle, Ordering::Relaxed);
        let seen = me.trigger.load(Ordering::Acquire);
        signal_downstream(view, &table, 0, cycle);
        self.prev = Some((cur, cycle));
        // 7. Sync (or freewheel): wait for the graph's end, bounded by the next
        // deadline (freewheel: by FREEWHEEL_WAIT_NS).
        if self.sync() || freewheel {
            let next = if freewheel {
                if ends == 0 {
                    // Nothing to run: do not spin, keep the pace of the clock.
                    sleep_until(next);
                }
                monotonic_ns() + FREEWHEEL_WAIT_NS
            } else {
                next
            };
            if ends > 0 {
                let done = || {
                    activation::count(me.counter.load(Ordering::Acquire)) == 0
                        && activation::tag(me.counter.load(Ordering::Acquire)) == tag
                };
                let mut seen = seen;
                while !done() {
                    match futex::wait_changed(&me.trigger, seen, Some(next)) {
                        futex::Wait::Changed(v) => seen = v,
                        futex::Wait::TimedOut => break,
                    }
                }
            }
            self.write_playback(view, table, frames);
        }
    }

    fn sync(&self) -> bool {
        self.cfg.sync
    }

    /// Checks the previous cycle; returns whether it had an xrun.
    fn look_back(&mut self, view: &View, table: Table<'_>, cycle: u64) -> bool {
        let hw = table.client_hw();
        let mut any_late = false;
        let mut end = 0u64;
        let mut any_active = false;
        self.rows.clear();
        for slot in 1..hw {
            if table.client_state(slot) != client_state::ACTIVE {
                continue;
            }
            let Some(r) = view.record(slot) else { continue };
            any_active = true;
            let status = r.status.load(Ordering::Relaxed);
            if NodeStatus::from_raw(status).is_none() {
                self.emit(RtEvent::Corrupt { slot, status });
                continue;
            }
            let finished = r.finished_cycle.load(Ordering::Acquire) == cycle;
            if finished {
                end = end.max(r.finish_ns.load(Ordering::Relaxed));
            }
            if self.profile.is_some() && self.rows.len() < self.rows.capacity() {
                self.rows.push(profile_row(
                    r,
                    &self.shared.res[slot as usize],
                    slot,
                    table.client_uuid(slot),
                    cycle,
                    finished,
                    status,
                ));
            }
            if !finished {
                any_late = true;
                self.emit(RtEvent::Late { cycle, slot });
                // Only a node that had its inputs (was woken) and still did not
                // finish is short of budget; one still waiting was late because
                // of its upstream, and bumping it too would compound the bumps
                // along a chain.
                let woken = matches!(
                    NodeStatus::from_raw(status),
                    Some(NodeStatus::Triggered | NodeStatus::Running)
                );
                let (ev, sh) = (&mut self.events, &self.shared);
                self.res
                    .on_late(slot, woken, &mut |e| push_event(ev, sh, e));
            }
        }
        if any_late {
            view.header().xruns.fetch_add(1, Ordering::Relaxed);
            self.emit(RtEvent::CycleChecked { cycle });
        }
        if let Some(p) = &self.profile {
            if self.last.cycle == cycle {
                let mut c = self.last;
                if any_late {
                    c.flags |= cycle_flags::XRUN;
                }
                p.ring().write_cycle(&c, self.rows.iter().copied());
            }
        }
        // DSP load: how much of the period the graph kept busy (jackd's rule:
        // the worst cycle of a window, smoothed).
        let (pstart, pperiod) = self.prev_start;
        let busy = if any_active {
            end.saturating_sub(pstart)
        } else {
            view.record(0).map_or(0, |r| r.last_cpu().1)
        };
        let (max, n, load) = &mut self.load;
        *max = (*max).max(busy);
        *n += 1;
        if *n >= LOAD_WINDOW && pperiod > 0 {
            let inst = (*max as f32 / pperiod as f32 * 100.0).clamp(0.0, 100.0);
            *load = 0.5 * inst + 0.5 * *load;
            view.header()
                .cpu_load
                .store(load.to_bits(), Ordering::Relaxed);
            (*max, *n) = (0, 0);
        }
        any_late
    }

    fn read_capture(&mut self, view: &View, frames: usize) {
        let n = self.device.playing.len();
        for &(port, ch) in &self.capture {
            let Some(dst) = view.port_buffer(port) else {
                continue;
            };
            // SAFETY: dst points at a port buffer of max_frames ≥ frames f32 in
            // the shared segment; capture ports are written only by the driver.
            let dst = unsafe { std::slice::from_raw_parts_mut(dst, frames) };
            if self.device.loopback && ch < n {
                dst.copy_from_slice(&self.device.captured[ch][..frames]);
            } else {
                dst.fill(0.0);
            }
        }
    }

    fn write_playback(&mut self, view: &View, table: Table<'_>, frames: usize) {
        for &(port, ch) in &self.playback {
            let out = &mut self.device.out[ch][..frames];
            out.fill(0.0);
            mix_sources(view, &table, port, out);
        }
    }
}
