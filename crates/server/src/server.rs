//! The control side of the server: the socket, one session per connection,
//! request handling, graph publication and notifications.
//!
//! Threads (none real-time):
//! * the listener accepts connections and starts a session for each;
//! * each session has a reader thread (requests, handled inline under the
//!   state lock) and a writer thread (replies and notifications, from a
//!   bounded queue, so a client that stops reading never blocks the server:
//!   when its queue is full it is dropped);
//! * the housekeeping thread drains the driver's event ring (xruns, corrupt
//!   records) every few milliseconds.
//!
//! Graph changes are serialised by the state lock; each one is compiled and
//! written into the *next* table, and the request returns once the driver
//! has switched to it (at most about one period later), so a client that
//! made a change reads it back from shared memory.

use crate::config::{Config, DriverArgs};
use crate::internal::{Host, Internals};
use resound_engine::{
    kind, Command, DummyDriver, Engine, EngineConfig, EngineShared, Mode, MonotonicClock,
    Reservations, RtEvent,
};
use resound_graph::{port_type_name, ClientState, Graph, DRIVER};
use resound_protocol::wire::{
    self, ClientStatus, Envelope, ErrorCode, FrameError, HelloKind, Notification, PortInfo, Reply,
    Request, ReservationStatus, ServerMsg, Status, Welcome, WireError,
};
use resound_shm::limits::{self, AUDIO_TYPE};
use resound_shm::profile::{ProfileLayout, ProfileSegment};
use resound_shm::sync::{futex, switch, Ordering};
use resound_shm::{self as shm, port_flags, Capacities, TableHeader, View};
use std::collections::HashMap;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::{debug, error, info, warn};

mod jack;

/// A running server.
pub struct Server {
    name: String,
    cfg: Config,
    view: Arc<View>,
    engine: Arc<EngineShared>,
    state: Mutex<State>,
    stopping: AtomicBool,
    socket: PathBuf,
    next_session: AtomicU64,
    /// Requests to the driver thread's reservation manager.
    commands: Mutex<rtrb::Producer<Command>>,
    /// Scheduling mode as decided at start (after fallbacks).
    sched_desc: String,
    /// Whether reservations exist (deadline mode).
    deadline_mode: bool,
    ledger_capacity: f64,
    /// The per-cycle profile ring (None with `--profile-seconds 0`).
    profile: Option<Arc<ProfileSegment>>,
    /// Loaded internal clients.
    internals: Internals,
}

struct Session {
    slot: Option<u32>,
    tx: SyncSender<ServerMsg>,
    stream: UnixStream,
    pid: u32,
}

struct State {
    graph: Graph,
    /// Metadata properties (jack_set_property & co).
    metadata: crate::metadata::Metadata,
    /// Per slot: the client computes its own latencies (has a latency callback).
    latency_custom: Vec<bool>,
    sessions: HashMap<u64, Session>,
    xruns: Vec<u64>,
    /// Slots already being dropped for corrupting their record.
    condemned: Vec<u32>,
}

fn werr(code: ErrorCode, m: impl Into<String>) -> WireError {
    WireError::new(code, m)
}

