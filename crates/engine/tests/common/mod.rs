//! A test rig for the engine under a simulated clock: an in-memory view with
//! a small published graph, the dummy driver, a `SimClock` whose hook plays
//! the clients, and the event ring's reading end. No process, no sleeping.

#![allow(dead_code)]

use resound_engine::departed::Prober;
use resound_engine::reserve::{Applier, EntityReader, ThreadReader};
use resound_engine::{
    Clock, Command, DummyDriver, Engine, EngineConfig, EngineShared, Mode, Reservations, RtEvent,
    SimClock, SimPoint,
};
use resound_graph::{Graph, DRIVER};
use resound_sched::Ledger;
use resound_shm::cycle::{readiness, release, Readiness};
use resound_shm::limits::AUDIO_TYPE;
use resound_shm::sync::{switch, Ordering};
use resound_shm::{client_state, port_flags, Capacities, NodeStatus, View};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

/// Sample rate of the rig.
pub const RATE: u32 = 48_000;
/// Frames per cycle of the rig (10 ms).
pub const FRAMES: u32 = 480;
/// The rig's period (ns).
pub const PERIOD_NS: u64 = 10_000_000;

/// Reservations with the controller settings `cfg` and the driver's
/// fallback priority 10 (its clients' 9).
pub fn deadline_mode_with(cfg: resound_sched::ControllerConfig) -> Mode {
    Mode::Deadline {
        cfg,
        fallback_priority: 10,
    }
}

/// Reservations with the default controller on the rig's period.
pub fn deadline_mode() -> Mode {
    deadline_mode_with(resound_sched::ControllerConfig {
        audio_period_ns: PERIOD_NS,
        ..Default::default()
    })
}

/// How a played client behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Play {
    /// Finishes as soon as it is triggered.
    OnTime,
    /// Wakes (status Running) but never finishes: late after being woken.
    Stuck,
    /// Runs for this long (simulated ns), then finishes.
    Busy(u64),
    /// Wakes and stays running while the driver waits for the graph, and
    /// finishes at the driver's next sleep: after the driver gave up on the
    /// graph, before its next look-back.
    MissesTheWait,
}

/// What the simulated clients do and saw.
#[derive(Default)]
pub struct Clients {
    /// Behaviour per slot (a slot not listed finishes on time).
    pub play: HashMap<u32, Play>,
    /// Every hook call: (point, cycle in the header then).
    pub points: Vec<(SimPoint, u64)>,
    /// Per finished cycle of the "a" client: the value its capture input held.
    pub heard: Vec<(u64, f32)>,
    /// Output port of "a" (it writes the cycle number there) and the capture port it reads.
    pub a_out: Option<u32>,
    /// `system:capture_1`.
    pub capture: Option<u32>,
    /// Slot of "a".
    pub a_slot: u32,
}

/// The rig.
pub struct Rig {
    pub view: Arc<View>,
    pub shared: Arc<EngineShared>,
    pub clock: SimClock,
    pub engine: Engine<DummyDriver, SimClock>,
    pub events: rtrb::Consumer<RtEvent>,
    pub commands: rtrb::Producer<Command>,
    pub clients: Rc<RefCell<Clients>>,
    /// Client slots by name.
    pub slots: HashMap<String, u32>,
}

/// A fake `sched_setattr` that always succeeds (no privileges needed).
pub fn accept_all(_tid: i32, _p: &resound_sched::Policy) -> Result<(), i32> {
    Ok(())
}

/// A fake `sched_getattr` for which every thread is gone (as the fake
/// thread ids of the rigs are in the kernel): a thread that leaves the graph
/// gives its bandwidth back at once.
pub fn all_gone(_tid: i32) -> Result<resound_sched::Policy, i32> {
    Err(libc::ESRCH)
}

/// Options of a rig.
pub struct Setup {
    /// Sync mode.
    pub sync: bool,
    /// Scheduling mode of the reservations.
    pub mode: Mode,
    /// Dummy loopback.
    pub loopback: bool,
    /// Client chain: system:capture_1 -> names[0] -> names[1] ... -> system:playback_1.
    pub chain: Vec<&'static str>,
    /// More connections (source, destination port names), made after the chain's.
    pub links: Vec<(&'static str, &'static str)>,
    /// The `sched_setattr` seam.
    pub applier: Applier,
    /// The `sched_getattr` seam.
    pub prober: Prober,
    /// The procfs seam of the throttle rescue (default: every thread gone,
    /// so that no test depends on what real thread has its fake id).
    pub thread_reader: ThreadReader,
    /// The procfs seam of the rescue's hold (default: no entity, so the
    /// hold is `rescue_cycles`).
    pub entity_reader: EntityReader,
    /// Most cycles of a throttle rescue's hold (0: no rescue).
    pub rescue_cycles: u32,
    /// The reservation ledger's capacity (CPUs).
    pub ledger_cpus: f64,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            sync: true,
            mode: Mode::Other,
            loopback: false,
            chain: vec!["a"],
            links: Vec::new(),
            applier: accept_all,
            prober: all_gone,
            thread_reader: no_thread,
            entity_reader: no_entity,
            rescue_cycles: resound_engine::reserve::RESCUE_CYCLES,
            ledger_cpus: 4.0,
        }
    }
}

