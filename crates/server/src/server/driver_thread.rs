//! Building and starting the engine (the driver thread and its audio cycle)
//! and its reservation manager, and talking to them from the control side:
//! reservation commands, the driver's scheduling as reported.
//!
//! Everything here that names `crate::engine` or `crate::reserve` at start
//! is kept together so it can follow those modules when they move.
//!
//! Threads: [`start`] runs on the thread calling `Server::start` and spawns
//! the driver thread (real-time); the rest runs on control threads.

use super::sched_mode::sched_mode;
use super::startup::DriverPorts;
use super::Server;
use crate::config::{Config, DriverArgs, FileArgs, OutputFormat};
use resound_engine::driver::alsa::period::PeriodControl;
use resound_engine::driver::file::SampleFormat;
use resound_engine::{kind, Command, Mode, Reservations};
use resound_engine::{AlsaConfig, AlsaDriver, Driver, Latencies};
use resound_engine::{DummyDriver, Engine, EngineConfig, EngineShared, MonotonicClock, RtEvent};
use resound_engine::{FileDriver, FileSpec, RenderControl};
use resound_graph::DRIVER;
use resound_shm::port_flags;
use resound_shm::profile::ProfileSegment;
use resound_shm::sync::Ordering;
use resound_shm::{Capacities, View};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// The device chosen by `-d`, opened before the driver's ports exist (the
/// ALSA driver learns its channel counts and fails on a refused setting
/// here, before any client can connect).
pub(super) enum Device {
    /// `-d dummy` (built when the engine starts).
    Dummy,
    /// `-d alsa`, opened and negotiated.
    Alsa(Box<AlsaDriver>),
    /// `-d file`, its input opened and its output created.
    File(Box<FileDriver>),
}

impl Device {
    /// Opens the device `cfg` names (not real-time). Errors (a refused
    /// setting, a file that cannot be opened or created) come before any
    /// client can connect.
    pub(super) fn open(cfg: &Config, caps: Capacities) -> Result<Device, String> {
        match &cfg.driver {
            DriverArgs::Dummy(_) => Ok(Device::Dummy),
            DriverArgs::File(f) => Ok(Device::File(Box::new(file_driver(cfg, f, caps)?))),
            DriverArgs::Alsa(a) => {
                let (capture, playback) = a.devices();
                let d = AlsaDriver::open(AlsaConfig {
                    capture,
                    playback,
                    rate: a.rate,
                    period: a.period,
                    periods: a.nperiods,
                    in_channels: a.inchannels,
                    out_channels: a.outchannels,
                    in_latency: a.input_latency,
                    out_latency: a.output_latency,
                    soft: a.softmode,
                    shorts: a.shorts,
                    format: a.format.map(|f| f.sample_format()),
                    access: a.access.mode(),
                    max_period: caps.max_frames,
                })?;
                info!("ALSA: {}", d.describe());
                Ok(Device::Alsa(Box::new(d)))
            }
        }
    }

    /// (capture, playback) channels: the ports the driver gets.
    pub(super) fn channels(&self, cfg: &Config) -> (u32, u32) {
        match (self, &cfg.driver) {
            (Device::Alsa(d), _) => (d.capture_channels(), d.playback_channels()),
            (Device::Dummy, DriverArgs::Dummy(d)) => (d.capture, d.playback),
            (Device::File(_), DriverArgs::File(f)) => (f.capture_channels(), f.playback_channels()),
            _ => (0, 0),
        }
    }

    /// The device's latencies on top of the period (see `publish`).
    pub(super) fn latencies(&self) -> Latencies {
        match self {
            Device::Alsa(d) => d.latencies(),
            Device::Dummy | Device::File(_) => Latencies::default(),
        }
    }

    /// `-d alsa`: the handle that changes the device's period while running.
    pub(super) fn period_control(&self) -> Option<Arc<PeriodControl>> {
        match self {
            Device::Alsa(d) => Some(d.period_control()),
            Device::Dummy | Device::File(_) => None,
        }
    }

    /// `-d file`: the render's control (start trigger, outcome).
    pub(super) fn render_control(&self) -> Option<Arc<RenderControl>> {
        match self {
            Device::File(f) => Some(f.control()),
            Device::Dummy | Device::Alsa(_) => None,
        }
    }
}