impl Server {
    /// Sets everything up and starts the driver; returns once clients can connect.
    pub fn start(cfg: Config) -> Result<Arc<Server>, String> {
        let name = resound_protocol::paths::server_name(cfg.server.name.as_deref());
        resound_protocol::paths::check_server_name(&name)?;
        let dir = resound_protocol::paths::ensure_socket_dir()
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
        let (rate, period) = (cfg.rate(), cfg.period());
        let caps = Capacities {
            max_clients: cfg.server.max_clients,
            max_ports: cfg.server.max_ports,
            max_connections: cfg.server.max_connections,
            max_frames: period.clamp(4096, limits::MAX_BUFFER_FRAMES),
        };
        let prio = if cfg.server.wants_realtime() {
            cfg.server.priority
        } else {
            0
        };
        let view = View::create(caps, rate, period, cfg.server.sync, (prio - 1).max(0))
            .map_err(|e| format!("shared memory: {e}"))?;
        view.segments()
            .0
            .seal(true)
            .map_err(|e| format!("sealing control segment: {e}"))?;
        view.segments()
            .1
            .seal(false)
            .map_err(|e| format!("sealing shared segment: {e}"))?;
        let mut locked = Ok(());
        for seg in [view.segments().0, view.segments().1] {
            locked = locked.and_then(|()| seg.lock());
        }
        let view = Arc::new(view);
        let profile = if cfg.server.profile_seconds > 0.0 {
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
            locked = locked.and_then(|()| seg.lock());
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
            Some(Arc::new(seg))
        } else {
            None
        };
        if let Err(e) = locked {
            warn!("cannot lock the shared memory in RAM ({e}); page faults may delay the real-time threads (raise RLIMIT_MEMLOCK, e.g. `ulimit -l unlimited`, or run with CAP_IPC_LOCK)");
        }

        let mut graph = Graph::new(caps, "system", std::process::id());
        let DriverArgs::Dummy(d) = &cfg.driver;
        let mut capture = Vec::new();
        let mut playback = Vec::new();
        let phys = port_flags::IS_PHYSICAL | port_flags::IS_TERMINAL;
        for i in 1..=d.capture {
            capture.push(
                graph
                    .register_port(
                        DRIVER,
                        &format!("capture_{i}"),
                        AUDIO_TYPE,
                        port_flags::IS_OUTPUT | phys,
                    )
                    .map_err(|e| format!("driver ports: {e}"))?,
            );
        }
        for i in 1..=d.playback {
            playback.push(
                graph
                    .register_port(
                        DRIVER,
                        &format!("playback_{i}"),
                        AUDIO_TYPE,
                        port_flags::IS_INPUT | phys,
                    )
                    .map_err(|e| format!("driver ports: {e}"))?,
            );
        }
        let listener = UnixListener::bind(&socket)
            .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;

        let engine = Arc::new(EngineShared::new(caps.max_clients));
        let (mode, sched_desc, ledger) = sched_mode(&cfg);
        let ledger_capacity = ledger.capacity();
        let (cmd_tx, cmd_rx) = rtrb::RingBuffer::new(256);
        let server = Arc::new(Server {
            name,
            cfg: cfg.clone(),
            view: view.clone(),
            engine: engine.clone(),
            state: Mutex::new(State {
                graph,
                sessions: HashMap::new(),
                xruns: vec![0; caps.max_clients as usize],
                condemned: vec![],
                metadata: Default::default(),
                latency_custom: vec![false; caps.max_clients as usize],
            }),
            stopping: AtomicBool::new(false),
            socket,
            next_session: AtomicU64::new(1),
            commands: Mutex::new(cmd_tx),
            deadline_mode: matches!(mode, Mode::Deadline { .. }),
            sched_desc,
            ledger_capacity,
            profile: profile.clone(),
            internals: Internals::default(),
        });
        {
            let mut st = server.lock();
            server.publish(&mut st);
        }
        let (tx, rx) = rtrb::RingBuffer::new(4096);
        let res = Reservations::new(
            mode,
            caps.max_clients as usize,
            ledger,
            engine.res.clone(),
            cmd_rx,
        );
        let driver = DummyDriver::new(playback.len(), caps.max_frames as usize, d.loopback);
        let eng = Engine::new(
            view,
            engine.clone(),
            EngineConfig {
                sync: cfg.server.sync,
                capture,
                playback,
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
        while !engine.running.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let s = server.clone();
        std::thread::Builder::new()
            .name("resound-housekeeping".into())
            .spawn(move || s.housekeeping(rx))
            .map_err(|e| e.to_string())?;
        let s = server.clone();
        std::thread::Builder::new()
            .name("resound-listener".into())
            .spawn(move || s.listen(listener))
            .map_err(|e| e.to_string())?;
        Ok(server)
    }

    /// Server name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Socket path.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
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
    fn driver_sched_now(&self) -> String {
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

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the graph into the next table and waits until the driver uses it.
    fn publish(&self, st: &mut State) {
        let (capture, playback) = self.device_latency();
        crate::latency::propagate(&mut st.graph, &st.latency_custom, capture, playback);
        let c = st.graph.compile();
        let h = self.view.header();
        let before = switch::generation(h.switch.load(Ordering::Acquire));
        let next = switch::begin_write(&h.switch);
        {
            // SAFETY: we hold the state lock, so this is the only writer, and
            // `next` comes from begin_write.
            let mut t = unsafe { self.view.table_mut(next) };
            for (i, e) in c.clients.iter().enumerate() {
                t.set_client(i as u32, e);
            }
            for (i, e) in c.ports.iter().enumerate() {
                t.set_port(i as u32, e);
            }
            t.set_arrays(&c.sources, &c.edges, &c.order);
            t.set_header(TableHeader {
                version: c.version,
                client_hw: c.clients.len() as u32,
                port_hw: c.ports.len() as u32,
                n_sources: c.sources.len() as u32,
                n_edges: c.edges.len() as u32,
                n_order: c.order.len() as u32,
                _pad: 0,
            });
        }
        switch::end_write(&h.switch);
        if !c.feedback.is_empty() {
            debug!(
                "{} feedback connection(s) close loops (one period of delay each)",
                c.feedback.len()
            );
        }
        let t0 = Instant::now();
        while switch::generation(h.switch.load(Ordering::Acquire)) == before
            && self.engine.running.load(Ordering::Acquire)
            && t0.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Sends a request to the driver thread's reservation manager.
    fn command(&self, c: Command) {
        let mut q = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        if q.push(c).is_err() {
            warn!("reservation command queue full; dropped {c:?}");
        }
    }

    fn notify(st: &mut State, n: Notification) {
        let mut full = Vec::new();
        for (id, s) in &st.sessions {
            if s.slot.is_none() {
                continue;
            }
            if let Err(TrySendError::Full(_)) = s.tx.try_send(ServerMsg::Notify(n.clone())) {
                full.push(*id);
            }
        }
        for id in full {
            if let Some(s) = st.sessions.get(&id) {
                warn!(
                    "client {:?} does not read its notifications ({} queued); dropping it",
                    Self::label(st, s),
                    limits::NOTIFY_QUEUE
                );
                let _ = s.stream.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    fn label(st: &State, s: &Session) -> String {
        s.slot
            .and_then(|sl| st.graph.client(sl))
            .map_or_else(|| format!("pid {}", s.pid), |c| c.name.clone())
    }

    fn listen(self: Arc<Self>, listener: UnixListener) {
        for conn in listener.incoming() {
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            match conn {
                Ok(stream) => {
                    let s = self.clone();
                    let _ = std::thread::Builder::new()
                        .name("resound-session".into())
                        .spawn(move || s.session(stream));
                }
                Err(e) => warn!("accept failed: {e}"),
            }
        }
    }

    fn session(self: Arc<Self>, stream: UnixStream) {
        let pid = rustix::net::sockopt::socket_peercred(&stream)
            .map(|c| c.pid.as_raw_nonzero().get() as u32)
            .unwrap_or(0);
        let id = self.next_session.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut rd = match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        };
        let hello = match wire::read_frame(&mut rd, limits::MAX_REQUEST_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|p| wire::decode::<wire::Hello>(&p).map_err(|e| e.to_string()))
        {
            Ok(h) => h,
            Err(e) => {
                debug!("connection from pid {pid} dropped before handshake: {e}");
                let _ = wire::write_frame(
                    &mut &stream,
                    &Welcome::Refused(werr(ErrorCode::Protocol, e)),
                );
                return;
            }
        };
        let _ = stream.set_read_timeout(None);
        if hello.protocol != wire::PROTOCOL_VERSION {
            let m = format!(
                "client speaks protocol {}, server {}; rebuild the client against this resound",
                hello.protocol,
                wire::PROTOCOL_VERSION
            );
            let _ = wire::write_frame(&mut &stream, &Welcome::Refused(werr(ErrorCode::Version, m)));
            return;
        }
        let (tx, rx) = sync_channel::<ServerMsg>(limits::NOTIFY_QUEUE);
        let slot = match hello.kind {
            HelloKind::Client { name, exact_name } => {
                let mut st = self.lock();
                if self.stopping.load(Ordering::Acquire) {
                    return;
                }
                match st.graph.add_client(&name, exact_name, pid) {
                    Ok((slot, actual)) => {
                        // Fresh activation record for the new client.
                        if let Some(r) = self.view.record(slot) {
                            r.status
                                .store(shm::NodeStatus::Idle as u32, Ordering::Relaxed);
                            r.finished_cycle.store(0, Ordering::Relaxed);
                            r.cpu.store(0, Ordering::Relaxed);
                        }
                        if let Some(m) = self.view.mailbox(slot) {
                            m.reset();
                        }
                        st.latency_custom[slot as usize] = false;
                        st.xruns[slot as usize] = 0;
                        self.publish(&mut st);
                        let uuid = st.graph.client(slot).map_or(0, |c| c.uuid);
                        if let Some(p) = &self.profile {
                            // Under the state lock: the name ring's single writer.
                            p.ring().write_name(uuid, slot, pid, &actual);
                        }
                        let w = Welcome::Client {
                            slot,
                            name: actual.clone(),
                            uuid,
                            server: self.name.clone(),
                        };
                        let (c, s) = self.view.segments();
                        if let Err(e) = wire::send_frame_with_fds(&stream, &w, &[c.fd(), s.fd()]) {
                            warn!("handshake with {actual:?} failed: {e}");
                            let _ = st.graph.remove_client(slot);
                            self.publish(&mut st);
                            return;
                        }
                        info!("client {actual:?} (pid {pid}) opened");
                        Self::notify(
                            &mut st,
                            Notification::ClientRegistration {
                                name: actual,
                                registered: true,
                            },
                        );
                        let stream2 = stream.try_clone().expect("clone socket");
                        st.sessions.insert(
                            id,
                            Session {
                                slot: Some(slot),
                                tx: tx.clone(),
                                stream: stream2,
                                pid,
                            },
                        );
                        Some(slot)
                    }
                    Err(e) => {
                        info!("refused client {name:?} (pid {pid}): {e}");
                        let _ = wire::write_frame(&mut &stream, &Welcome::Refused(e));
                        return;
                    }
                }
            }
            kind @ (HelloKind::Control | HelloKind::Profile) => {
                let sent = if kind == HelloKind::Profile {
                    match &self.profile {
                        Some(p) => wire::send_frame_with_fds(
                            &stream,
                            &Welcome::Profile {
                                server: self.name.clone(),
                            },
                            &[p.fd()],
                        ),
                        None => {
                            let _ = wire::write_frame(
                                &mut &stream,
                                &Welcome::Refused(werr(
                                    ErrorCode::NotAllowed,
                                    format!(
                                        "profiling is off in server {:?} (started with --profile-seconds 0)",
                                        self.name
                                    ),
                                )),
                            );
                            return;
                        }
                    }
                } else {
                    wire::write_frame(
                        &mut &stream,
                        &Welcome::Control {
                            server: self.name.clone(),
                        },
                    )
                };
                if sent.is_err() {
                    return;
                }
                let stream2 = stream.try_clone().expect("clone socket");
                self.lock().sessions.insert(
                    id,
                    Session {
                        slot: None,
                        tx: tx.clone(),
                        stream: stream2,
                        pid,
                    },
                );
                None
            }
        };
        let mut wr = stream.try_clone().expect("clone socket");
        let writer = std::thread::Builder::new()
            .name("resound-session-w".into())
            .spawn(move || {
                for m in rx {
                    if wire::write_frame(&mut wr, &m).is_err() {
                        break;
                    }
                }
            });
        loop {
            let payload = match wire::read_frame(&mut rd, limits::MAX_REQUEST_BYTES) {
                Ok(p) => p,
                Err(FrameError::Closed) => break,
                Err(e @ FrameError::TooLong(..)) => {
                    warn!("{}: {e}; dropping the connection", self.who(slot, pid));
                    break;
                }
                Err(FrameError::Io(e)) => {
                    debug!("{}: {e}", self.who(slot, pid));
                    break;
                }
            };
            let (seq, reply, close) = match wire::decode::<Envelope>(&payload) {
                Ok(env) => {
                    let close = env.req == Request::Close;
                    let r = if close {
                        Reply::Ok
                    } else {
                        self.handle(id, slot, env.req)
                    };
                    (env.seq, r, close)
                }
                Err(e) => {
                    warn!("{}: {e}", self.who(slot, pid));
                    (u32::MAX, Reply::Err(e), false)
                }
            };
            if tx.try_send(ServerMsg::Reply { seq, reply }).is_err() {
                break;
            }
            if close {
                break;
            }
        }
        self.end_session(id);
        drop(tx);
        if let Ok(w) = writer {
            let _ = w.join();
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }

    fn who(&self, slot: Option<u32>, pid: u32) -> String {
        match slot.and_then(|s| self.lock().graph.client(s).map(|c| c.name.clone())) {
            Some(n) => format!("client {n:?} (pid {pid})"),
            None => format!("control session (pid {pid})"),
        }
    }

    fn end_session(&self, id: u64) {
        let mut st = self.lock();
        let Some(sess) = st.sessions.remove(&id) else {
            return;
        };
        let Some(slot) = sess.slot else { return };
        let name = st
            .graph
            .client(slot)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        let gone_uuids = self.uuids_of_client(&st, slot);
        if let Ok((conns, ports)) = st.graph.remove_client(slot) {
            self.forget_client(&mut st, slot, &gone_uuids);
            self.publish(&mut st);
            self.command(Command::Detach { slot });
            if let Some(r) = self.view.record(slot) {
                r.status
                    .store(shm::NodeStatus::Idle as u32, Ordering::Relaxed);
            }
            st.condemned.retain(|&s| s != slot);
            info!(
                "client {name:?} closed ({} port(s), {} connection(s) removed)",
                ports.len(),
                conns.len()
            );
            for c in conns {
                Self::notify(
                    &mut st,
                    Notification::PortConnect {
                        src: c.src,
                        dst: c.dst,
                        connected: false,
                    },
                );
            }
            for (p, n) in ports {
                Self::notify(
                    &mut st,
                    Notification::PortRegistration {
                        port: p,
                        name: n,
                        registered: false,
                    },
                );
            }
            Self::notify(
                &mut st,
                Notification::ClientRegistration {
                    name,
                    registered: false,
                },
            );
            Self::graph_order(&mut st);
        }
    }

    fn handle(&self, id: u64, slot: Option<u32>, req: Request) -> Reply {
        // Internal clients open through the socket, whose session thread
        // takes the state lock: (un)load them without holding it.
        let r = match req {
            Request::LoadInternal {
                client_name,
                load_name,
                init,
            } => self.load_internal(&client_name, &load_name, &init),
            Request::UnloadInternal { uuid } => self.internals.unload(uuid).map(|()| {
                info!("internal client {uuid} unloaded");
                Reply::Ok
            }),
            req => self.handle_inner(id, slot, req),
        };
        r.unwrap_or_else(Reply::Err)
    }

    fn load_internal(
        &self,
        client_name: &str,
        load_name: &str,
        init: &str,
    ) -> Result<Reply, WireError> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(werr(ErrorCode::NotAllowed, "the server is stopping"));
        }
        let host = Host {
            server: self.name.clone(),
            dir: self
                .socket
                .parent()
                .map(|p| p.to_path_buf())
                .unwrap_or_default(),
            profile: self.profile.clone(),
        };
        let (uuid, name) = self
            .internals
            .load(&host, client_name, load_name, init)
            .inspect_err(|e| warn!("loading internal client {load_name:?}: {e}"))?;
        info!("internal client {name:?} ({load_name} {init}) loaded");
        Ok(Reply::Internal { uuid, name })
    }

    fn need_client(slot: Option<u32>) -> Result<u32, WireError> {
        slot.ok_or_else(|| {
            werr(
                ErrorCode::NotAllowed,
                "this request needs a client session, not a control session",
            )
        })
    }

    fn handle_inner(&self, id: u64, slot: Option<u32>, req: Request) -> Result<Reply, WireError> {
        let mut st = self.lock();
        match req {
            Request::RegisterPort {
                name,
                port_type,
                flags,
            } => {
                let me = Self::need_client(slot)?;
                let flags = flags & !(port_flags::IS_PHYSICAL);
                let p = st.graph.register_port(me, &name, &port_type, flags)?;
                if let Some(b) = self.view.port_buffer(p) {
                    // SAFETY: a fresh port's buffer is not yet referenced by any table.
                    unsafe {
                        std::ptr::write_bytes(b, 0, self.view.layout().caps.max_frames as usize)
                    };
                }
                self.publish(&mut st);
                let full = st.graph.port_name(p).unwrap_or_default();
                Self::notify(
                    &mut st,
                    Notification::PortRegistration {
                        port: p,
                        name: full.clone(),
                        registered: true,
                    },
                );
                Ok(Reply::Port {
                    port: p,
                    name: full,
                })
            }
            Request::UnregisterPort { port } => {
                let me = Self::need_client(slot)?;
                let name = st.graph.port_name(port).unwrap_or_default();
                let uuid = st.graph.port(port).map(|p| p.uuid);
                let conns = st.graph.unregister_port(me, port)?;
                if let Some(u) = uuid {
                    Self::forget_subject(&mut st, u);
                }
                self.publish(&mut st);
                for c in conns {
                    Self::notify(
                        &mut st,
                        Notification::PortConnect {
                            src: c.src,
                            dst: c.dst,
                            connected: false,
                        },
                    );
                }
                Self::notify(
                    &mut st,
                    Notification::PortRegistration {
                        port,
                        name,
                        registered: false,
                    },
                );
                Ok(Reply::Ok)
            }
            Request::RenamePort { port, name } => {
                let me = Self::need_client(slot)?;
                let old = st.graph.port_name(port).unwrap_or_default();
                st.graph.rename_port(me, port, &name)?;
                self.publish(&mut st);
                let new = st.graph.port_name(port).unwrap_or_default();
                Self::notify(&mut st, Notification::PortRename { port, old, new });
                Ok(Reply::Ok)
            }
            Request::Activate { tid } => {
                let me = Self::need_client(slot)?;
                self.check_tid(st.sessions.get(&id).map_or(0, |s| s.pid), tid)?;
                if let Some(r) = self.view.record(me) {
                    r.finished_cycle.store(0, Ordering::Relaxed);
                }
                st.graph.set_active(me, true)?;
                self.publish(&mut st);
                self.command(Command::Attach { slot: me, tid });
                Self::graph_order(&mut st);
                Ok(Reply::Ok)
            }
            Request::Deactivate => {
                let me = Self::need_client(slot)?;
                st.graph.set_active(me, false)?;
                self.publish(&mut st);
                self.command(Command::Detach { slot: me });
                self.leave_timebase(me);
                Self::graph_order(&mut st);
                Ok(Reply::Ok)
            }
            Request::Connect { src, dst } => {
                let c = st.graph.connect(&src, &dst)?;
                self.connections_changed(&mut st, &[c], true);
                Ok(Reply::Ok)
            }
            Request::Disconnect { src, dst } => {
                let c = st.graph.disconnect(&src, &dst)?;
                self.connections_changed(&mut st, &[c], false);
                Ok(Reply::Ok)
            }
            Request::DisconnectAll { port } => {
                let gone = st.graph.disconnect_all(&port)?;
                if !gone.is_empty() {
                    self.connections_changed(&mut st, &gone, false);
                }
                Ok(Reply::Ok)
            }
            Request::SetBufferSize { frames } => {
                let h = self.view.header();
                let max = self.view.layout().caps.max_frames;
                if !(limits::MIN_BUFFER_FRAMES..=max).contains(&frames) {
                    return Err(werr(
                        ErrorCode::NotAllowed,
                        format!(
                            "buffer size {frames} is outside {}..={max} frames",
                            limits::MIN_BUFFER_FRAMES
                        ),
                    ));
                }
                if h.buffer_frames.load(Ordering::Relaxed) != frames {
                    let rate = h.sample_rate.load(Ordering::Relaxed).max(1) as u64;
                    // The driver reads both at its next cycle start.
                    h.period_ns
                        .store(frames as u64 * 1_000_000_000 / rate, Ordering::Relaxed);
                    h.buffer_frames.store(frames, Ordering::Release);
                    info!("buffer size now {frames} frames");
                    Self::notify(&mut st, Notification::BufferSize(frames));
                    // Device latencies are in periods.
                    self.publish(&mut st);
                    Self::graph_order(&mut st);
                }
                Ok(Reply::Ok)
            }
            Request::Status => Ok(Reply::Status(Box::new(self.status(&st)))),
            Request::ListPorts => Ok(Reply::Ports(Self::list_ports(&st.graph))),
            Request::Close => Ok(Reply::Ok),
            Request::LoadInternal { .. } | Request::UnloadInternal { .. } => Err(werr(
                ErrorCode::Internal,
                "internal client request misrouted",
            )),
            other => self.handle_jack(&mut st, slot, other),
        }
    }

    /// Publishes a connection change and tells every client.
    fn connections_changed(
        &self,
        st: &mut State,
        conns: &[resound_graph::Connection],
        connected: bool,
    ) {
        self.publish(st);
        for c in conns {
            Self::notify(
                st,
                Notification::PortConnect {
                    src: c.src,
                    dst: c.dst,
                    connected,
                },
            );
        }
        Self::graph_order(st);
    }

    /// The process-thread TID a client announces must be one of its own threads.
    fn check_tid(&self, pid: u32, tid: i32) -> Result<(), WireError> {
        if tid <= 0 || pid == 0 {
            return Err(werr(
                ErrorCode::NotAllowed,
                format!("invalid thread id {tid}"),
            ));
        }
        let path = format!("/proc/{pid}/task/{tid}");
        if std::path::Path::new(&path).exists() {
            Ok(())
        } else {
            Err(werr(
                ErrorCode::NotAllowed,
                format!("thread {tid} does not belong to the client's process {pid}"),
            ))
        }
    }

    fn list_ports(g: &Graph) -> Vec<PortInfo> {
        g.ports()
            .map(|(slot, p)| PortInfo {
                id: slot,
                name: g.port_name(slot).unwrap_or_default(),
                port_type: port_type_name(p.ptype).to_string(),
                flags: p.flags,
                aliases: p.aliases.clone(),
                connections: g
                    .connections_of(slot)
                    .into_iter()
                    .filter_map(|q| g.port_name(q))
                    .collect(),
                latency: if p.is_input() {
                    (p.latency[2], p.latency[3])
                } else {
                    (p.latency[0], p.latency[1])
                },
            })
            .collect()
    }

    fn status(&self, st: &State) -> Status {
        let h = self.view.header();
        let t = self.view.timer();
        let (cycle, start) = (t.cycle, t.start_ns);
        let period = h.period_ns.load(Ordering::Relaxed).max(1);
        let table = self.view.table(self.view.current_index());
        let rel = |t: u64, c: u64| -> u64 {
            // Cycle starts are absolute deadlines, so cycle c began (cycle - c) periods before the current one.
            let base = start.saturating_sub(cycle.saturating_sub(c).saturating_mul(period));
            t.saturating_sub(base)
        };
        let clients = st
            .graph
            .clients()
            .filter(|(s, _)| *s != DRIVER)
            .map(|(slot, c)| {
                let r = self.view.record(slot).expect("slot in range");
                let last = r.finished_cycle.load(Ordering::Acquire);
                ClientStatus {
                    uuid: c.uuid,
                    internal: self.internals.contains(c.uuid),
                    name: c.name.clone(),
                    pid: c.pid,
                    slot,
                    active: c.state == ClientState::Active,
                    ports: st.graph.ports().filter(|(_, p)| p.owner == slot).count() as u32,
                    xruns: st.xruns[slot as usize],
                    last_cycle: last,
                    signal_ns: rel(r.signal_ns.load(Ordering::Relaxed), last),
                    awake_ns: rel(r.awake_ns.load(Ordering::Relaxed), last),
                    finish_ns: rel(r.finish_ns.load(Ordering::Relaxed), last),
                    cpu_ns: r.last_cpu().1,
                }
            })
            .collect();
        Status {
            server: self.name.clone(),
            driver: self.cfg.driver_name().to_string(),
            sample_rate: h.sample_rate.load(Ordering::Relaxed),
            buffer_frames: h.buffer_frames.load(Ordering::Relaxed),
            mode: if self.cfg.server.sync {
                "sync"
            } else {
                "async"
            }
            .into(),
            cycles: cycle,
            xruns: h.xruns.load(Ordering::Relaxed),
            graph_version: table.version(),
            driver_sched: self.driver_sched_now(),
            driver_cpu_ns: self.view.record(0).map_or(0, |r| r.last_cpu().1),
            clients,
            sched: self.sched_desc.clone(),
            ledger_used: self.engine.ledger_ppm.load(Ordering::Relaxed) as f64 / 1e6,
            ledger_capacity: if self.deadline_mode {
                self.ledger_capacity
            } else {
                0.0
            },
            reservations: self.reservations(st),
        }
    }

    fn reservations(&self, st: &State) -> Vec<ReservationStatus> {
        let mut v = Vec::new();
        for (slot, r) in self.engine.res.iter().enumerate() {
            let k = r.kind.load(Ordering::Relaxed);
            if k == kind::NONE {
                continue;
            }
            let name = if slot == 0 {
                "driver".to_string()
            } else {
                match st.graph.client(slot as u32) {
                    Some(c) => c.name.clone(),
                    None => continue,
                }
            };
            let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
            v.push(ReservationStatus {
                name,
                slot: slot as u32,
                tid: r.tid.load(Ordering::Relaxed),
                policy: match k {
                    kind::DEADLINE => "SCHED_DEADLINE",
                    kind::FIFO => "SCHED_FIFO",
                    _ => "SCHED_OTHER",
                }
                .into(),
                period_ns: ld(&r.period_ns),
                budget_ns: ld(&r.budget_ns),
                deadline_ns: ld(&r.deadline_ns),
                predicted_ns: ld(&r.predicted_ns),
                used_ns: ld(&r.used_ns),
                throttles: ld(&r.throttles),
                xruns: ld(&r.xruns),
                updates: ld(&r.updates),
            });
        }
        v
    }

    /// Critical-path deadlines: a client woken `head` into the cycle (the
    /// longest chain of predicted work before it) that must leave `tail` for
    /// the work after it gets the relative deadline `period - head - tail`,
    /// so EDF finishes the chain inside the cycle. Off the real-time path;
    /// sends only deadlines that moved by more than 5%.
    fn update_deadlines(&self, sent: &mut [u64]) {
        let st = self.lock();
        let c = st.graph.compile();
        let period = self.view.header().period_ns.load(Ordering::Relaxed);
        let n = c.clients.len();
        let work = |slot: usize| {
            let r = &self.engine.res[slot];
            r.predicted_ns
                .load(Ordering::Relaxed)
                .max(r.used_ns.load(Ordering::Relaxed))
        };
        let down = |slot: usize| {
            let e = &c.clients[slot];
            c.edges[e.down_start as usize..(e.down_start + e.down_count) as usize]
                .iter()
                .map(|&d| d as usize)
        };
        let mut head = vec![0u64; n];
        for &u in &c.order {
            let u = u as usize;
            for d in down(u).filter(|&d| d != 0 && d < n) {
                head[d] = head[d].max(head[u] + work(u));
            }
        }
        let mut tail = vec![0u64; n];
        for &u in c.order.iter().rev() {
            let u = u as usize;
            tail[u] = down(u)
                .filter(|&d| d != 0 && d < n)
                .map(|d| work(d) + tail[d])
                .max()
                .unwrap_or(0);
        }
        drop(st);
        for &slot in c.order.iter().skip(1) {
            let slot = slot as usize;
            if self.engine.res[slot].kind.load(Ordering::Relaxed) != kind::DEADLINE
                || slot >= sent.len()
            {
                continue;
            }
            let d = period
                .saturating_sub(head[slot] + tail[slot])
                .clamp(work(slot).max(1), period);
            if sent[slot] == 0 || d.abs_diff(sent[slot]) * 20 > sent[slot] {
                sent[slot] = d;
                self.command(Command::SetDeadline {
                    slot: slot as u32,
                    deadline_ns: d,
                });
            }
        }
    }

    fn slot_name(&self, slot: u32) -> String {
        if slot == 0 {
            return "driver".into();
        }
        self.lock().graph.client(slot).map_or_else(
            || format!("slot {slot}"),
            |c| format!("client {:?}", c.name),
        )
    }

    fn housekeeping(self: Arc<Self>, mut rx: rtrb::Consumer<RtEvent>) {
        let mut late: Vec<u32> = Vec::new();
        let mut logged = 0u64;
        let mut window = Instant::now();
        let mut suppressed = 0u64;
        let critical = self.deadline_mode
            && self.cfg.server.deadlines == crate::config::DeadlineChoice::CriticalPath
            && self.cfg.server.period_multiplier == 1;
        let mut deadline_tick = Instant::now();
        let mut sent_deadlines = vec![0u64; self.engine.res.len()];
        while !self.stopping.load(Ordering::Acquire) {
            while let Ok(ev) = rx.pop() {
                match ev {
                    RtEvent::Late { slot, .. } => late.push(slot),
                    RtEvent::CycleChecked { cycle } => {
                        let mut st = self.lock();
                        let names: Vec<String> = late
                            .iter()
                            .filter_map(|&s| st.graph.client(s).map(|c| c.name.clone()))
                            .collect();
                        for &s in &late {
                            if let Some(x) = st.xruns.get_mut(s as usize) {
                                *x += 1;
                            }
                        }
                        late.clear();
                        if logged < 20 {
                            warn!(
                                "xrun in cycle {cycle}: not finished in time: {}",
                                names.join(", ")
                            );
                            logged += 1;
                        } else {
                            suppressed += 1;
                        }
                        Self::notify(&mut st, Notification::Xrun { cycle, late: names });
                    }
                    RtEvent::DriverLate { cycle, late_ns } => {
                        warn!(
                            "driver woke {:.3} ms late before cycle {cycle}; skipped ahead",
                            late_ns as f64 / 1e6
                        );
                        let mut st = self.lock();
                        Self::notify(
                            &mut st,
                            Notification::Xrun {
                                cycle,
                                late: vec![],
                            },
                        );
                    }
                    RtEvent::Reserved {
                        slot,
                        runtime_ns,
                        period_ns,
                    } => {
                        info!(
                            "{}: SCHED_DEADLINE reservation {:.0}/{:.0} us",
                            self.slot_name(slot),
                            runtime_ns as f64 / 1e3,
                            period_ns as f64 / 1e3
                        );
                    }
                    RtEvent::Refused {
                        slot,
                        asked_ppm,
                        free_ppm,
                        errno,
                    } => {
                        let by = if errno == 0 {
                            format!(
                                "resound's ledger (capacity {:.3} CPU)",
                                self.ledger_capacity
                            )
                        } else {
                            format!("the kernel ({})", std::io::Error::from_raw_os_error(errno))
                        };
                        warn!(
                            "{}: reservation of {:.3} CPU refused by {by}; {:.3} CPU free",
                            self.slot_name(slot),
                            asked_ppm as f64 / 1e6,
                            free_ppm as f64 / 1e6
                        );
                    }
                    RtEvent::Fallback { slot, fifo } => {
                        warn!(
                            "{} runs {} instead of a reservation",
                            self.slot_name(slot),
                            if fifo { "SCHED_FIFO" } else { "SCHED_OTHER" }
                        );
                    }
                    RtEvent::DriverFault { cycle, fault } => {
                        error!("audio driver fault before cycle {cycle}: {fault:?}");
                    }
                    RtEvent::Corrupt { slot, status } => {
                        let mut st = self.lock();
                        if st.condemned.contains(&slot) {
                            continue;
                        }
                        st.condemned.push(slot);
                        let name = st
                            .graph
                            .client(slot)
                            .map(|c| c.name.clone())
                            .unwrap_or_default();
                        error!(
                            "client {name:?} wrote an invalid status {status:#x} into its activation record; removing it"
                        );
                        if let Some(s) = st.sessions.values().find(|s| s.slot == Some(slot)) {
                            let _ = s.stream.shutdown(std::net::Shutdown::Both);
                        }
                    }
                }
            }
            if critical && deadline_tick.elapsed() >= Duration::from_millis(250) {
                deadline_tick = Instant::now();
                self.update_deadlines(&mut sent_deadlines);
            }
            if window.elapsed() >= Duration::from_secs(1) {
                let lost = self.engine.dropped_events.swap(0, Ordering::Relaxed);
                if lost > 0 {
                    warn!("{lost} driver event(s) lost: the event ring was full");
                }
                if suppressed > 0 {
                    warn!("{suppressed} more xrun(s) in the last second");
                }
                suppressed = 0;
                logged = 0;
                window = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the server: notifies every client, wakes their threads, stops the driver.
    pub fn stop(&self, reason: &str) {
        if self.stopping.swap(true, Ordering::AcqRel) {
            return;
        }
        info!("stopping: {reason}");
        let h = self.view.header();
        {
            let mut st = self.lock();
            Self::notify(
                &mut st,
                Notification::Shutdown {
                    reason: reason.to_string(),
                },
            );
        }
        h.running.store(0, Ordering::Release);
        self.engine.stop.store(true, Ordering::Release);
        for slot in 0..self.view.layout().caps.max_clients {
            if let Some(r) = self.view.record(slot) {
                futex::bump_and_wake(&r.trigger);
            }
        }
        let t0 = Instant::now();
        while self.engine.running.load(Ordering::Acquire) && t0.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Give the writer threads a moment to flush the shutdown notification.
        std::thread::sleep(Duration::from_millis(100));
        // Wake the listener so it sees `stopping`, then remove the socket.
        let _ = UnixStream::connect(&self.socket);
        let _ = std::fs::remove_file(&self.socket);
        let st = self.lock();
        for s in st.sessions.values() {
            let _ = s.stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Decides the scheduling mode from the options and what the system permits.
/// Falls back (and says so once) from deadline to fifo to other.
fn sched_mode(cfg: &Config) -> (Mode, String, resound_sched::Ledger) {
    use crate::config::SchedChoice;
    let a = &cfg.server;
    let system = resound_sched::Ledger::from_system();
    let ledger = resound_sched::Ledger::with_capacity(
        a.max_bandwidth
            .map_or(system.capacity(), |m| m.min(system.capacity())),
    );
    let prio = a.priority;
    let fifo = || {
        if resound_sched::fifo_permitted() {
            (Mode::Fifo(prio), format!("fifo {prio}"))
        } else {
            warn!("SCHED_FIFO is not permitted here either (no CAP_SYS_NICE / RLIMIT_RTPRIO); running SCHED_OTHER");
            (Mode::Other, "other (real-time not permitted)".to_string())
        }
    };
    let (mode, desc) = match (a.wants_realtime(), a.sched) {
        (false, _) => (Mode::Other, "other".to_string()),
        (true, SchedChoice::Other) => (Mode::Other, "other".to_string()),
        (true, SchedChoice::Fifo) => fifo(),
        (true, SchedChoice::Deadline) if !resound_sched::deadline_permitted() => {
            warn!("SCHED_DEADLINE is not permitted here (needs CAP_SYS_NICE); falling back to SCHED_FIFO");
            fifo()
        }
        (true, SchedChoice::Deadline) => {
            let period_ns = cfg.period() as u64 * 1_000_000_000 / cfg.rate() as u64;
            let c = resound_sched::ControllerConfig {
                audio_period_ns: period_ns,
                multiplier: a.period_multiplier,
                overprovision_pct: a.overprovision,
                fixed_pct: a.fixed_budget,
                window: a.window as usize,
                percentile: a.percentile,
                reclaim: a.reclaim(),
                ..Default::default()
            };
            let desc = format!(
                "deadline ({}{}, period x{}, {} deadlines, ledger {:.2} CPU)",
                match a.fixed_budget {
                    Some(p) => format!("fixed budget {p}%"),
                    None => format!(
                        "feedback: p{} of {} cycles +{}%",
                        a.percentile, a.window, a.overprovision
                    ),
                },
                if a.reclaim() {
                    ", reclaim"
                } else {
                    ", no reclaim"
                },
                a.period_multiplier,
                match a.deadlines {
                    crate::config::DeadlineChoice::Period => "period",
                    crate::config::DeadlineChoice::CriticalPath => "critical-path",
                },
                ledger.capacity()
            );
            (
                Mode::Deadline {
                    cfg: c,
                    fallback_priority: prio,
                },
                desc,
            )
        }
    };
    (mode, desc, ledger)
}