/// A procfs reader that finds no thread (the rescue never starts).
pub fn no_thread(_tid: i32) -> Option<resound_sched::thread_run::ThreadRun> {
    None
}

/// An entity reader that finds none (the hold is the longest).
pub fn no_entity(_tid: i32) -> Option<resound_sched::thread_run::DeadlineEntity> {
    None
}

/// Writes the compiled graph into the next table, as the server's publication does.
fn publish(view: &View, graph: &Graph) {
    // SAFETY: the test is the only graph writer of its own view.
    unsafe { graph.compile().write_next_table(view) };
}

/// Plays every client of the cycle the driver released last whose inputs
/// are ready, as its process thread would, until none can progress; a
/// client stuck in an earlier cycle that may go on finishes it first, late.
fn play_clients(view: &View, clock: &SimClock, clients: &mut Clients) {
    let h = view.header();
    let Some(driver) = view.record(0) else { return };
    let cycle = driver.finished_cycle.load(Ordering::Acquire);
    let cur = switch::cur(h.switch.load(Ordering::Acquire));
    let table = view.table(cur);
    loop {
        let mut progressed = false;
        for slot in 1..table.client_hw() {
            let Some(r) = view.record(slot) else { continue };
            if table.client_state(slot) != client_state::ACTIVE {
                continue;
            }
            progressed |= finish_late(view, clock, clients, slot);
            let ran = r.cycle.load(Ordering::Acquire) == cycle;
            let ready = matches!(
                readiness(view, &table, slot, cycle as u32),
                Readiness::Ready { .. }
            );
            if ran || !ready {
                continue;
            }
            r.cycle.store(cycle, Ordering::Relaxed);
            r.awake_ns.store(clock.now_ns(), Ordering::Relaxed);
            r.status
                .store(NodeStatus::Running as u32, Ordering::Release);
            progressed |= run_block(view, clock, clients, slot, cycle);
        }
        if !progressed {
            break;
        }
    }
}

/// A client woken for a cycle it has not finished, no longer stuck,
/// finishes it now (late). Returns whether it did.
fn finish_late(view: &View, clock: &SimClock, clients: &mut Clients, slot: u32) -> bool {
    let Some(r) = view.record(slot) else {
        return false;
    };
    let cycle = r.cycle.load(Ordering::Acquire);
    let running = r.status.load(Ordering::Acquire) == NodeStatus::Running as u32;
    if !running || cycle == 0 || r.finished_cycle.load(Ordering::Acquire) == cycle {
        return false;
    }
    run_block(view, clock, clients, slot, cycle)
}

/// Slot `slot`, woken for `cycle`, does its block as it plays; returns
/// whether it finished it.
fn run_block(view: &View, clock: &SimClock, clients: &mut Clients, slot: u32, cycle: u64) -> bool {
    let Some(r) = view.record(slot) else {
        return false;
    };
    let waiting = matches!(clients.points.last(), Some((SimPoint::Wait { .. }, _)));
    match clients.play.get(&slot) {
        Some(Play::Stuck) => return false,
        Some(Play::MissesTheWait) if waiting => return false,
        Some(Play::Busy(ns)) => clock.advance(*ns),
        _ => {}
    }
    if slot == clients.a_slot {
        process_a(view, clients, cycle);
    }
    // As RtContext::finish does.
    r.finish_ns.store(clock.now_ns(), Ordering::Relaxed);
    r.finished_cycle.store(cycle, Ordering::Release);
    r.status
        .store(NodeStatus::Finished as u32, Ordering::Release);
    release(r, cycle);
    r.store_cpu(cycle, 1_000);
    true
}

/// "a" hears its capture input and writes the cycle number to its output.
fn process_a(view: &View, clients: &mut Clients, cycle: u64) {
    if let Some(p) = clients.capture.and_then(|p| view.port_buffer(0, p)) {
        // SAFETY: a port buffer of max_frames ≥ 1 f32; nobody writes it now
        // (the driver thread is this thread, inside the clock hook).
        let v = unsafe { *p };
        clients.heard.push((cycle, v));
    }
    if let Some(p) = clients
        .a_out
        .and_then(|p| view.port_buffer(clients.a_slot, p))
    {
        // SAFETY: a port buffer of max_frames ≥ FRAMES f32, owned by "a",
        // which this hook plays; no other reference to it is alive.
        let out = unsafe { std::slice::from_raw_parts_mut(p, FRAMES as usize) };
        out.fill(cycle as f32);
    }
}

