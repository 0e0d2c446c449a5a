//! Start-up: claiming the socket, creating and sealing the shared segments
//! (and the profile ring), registering the driver's ports, publishing the
//! first graph and starting the driver, housekeeping and listener threads.
//!
//! Threads: runs on the thread that calls [`Server::start`] (the binary's
//! main thread), before any client can connect.

use super::access::Access;
use super::driver_thread::{self, DriverStart};
use super::{Server, State};
use crate::config::Config;
use crate::internal::Internals;
use resound_graph::{Graph, DRIVER};
use resound_shm::limits::{self, AUDIO_TYPE};
use resound_shm::profile::{ProfileLayout, ProfileSegment};
use resound_shm::sync::Ordering;
use resound_shm::{port_flags, Capacities, View};
use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use tracing::{debug, warn};

/// The driver's port slots, in channel order.
pub(super) struct DriverPorts {
    /// `system:capture_N` (outputs).
    pub(super) capture: Vec<u32>,
    /// `system:playback_N` (inputs).
    pub(super) playback: Vec<u32>,
}

impl Server {
    /// Sets everything up and starts the driver; returns once clients can connect.
    pub fn start(cfg: Config) -> Result<Arc<Server>, String> {
        let name = resound_protocol::paths::server_name(cfg.server.name.as_deref());
        resound_protocol::paths::check_server_name(&name)?;
        let access = Access::resolve(cfg.server.allow_group.as_deref())?;
        let socket = claim_socket(&name, access.group())?;
        let caps = capacities(&cfg);
        let (driver, commands) = DriverStart::prepare(&cfg, caps);
        let (view, mut locked) = create_view(&cfg, caps)?;
        let profile = create_profile_ring(&cfg, caps, &mut locked)?;
        if let Err(e) = locked {
            warn!("cannot lock the shared memory in RAM ({e}); page faults may delay the real-time threads (raise RLIMIT_MEMLOCK, e.g. `ulimit -l unlimited`, or run with CAP_IPC_LOCK)");
        }
        let device = driver_thread::Device::open(&cfg, caps)?;
        let (graph, ports) = driver_graph(device.channels(&cfg), caps)?;
        let listener = listen_privately(&socket, access.group())?;
        let server = Arc::new(Server {
            name,
            cfg: cfg.clone(),
            view: view.clone(),
            engine: driver.engine.clone(),
            state: Mutex::new(State {
                graph,
                sessions: HashMap::new(),
                xruns: vec![0; caps.max_clients as usize],
                zombies: vec![false; caps.max_clients as usize],
                recent_xruns: Default::default(),
                condemned: vec![],
                external: vec![],
                client_threads: vec![],
                metadata: Default::default(),
                latency_custom: vec![false; caps.max_clients as usize],
            }),
            stopping: AtomicBool::new(false),
            driver_stalled: AtomicBool::new(false),
            socket,
            next_session: AtomicU64::new(1),
            commands: Mutex::new(commands),
            deadline_mode: driver.deadline_mode(),
            sched_desc: driver.sched_desc.clone(),
            floors_lowered: AtomicBool::new(false),
            ledger_capacity: driver.ledger.capacity(),
            profile: profile.clone(),
            internals: Internals::default(),
            access,
            peer_logs: Default::default(),
            device_latencies: device.latencies(),
            render: device.render_control(),
            device_period: device.period_control(),
        });
        {
            let mut st = server.lock();
            server.publish(&mut st);
        }
        let events = driver_thread::start(driver, &cfg, device, view, ports, profile)?;
        server.spawn_control_threads(events, listener)?;
        server.watch_render_start()?;
        Ok(server)
    }

    /// Starts the housekeeping and listener threads.
    fn spawn_control_threads(
        self: &Arc<Self>,
        events: rtrb::Consumer<resound_engine::RtEvent>,
        listener: UnixListener,
    ) -> Result<(), String> {
        let s = self.clone();
        std::thread::Builder::new()
            .name("resound-housekeeping".into())
            .spawn(move || s.housekeeping(events))
            .map_err(|e| e.to_string())?;
        let s = self.clone();
        std::thread::Builder::new()
            .name("resound-listener".into())
            .spawn(move || s.listen(listener))
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// The socket path for server `name`; refuses if a server answers there,
/// removes a stale socket file.
fn claim_socket(name: &str, group: Option<u32>) -> Result<PathBuf, String> {
    let dir = resound_protocol::paths::ensure_socket_dir(group)
        .map_err(|e| format!("socket directory: {e}"))?;
    let socket = dir.join(format!("{name}.sock"));
    if socket.exists() {
        if UnixStream::connect(&socket).is_ok() {
            return Err(format!(
                "a server named {name:?} is already running (socket {})",
                socket.display()
            ));
        }
        let _ = std::fs::remove_file(&socket);
    }
    Ok(socket)
}

/// Binds the socket and makes it 0600 (0660 with its group set to `group`).
/// Nobody else can reach it in between: its directory is private (see
/// `resound_protocol::paths::ensure_socket_dir`).
fn listen_privately(socket: &Path, group: Option<u32>) -> Result<UnixListener, String> {
    use std::os::unix::fs::PermissionsExt;
    let listener = UnixListener::bind(socket)
        .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    let private = std::os::unix::fs::chown(socket, None, group)
        .and_then(|()| std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode)));
    if let Err(e) = private {
        let _ = std::fs::remove_file(socket);
        return Err(format!("cannot make {} private: {e}", socket.display()));
    }
    Ok(listener)
}