/// What the driver thread needs that is decided before the server exists.
pub(super) struct DriverStart {
    /// State shared between the driver thread and the control side.
    pub(super) engine: Arc<EngineShared>,
    /// The scheduling mode (after fallbacks).
    pub(super) mode: Mode,
    /// The mode as shown in status and logs.
    pub(super) sched_desc: String,
    /// The admission ledger the reservation manager starts with.
    pub(super) ledger: resound_sched::Ledger,
    /// The reservation manager's end of the command queue.
    pub(super) commands: rtrb::Consumer<Command>,
    /// Slots the engine and the reservation manager are sized for.
    pub(super) max_clients: usize,
}

impl DriverStart {
    /// Decides the scheduling mode and creates the shared engine state;
    /// also returns the control side's end of the reservation command queue.
    pub(super) fn prepare(
        cfg: &Config,
        caps: Capacities,
    ) -> (DriverStart, rtrb::Producer<Command>) {
        let engine = Arc::new(EngineShared::new(caps.max_clients));
        let (mode, sched_desc, ledger) = sched_mode(cfg);
        let (cmd_tx, cmd_rx) = rtrb::RingBuffer::new(256);
        let start = DriverStart {
            engine,
            mode,
            sched_desc,
            ledger,
            commands: cmd_rx,
            max_clients: caps.max_clients as usize,
        };
        (start, cmd_tx)
    }

    /// Whether reservations exist (deadline mode).
    pub(super) fn deadline_mode(&self) -> bool {
        matches!(self.mode, Mode::Deadline { .. })
    }
}

/// The file driver from its options (opens the input, creates the output).
fn file_driver(cfg: &Config, f: &FileArgs, caps: Capacities) -> Result<FileDriver, String> {
    let spec = FileSpec {
        input: f.input.clone(),
        output: f.output.clone(),
        output_format: f.output_format.map(|o| match o {
            OutputFormat::F32 => SampleFormat::F32,
            OutputFormat::S16 => SampleFormat::S16,
            OutputFormat::S24 => SampleFormat::S24,
            OutputFormat::S32 => SampleFormat::S32,
        }),
        capture: f.capture_channels() as usize,
        playback: f.playback_channels() as usize,
        rate: f.rate(),
        frames: f.frames(),
        period: f.period,
        async_period: !cfg.server.sync,
    };
    FileDriver::create(spec, caps.max_frames as usize)
}

/// Builds the engine (with the opened `device`) and its reservation
/// manager, spawns the driver thread and waits (up to 5 s) until it runs.
/// Returns the driver's event ring.
pub(super) fn start(
    d: DriverStart,
    cfg: &Config,
    device: Device,
    view: Arc<View>,
    ports: DriverPorts,
    profile: Option<Arc<ProfileSegment>>,
) -> Result<rtrb::Consumer<RtEvent>, String> {
    match (device, &cfg.driver) {
        (Device::Alsa(alsa), _) => spawn(d, cfg, *alsa, view, ports, profile),
        (Device::Dummy, DriverArgs::Dummy(dummy)) => {
            let driver = DummyDriver::new(
                ports.playback.len(),
                view.layout().caps.max_frames as usize,
                dummy.loopback,
            );
            spawn(d, cfg, driver, view, ports, profile)
        }
        (Device::File(file), DriverArgs::File(f)) => {
            if !f.realtime {
                // Offline: freewheel for the whole run.
                view.header().freewheel.store(1, Ordering::Release);
            }
            if !f.start_when_connected {
                file.control().start();
            }
            spawn(d, cfg, *file, view, ports, profile)
        }
        _ => Err("driver and device disagree".into()),
    }
}