impl Rig {
    /// Builds the rig and starts the engine (no cycle run yet).
    pub fn new(s: Setup) -> Rig {
        let caps = Capacities {
            max_clients: 8,
            max_ports: 32,
            max_connections: 32,
            max_frames: 4096,
        };
        let view = Arc::new(View::create(caps, RATE, FRAMES, s.sync, 0).expect("view"));
        view.own_nodes(1..caps.max_clients).expect("node segments");
        let mut graph = Graph::new(caps, "system", 1);
        let phys = port_flags::IS_PHYSICAL | port_flags::IS_TERMINAL;
        let capture = graph
            .register_port(
                DRIVER,
                "capture_1",
                AUDIO_TYPE,
                port_flags::IS_OUTPUT | phys,
            )
            .unwrap();
        let playback = graph
            .register_port(
                DRIVER,
                "playback_1",
                AUDIO_TYPE,
                port_flags::IS_INPUT | phys,
            )
            .unwrap();
        let mut slots = HashMap::new();
        let mut prev = "system:capture_1".to_string();
        for name in &s.chain {
            let (slot, _) = graph.add_client(name, true, 2).unwrap();
            graph
                .register_port(slot, "in", AUDIO_TYPE, port_flags::IS_INPUT)
                .unwrap();
            graph
                .register_port(slot, "out", AUDIO_TYPE, port_flags::IS_OUTPUT)
                .unwrap();
            graph.set_active(slot, true).unwrap();
            graph.connect(&prev, &format!("{name}:in")).unwrap();
            prev = format!("{name}:out");
            slots.insert(name.to_string(), slot);
        }
        graph.connect(&prev, "system:playback_1").unwrap();
        for (src, dst) in &s.links {
            graph.connect(src, dst).unwrap();
        }
        publish(&view, &graph);
        let clients = Rc::new(RefCell::new(Clients {
            a_out: graph.port_by_name("a:out"),
            capture: Some(capture),
            a_slot: slots.get("a").copied().unwrap_or(0),
            ..Default::default()
        }));
        let shared = Arc::new(EngineShared::new(caps.max_clients));
        let (cmd_tx, cmd_rx) = rtrb::RingBuffer::new(64);
        let res = Reservations::new(
            s.mode,
            caps.max_clients as usize,
            Ledger::with_capacity(s.ledger_cpus),
            shared.res.clone(),
            cmd_rx,
        )
        .with_applier(s.applier)
        .with_prober(s.prober)
        .with_thread_reader(s.thread_reader)
        .with_entity_reader(s.entity_reader)
        .with_rescue_cycles(s.rescue_cycles);
        let (tx, rx) = rtrb::RingBuffer::new(1024);
        let clock = SimClock::new(1_000_000_000);
        {
            let (view, clients) = (view.clone(), clients.clone());
            clock.set_hook(move |clock, point| {
                let mut c = clients.borrow_mut();
                let cycle = view.header().cycle.load(Ordering::Relaxed);
                c.points.push((point, cycle));
                play_clients(&view, clock, &mut c);
            });
        }
        let driver = DummyDriver::new(1, caps.max_frames as usize, s.loopback);
        let cfg = EngineConfig {
            sync: s.sync,
            capture: vec![capture],
            playback: vec![playback],
        };
        let mut engine = Engine::new(
            view.clone(),
            shared.clone(),
            cfg,
            driver,
            clock.clone(),
            tx,
            res,
        );
        assert!(engine.start());
        Rig {
            view,
            shared,
            clock,
            engine,
            events: rx,
            commands: cmd_tx,
            clients,
            slots,
        }
    }

    /// Slot of a client.
    pub fn slot(&self, name: &str) -> u32 {
        self.slots[name]
    }

    /// Sets how a client plays.
    pub fn play(&self, name: &str, p: Play) {
        let slot = self.slot(name);
        self.clients.borrow_mut().play.insert(slot, p);
    }

    /// Runs `n` cycles.
    pub fn run(&mut self, n: usize) {
        for _ in 0..n {
            assert!(self.engine.step());
        }
    }

    /// Drains the events.
    pub fn drain(&mut self) -> Vec<RtEvent> {
        let mut v = Vec::new();
        while let Ok(e) = self.events.pop() {
            v.push(e);
        }
        v
    }

    /// The header's xrun count.
    pub fn xruns(&self) -> u64 {
        self.view.header().xruns.load(Ordering::Relaxed)
    }

    /// (cycle, cycle start, next start, frame time) from the header.
    pub fn timer(&self) -> (u64, u64, u64, u64) {
        let h = self.view.header();
        (
            h.cycle.load(Ordering::Relaxed),
            h.cycle_start_ns.load(Ordering::Relaxed),
            h.next_start_ns.load(Ordering::Relaxed),
            h.frame_time.load(Ordering::Relaxed),
        )
    }
}
