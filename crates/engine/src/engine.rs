//! The engine: the driver thread's loop around one audio cycle.
//!
//! [`Engine`] owns everything the driver thread touches: the [`Driver`]
//! (device and pacing), the [`Clock`], the reservations, the transport, the
//! load statistics and the profile ring writer. [`Engine::run`] loops until
//! [`EngineShared::stop`]: wait for the driver, run the cycle
//! ([`crate::cycle`]) under `assert_no_alloc` in debug builds, record the
//! driver's own figures. Nothing here allocates, locks or logs once the loop
//! runs: events go to the control side through the lock-free ring
//! ([`RtEvent`]).
//!
//! **Freewheel** (`ControlHeader::freewheel`): the driver does not pace;
//! each cycle starts as soon as the previous one ended and always waits for
//! the whole graph, whatever the sync mode, bounded by [`FREEWHEEL_WAIT_NS`];
//! a driver that renders offline ([`Driver::freewheel_waits_for_graph`])
//! keeps waiting past it unless the server stops or the graph changed (a
//! client left), so a render never runs ahead of a slow client.
//!
//! Runs on the dedicated driver thread (real-time).

use crate::clock::Clock;
use crate::driver::{Driver, Fault, Period, Wake};
use crate::events::{EventSink, RtEvent};
use crate::load::LoadStats;
use crate::reserve::Reservations;
use crate::shared::EngineShared;
use crate::transport::TransportEngine;
use crate::verdict::Verdict;
use crate::warm::Warm;
use resound_shm::profile::{cycle_flags, CycleData, ProfileSegment};
use resound_shm::sync::{current_cpu, Ordering};
use resound_shm::View;
use std::sync::Arc;

/// How long a freewheeling cycle waits for the graph before it ends (or, for
/// an offline render, looks whether the server stops or the graph changed).
pub const FREEWHEEL_WAIT_NS: u64 = 1_000_000_000;

/// Settings of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Sync mode (wait for the graph's end within the cycle).
    pub sync: bool,
    /// Port slots of `system:capture_N`, in channel order.
    pub capture: Vec<u32>,
    /// Port slots of `system:playback_N`, in channel order.
    pub playback: Vec<u32>,
}

/// What one cycle needs to know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CycleArgs {
    pub(crate) cycle: u64,
    /// Nominal start (ns).
    pub(crate) start: u64,
    /// Nominal start of the next cycle (ns).
    pub(crate) next: u64,
    pub(crate) frame_time: u64,
    pub(crate) frames: usize,
    pub(crate) freewheel: bool,
    /// How late the driver woke (ns).
    pub(crate) delay_ns: u64,
    /// When the driver thread woke for this cycle (ns, the clock's time).
    pub(crate) awake_ns: u64,
}

/// The driver loop. Owns the driver and the clock; reports through its event ring.
pub struct Engine<D: Driver, C: Clock> {
    pub(crate) view: Arc<View>,
    pub(crate) shared: Arc<EngineShared>,
    pub(crate) sync: bool,
    pub(crate) driver: D,
    pub(crate) clock: C,
    pub(crate) events: EventSink,
    pub(crate) res: Reservations,
    /// Ports of the driver: (port slot, channel) for capture and playback.
    pub(crate) capture: Vec<(u32, usize)>,
    pub(crate) playback: Vec<(u32, usize)>,
    /// One channel's mix, handed to the driver (max_frames).
    pub(crate) mix: Vec<f32>,
    /// Table and cycle of the previous cycle, for the look-back.
    pub(crate) prev: Option<(usize, u64)>,
    /// Sync mode: the cycle whose graph had not finished when the driver
    /// stopped waiting and took its playback, and when (the clock's ns);
    /// its look-back counts the nodes that finished after that as late.
    pub(crate) playback_cut: Option<(u64, u64)>,
    /// Start (ns) and period (ns) of the previous cycle.
    pub(crate) prev_start: (u64, u64),
    /// Transport state machine.
    pub(crate) transport: TransportEngine,
    /// DSP load statistics.
    pub(crate) load: LoadStats,
    /// The profile ring (None: profiling off).
    pub(crate) profile: Option<Arc<ProfileSegment>>,
    /// What the next cycle reads and writes, fetched at its wake-up.
    pub(crate) warm: Warm,
    /// The driver's own figures of the previous cycle, for its profile record.
    pub(crate) last: CycleData,
    /// Look-back verdicts of the previous cycle (capacity: every slot; never grows).
    pub(crate) verdicts: Vec<Verdict>,
    /// Frame time of the next cycle.
    frame_time: u64,
    /// The previous cycle was freewheeling.
    was_freewheeling: bool,
    /// The thread's CPU time at the end of the previous cycle: a cycle's
    /// CPU is the difference to the next end, one clock read per cycle and
    /// none before the graph is triggered (it includes the driver's own
    /// wait and wake-up, which its reservation pays for too).
    cpu_mark: u64,
}