/// Builds the engine around `driver`, spawns the driver thread and waits
/// (up to 5 s) until it runs.
fn spawn<D: Driver + Send + 'static>(
    d: DriverStart,
    cfg: &Config,
    driver: D,
    view: Arc<View>,
    ports: DriverPorts,
    profile: Option<Arc<ProfileSegment>>,
) -> Result<rtrb::Consumer<RtEvent>, String> {
    let (tx, rx) = rtrb::RingBuffer::new(4096);
    let res = Reservations::new(
        d.mode,
        d.max_clients,
        d.ledger,
        d.engine.res.clone(),
        d.commands,
    )
    .with_external(d.engine.external.clone())
    .with_rescue_cycles(cfg.server.throttle_rescue);
    let eng = Engine::new(
        view,
        d.engine.clone(),
        EngineConfig {
            sync: cfg.server.sync,
            capture: ports.capture,
            playback: ports.playback,
        },
        driver,
        MonotonicClock,
        tx,
        res,
    )
    .with_profile(profile);
    std::thread::Builder::new()
        .name("resound-driver".into())
        .spawn(move || eng.run())
        .map_err(|e| format!("driver thread: {e}"))?;
    let t0 = Instant::now();
    while !d.engine.running.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(rx)
}

impl Server {
    /// The early wake-up bound the clients follow (µs; 0: off).
    pub fn early_wake_us(&self) -> u32 {
        self.view.header().early_wake_us.load(Ordering::Relaxed)
    }

    /// Scheduling the driver thread got.
    pub fn driver_sched(&self) -> String {
        self.engine
            .sched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The driver thread's scheduling now: its live reservation in deadline
    /// mode (budgets and the period move), else what it got at start.
    pub(super) fn driver_sched_now(&self) -> String {
        let r = &self.engine.res[0];
        if r.kind.load(Ordering::Relaxed) == kind::DEADLINE {
            resound_sched::Policy::Deadline {
                runtime_ns: r.budget_ns.load(Ordering::Relaxed),
                deadline_ns: r.deadline_ns.load(Ordering::Relaxed),
                period_ns: r.period_ns.load(Ordering::Relaxed),
                reclaim: self.cfg.server.reclaim(),
            }
            .describe()
        } else {
            self.driver_sched()
        }
    }

    /// `-d file --start-when-connected`: starts a thread that lets the
    /// render begin once every `system:playback_N` port is connected.
    pub(super) fn watch_render_start(self: &Arc<Self>) -> Result<(), String> {
        let Some(render) = self.render.clone().filter(|r| !r.started()) else {
            return Ok(());
        };
        info!("holding the render until every system:playback port is connected");
        let s = self.clone();
        std::thread::Builder::new()
            .name("resound-render-start".into())
            .spawn(move || {
                while !s.stopping.load(Ordering::Acquire) {
                    if s.playback_connected() {
                        info!("every system:playback port is connected: rendering starts");
                        render.start();
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
            .map(|_| ())
            .map_err(|e| format!("render start thread: {e}"))
    }

    /// Whether every playback port of the driver has a connection.
    fn playback_connected(&self) -> bool {
        let st = self.lock();
        let g = &st.graph;
        let fed = |port: u32| g.connections().iter().any(|c| c.dst == port);
        let all = g
            .ports()
            .filter(|(_, p)| p.owner == DRIVER && p.flags & port_flags::IS_INPUT != 0)
            .all(|(i, _)| fed(i));
        all
    }

    /// `-d file`: the reason the server should stop, once the render reached
    /// the end of its input (None otherwise, or with another driver).
    pub fn render_ended(&self) -> Option<&'static str> {
        let r = self.render.as_ref()?;
        r.ended().then_some(match &self.cfg.driver {
            DriverArgs::File(f) if f.input.is_none() => "end of render (--seconds)",
            _ => "end of input",
        })
    }

    /// `-d file`: waits (up to `timeout`) until the driver finalised the
    /// output; the frames written or what went wrong. None with another driver.
    pub fn render_outcome(&self, timeout: Duration) -> Option<Result<u64, String>> {
        let r = self.render.as_ref()?;
        let t0 = Instant::now();
        loop {
            if let Some(o) = r.outcome() {
                return Some(o);
            }
            if t0.elapsed() >= timeout {
                return Some(Err("the output file was not finalised in time".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Sends a request to the driver thread's reservation manager.
    pub(super) fn command(&self, c: Command) {
        let mut q = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        if q.push(c).is_err() {
            warn!("reservation command queue full; dropped {c:?}");
        }
    }
}