/// Table capacities from the options (buffers hold at least 4096 frames, so
/// the buffer size can grow up to that without new segments).
fn capacities(cfg: &Config) -> Capacities {
    Capacities {
        max_clients: cfg.server.max_clients,
        max_ports: cfg.server.max_ports,
        max_connections: cfg.server.max_connections,
        max_frames: cfg.period().clamp(4096, limits::MAX_BUFFER_FRAMES),
    }
}

/// Creates, seals and locks the control and shared segments. The second
/// result says whether locking them in RAM worked (a warning, not fatal).
fn create_view(cfg: &Config, caps: Capacities) -> Result<(Arc<View>, std::io::Result<()>), String> {
    let prio = if cfg.server.wants_realtime() {
        cfg.server.priority
    } else {
        0
    };
    let view = View::create(
        caps,
        cfg.rate(),
        cfg.period(),
        cfg.server.sync,
        (prio - 1).max(0),
    )
    .map_err(|e| format!("shared memory: {e}"))?;
    view.header()
        .early_wake_us
        .store(cfg.server.early_wake_us(), Ordering::Relaxed);
    view.header()
        .first_wake_timer
        .store(cfg.server.first_wake_timer() as u32, Ordering::Relaxed);
    let control = view.control();
    control
        .seal(true)
        .map_err(|e| format!("sealing control segment: {e}"))?;
    let driver = view
        .node(0, 0)
        .ok_or("the driver's node segment is missing")?;
    driver
        .seal(true)
        .map_err(|e| format!("sealing the driver's node segment: {e}"))?;
    let locked = control.lock().and_then(|()| driver.lock());
    Ok((Arc::new(view), locked))
}

/// The per-cycle profile ring (None with `--profile-seconds 0`); locks it in
/// RAM, folding a failure into `locked`.
fn create_profile_ring(
    cfg: &Config,
    caps: Capacities,
    locked: &mut std::io::Result<()>,
) -> Result<Option<Arc<ProfileSegment>>, String> {
    if cfg.server.profile_seconds <= 0.0 {
        return Ok(None);
    }
    let (rate, period) = (cfg.rate(), cfg.period());
    // Room for 16 clients per cycle on average; a bigger graph keeps
    // proportionally less history.
    let l = ProfileLayout::for_history(
        cfg.server.profile_seconds,
        rate,
        period,
        16.min(caps.max_clients - 1).max(1),
        caps.max_clients,
    );
    let seg = ProfileSegment::create(l).map_err(|e| format!("profile ring: {e}"))?;
    if locked.is_ok() {
        *locked = seg.lock();
    }
    let secs = l.seconds(rate, period);
    if secs + 0.5 < cfg.server.profile_seconds {
        warn!(
            "profile ring capped at {} MiB: {secs:.1} s of history instead of {}",
            l.bytes >> 20,
            cfg.server.profile_seconds
        );
    }
    debug!(
        "profile ring: {} cycles ({secs:.1} s), {} rows, {} KiB",
        l.cycle_capacity,
        l.node_capacity,
        l.bytes >> 10
    );
    Ok(Some(Arc::new(seg)))
}

/// The initial graph: the driver ("system") with its physical ports.
fn driver_graph(
    (n_capture, n_playback): (u32, u32),
    caps: Capacities,
) -> Result<(Graph, DriverPorts), String> {
    let mut graph = Graph::new(caps, "system", std::process::id());
    let phys = port_flags::IS_PHYSICAL | port_flags::IS_TERMINAL;
    let mut register = |short: String, direction: u32| {
        graph
            .register_port(DRIVER, &short, AUDIO_TYPE, direction | phys)
            .map_err(|e| format!("driver ports: {e}"))
    };
    let capture = (1..=n_capture)
        .map(|i| register(format!("capture_{i}"), port_flags::IS_OUTPUT))
        .collect::<Result<Vec<_>, _>>()?;
    let playback = (1..=n_playback)
        .map(|i| register(format!("playback_{i}"), port_flags::IS_INPUT))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((graph, DriverPorts { capture, playback }))
}