fn channels(ports: Vec<u32>) -> Vec<(u32, usize)> {
    ports.into_iter().enumerate().map(|(i, p)| (p, i)).collect()
}

impl<D: Driver, C: Clock> Engine<D, C> {
    /// Builds an engine over a view, with the driver ports named in `cfg`
    /// (allocates everything the loop needs).
    pub fn new(
        view: Arc<View>,
        shared: Arc<EngineShared>,
        cfg: EngineConfig,
        driver: D,
        clock: C,
        events: rtrb::Producer<RtEvent>,
        res: Reservations,
    ) -> Self {
        let caps = view.layout().caps;
        Engine {
            shared,
            sync: cfg.sync,
            driver,
            clock,
            events: EventSink::new(events),
            res: res.with_budget_board(view.clone()),
            capture: channels(cfg.capture),
            playback: channels(cfg.playback),
            mix: vec![0.0; caps.max_frames as usize],
            prev: None,
            playback_cut: None,
            prev_start: (0, 0),
            transport: TransportEngine::new(caps.max_clients),
            load: LoadStats::default(),
            profile: None,
            warm: Warm::new(caps.max_clients as usize),
            last: CycleData::default(),
            verdicts: Vec::with_capacity(caps.max_clients as usize),
            frame_time: 0,
            was_freewheeling: false,
            cpu_mark: 0,
            view,
        }
    }

    /// Records every cycle into this profile ring.
    pub fn with_profile(mut self, profile: Option<Arc<ProfileSegment>>) -> Self {
        self.profile = profile;
        self
    }

    /// Pushes an event for the control side. Real-time safe.
    pub(crate) fn emit(&mut self, e: RtEvent) {
        self.events.push(e);
    }

    /// Prepares the driver thread and the device (not real-time): the
    /// driver's scheduling, then open and start. False if the device failed.
    pub fn start(&mut self) -> bool {
        let events = &mut self.events;
        let sched = self.res.start_driver(0, &mut |e| events.push(e));
        *self.shared.sched.lock().unwrap_or_else(|e| e.into_inner()) = sched;
        self.cpu_mark = self.clock.thread_cpu_ns();
        let max_frames = self.mix.len();
        let started = self
            .driver
            .open(max_frames)
            .and_then(|_| self.driver.start(self.clock.now_ns()));
        match started {
            Ok(()) => true,
            Err(fault) => {
                self.emit(RtEvent::DriverFault { cycle: 0, fault });
                false
            }
        }
    }

    /// Runs until `shared.stop` is set (or the device is lost). Call on the
    /// dedicated driver thread.
    pub fn run(mut self) {
        if self.start() {
            self.shared.running.store(true, Ordering::Release);
            let view = self.view.clone();
            while !self.shared.stop.load(Ordering::Acquire) {
                if !self.step_on(&view) {
                    break;
                }
            }
            self.driver.stop();
        }
        self.shared.running.store(false, Ordering::Release);
    }

    /// One turn of the loop: wait for the driver, run the cycle, record the
    /// driver's figures. False when the device is lost. Real-time safe.
    pub fn step(&mut self) -> bool {
        let view = self.view.clone();
        self.step_on(&view)
    }

    /// [`Engine::step`] on the engine's own view, which the loop holds once
    /// for the whole run (no reference-count traffic per cycle). Real-time safe.
    fn step_on(&mut self, view: &View) -> bool {
        self.res.start_cycle();
        let h = view.header();
        let freewheel = h.freewheel.load(Ordering::Acquire) != 0;
        if freewheel != self.was_freewheeling {
            let events = &mut self.events;
            self.res.set_freewheel(freewheel, &mut |e| events.push(e));
            // Published only now: client threads drop their real-time
            // scheduling on seeing it, and no update gives it back after.
            h.freewheel_in_effect
                .store(freewheel as u32, Ordering::Release);
        }
        self.was_freewheeling = freewheel;
        let frames = h.buffer_frames.load(Ordering::Relaxed);
        let rate = h.sample_rate.load(Ordering::Relaxed).max(1);
        let cycle = h.cycle.load(Ordering::Relaxed) + 1;
        let period = Period {
            frames,
            rate,
            freewheel,
        };
        let wake = match self.driver.wait(&self.clock, period) {
            Ok(w) => w,
            Err(fault) => return self.on_fault(cycle, fault),
        };
        self.warm
            .fetch(self.profile.as_deref(), self.verdicts.len());
        // A client woken early for the release spins for it only on
        // another CPU than the driver's.
        if let Some(own) = view.record(0) {
            own.mark_run_cpu(current_cpu());
        }
        if self.driver.take_resumed() {
            self.emit(RtEvent::DriverResumed { cycle });
        }
        let flags = self.check_wake(cycle, &wake, frames, freewheel);
        let args = CycleArgs {
            cycle,
            start: wake.start_ns,
            next: wake.next_ns,
            frame_time: self.frame_time,
            frames: frames as usize,
            freewheel,
            delay_ns: wake.delay_ns,
            awake_ns: wake.awake_ns,
        };
        assert_no_alloc::assert_no_alloc(|| self.cycle(view, args));
        let cpu_now = self.clock.thread_cpu_ns();
        let cpu = cpu_now.saturating_sub(self.cpu_mark);
        self.cpu_mark = cpu_now;
        self.record_driver(view, &args, cpu, flags);
        self.frame_time += frames as u64;
        let lost = self.events.take_lost();
        if lost > 0 {
            self.shared
                .dropped_events
                .fetch_add(lost, Ordering::Relaxed);
        }
        true
    }

    /// Wake-up statistics; a resync (the driver woke more than a period late)
    /// is an xrun of the driver; a light driver thread that woke far later
    /// than usual leaves its light shape before it sleeps again. Returns the
    /// cycle's profile flags. Real-time safe.
    fn check_wake(&mut self, cycle: u64, wake: &Wake, frames: u32, freewheel: bool) -> u32 {
        let h = self.view.header();
        if !freewheel {
            h.max_delayed_us
                .fetch_max((wake.delay_ns / 1000) as u32, Ordering::Relaxed);
            let events = &mut self.events;
            self.res
                .note_wake(0, wake.delay_ns, &mut |e| events.push(e));
        }
        if wake.skipped == 0 {
            return 0;
        }
        self.frame_time += wake.skipped * frames as u64;
        h.xruns.fetch_add(1, Ordering::Relaxed);
        h.xrun_delayed_us
            .store((wake.delay_ns / 1000) as u32, Ordering::Relaxed);
        // How late after the cycle it should have started (the resynced
        // start is a whole number of periods later than that).
        self.emit(RtEvent::DriverLate {
            cycle,
            late_ns: wake.delay_ns,
        });
        let events = &mut self.events;
        self.res.on_xrun(0, &mut |e| events.push(e));
        cycle_flags::DRIVER_LATE
    }

    /// The driver's own figures of the cycle: its CPU time in its activation
    /// record, its profile record kept for the next look-back. Real-time safe.
    fn record_driver(&mut self, view: &View, a: &CycleArgs, cpu: u64, flags: u32) {
        if let Some(r) = view.record(0) {
            r.store_cpu(a.cycle, cpu);
        }
        let s0 = &self.shared.res[0];
        self.last = CycleData {
            cycle: a.cycle,
            start_ns: a.start,
            awake_ns: a.awake_ns,
            end_ns: self.clock.now_ns(),
            cpu_ns: cpu,
            period_ns: a.next - a.start,
            frames: a.frames as u32,
            flags,
            budget_ns: s0.budget_ns.load(Ordering::Relaxed),
            predicted_ns: s0.predicted_ns.load(Ordering::Relaxed),
        };
    }

    /// A driver fault: reported (an xrun counts as one), then recovered from.
    /// False if the device cannot recover, or the stream ended (the loop
    /// stops). Real-time safe.
    fn on_fault(&mut self, cycle: u64, fault: Fault) -> bool {
        if fault == Fault::Xrun {
            self.view.header().xruns.fetch_add(1, Ordering::Relaxed);
        }
        self.emit(RtEvent::DriverFault { cycle, fault });
        if fault == Fault::EndOfStream {
            return false;
        }
        self.driver.recover(fault).is_ok()
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }
}
