//! # resound-client
//!
//! The native Rust client library: open a client on a running `resoundd`,
//! register ports, activate with a process callback that runs on the client's
//! own real-time thread every cycle, connect ports, and receive notifications
//! on a separate non-real-time thread.
//!
//! ```no_run
//! use resound_client::{Client, Control, OpenOptions, PortFlags, PortKind};
//! let client = Client::open("gain", OpenOptions::default())?;
//! let inp = client.register_port("in", PortKind::Audio, PortFlags::INPUT)?;
//! let mut out = client.register_port("out", PortKind::Audio, PortFlags::OUTPUT)?;
//! client.activate(move |ps: &mut resound_client::ProcessScope| {
//!     let x = inp.audio_in(ps);
//!     let y = out.audio_out(ps);
//!     for (y, x) in y.iter_mut().zip(x) {
//!         *y = 0.5 * x;
//!     }
//!     Control::Continue
//! })?;
//! client.connect("system:capture_1", "gain:in")?;
//! # Ok::<(), resound_client::Error>(())
//! ```
//!
//! Threads: [`Client`] methods are for non-real-time threads (they talk to
//! the server over the socket). [`ProcessHandler::process`] runs on the
//! process thread; [`NotificationHandler::notification`] on the notification
//! thread. In debug builds the process callback runs under
//! `assert_no_alloc`: with the `AllocDisabler` global allocator installed (as
//! resound's own tools do) an allocation there aborts the program.

use resound_protocol::wire::{
    self, Envelope, ErrorCode, FrameError, Hello, HelloKind, Notification, PortInfo, Reply,
    Request, ServerMsg, Status, Welcome, WireError,
};
use resound_shm::cycle::{input_buffer, signal_downstream};
use resound_shm::limits::{self, AUDIO_TYPE, MIDI_TYPE};
use resound_shm::sync::{futex, switch, Ordering};
use resound_shm::time::{monotonic_ns, thread_cpu_ns};
pub use resound_shm::transport::{Position, Transport};
use resound_shm::transport::{TransportCell, TransportReader, RT_TRIES};
use resound_shm::{self as shm, client_state, port_flags, NodeStatus, Table, View};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub use resound_protocol::wire::{ErrorCode as Code, Notification as Event};

/// How long a request waits for the server's reply.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Errors of client operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No server is listening under that name.
    #[error("no resound server named {name:?} is running (no socket at {path}); start one, e.g. `resoundd -d dummy`")]
    NoServer {
        /// Server name.
        name: String,
        /// Socket path tried.
        path: String,
    },
    /// The server refused or failed the request.
    #[error("{0}")]
    Server(#[from] WireError),
    /// The connection to the server failed or it went away.
    #[error("connection to the server: {0}")]
    Io(#[from] std::io::Error),
    /// The server did not answer in time.
    #[error("the server did not answer within {0:?}")]
    Timeout(Duration),
    /// The call does not fit the client's state.
    #[error("{0}")]
    State(&'static str),
}

impl Error {
    /// The server's error code, if the server reported the error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Server(e) => Some(e.code),
            _ => None,
        }
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Options of [`Client::open`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Server name (default: $RESOUND_SERVER, $JACK_DEFAULT_SERVER, "default").
    pub server: Option<String>,
    /// Fail if the name is taken instead of getting "name-01" (JackUseExactName).
    pub exact_name: bool,
    /// Socket directory (default: [`resound_protocol::paths::socket_dir`]).
    pub dir: Option<std::path::PathBuf>,
}

/// Port data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortKind {
    /// 32-bit float mono audio.
    Audio,
    /// Raw MIDI events.
    Midi,
}

impl PortKind {
    /// The JACK type name.
    pub fn type_name(self) -> &'static str {
        match self {
            PortKind::Audio => AUDIO_TYPE,
            PortKind::Midi => MIDI_TYPE,
        }
    }
}

/// JACK port flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortFlags(pub u32);

impl PortFlags {
    /// JackPortIsInput.
    pub const INPUT: PortFlags = PortFlags(port_flags::IS_INPUT);
    /// JackPortIsOutput.
    pub const OUTPUT: PortFlags = PortFlags(port_flags::IS_OUTPUT);
    /// JackPortIsTerminal.
    pub const TERMINAL: PortFlags = PortFlags(port_flags::IS_TERMINAL);
}

impl std::ops::BitOr for PortFlags {
    type Output = PortFlags;
    fn bitor(self, o: PortFlags) -> PortFlags {
        PortFlags(self.0 | o.0)
    }
}

/// What the process callback tells the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Keep running.
    Continue,
    /// Stop: the client is deactivated (as a non-zero return in JACK).
    Quit,
}

/// A port of this client. Not `Clone`: the handle that writes an output
/// buffer is unique, so two `&mut` to one buffer cannot exist.
#[derive(Debug)]
pub struct Port {
    id: u32,
    name: String,
    slot: u32,
}

impl Port {
    /// Port id (slot), as JACK's `jack_port_id_t`.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Full name "client:port".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This cycle's input signal (silence when unconnected; the source's own
    /// buffer for a single connection; a mix for several).
    pub fn audio_in<'s>(&'s self, ps: &'s ProcessScope<'_>) -> &'s [f32] {
        let p = input_buffer(ps.view, &ps.table, self.id, self.slot, ps.frames);
        // SAFETY: input_buffer returns a pointer to ≥ frames f32 in a mapped
        // segment (silence, a source buffer, or this port's own buffer).
        // Other processes write a source buffer only when they are late,
        // which gives wrong samples, never invalid memory.
        unsafe { std::slice::from_raw_parts(p, ps.frames) }
    }

    /// This cycle's output buffer (must be filled every cycle).
    pub fn audio_out<'s>(&'s mut self, ps: &'s ProcessScope<'_>) -> &'s mut [f32] {
        match ps.view.port_buffer(self.id) {
            // SAFETY: our own output port's buffer (max_frames ≥ frames f32);
            // `&mut self` makes this the only mutable view in this process.
            Some(p) => unsafe { std::slice::from_raw_parts_mut(p, ps.frames) },
            None => &mut [],
        }
    }
}

impl Port {
    /// This cycle's MIDI events at a MIDI input (merged in time order when
    /// several outputs are connected).
    pub fn midi_in<'s>(&'s self, ps: &'s ProcessScope<'_>) -> MidiIn<'s> {
        let buf = resound_shm::cycle::midi_input_buffer(
            ps.view, &ps.table, self.id, self.slot, ps.frames,
        );
        MidiIn {
            buf,
            next: 0,
            _l: std::marker::PhantomData,
        }
    }

    /// This cycle's MIDI output buffer, emptied (write events in time order).
    pub fn midi_out<'s>(&'s mut self, ps: &'s ProcessScope<'_>) -> MidiOut<'s> {
        let buf = ps
            .view
            .port_buffer(self.id)
            .map_or(std::ptr::null_mut(), |p| p as *mut u8);
        if !buf.is_null() {
            // SAFETY: our own output port's buffer (≥ MIDI_BUFFER_BYTES, aligned).
            unsafe { resound_shm::midi::init(buf, ps.frames as u32) };
        }
        MidiOut {
            buf,
            _l: std::marker::PhantomData,
        }
    }
}

/// One MIDI event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MidiEvent<'a> {
    /// Frame offset within the cycle.
    pub time: u32,
    /// The raw MIDI bytes.
    pub bytes: &'a [u8],
}

/// Iterator over a MIDI input's events this cycle.
pub struct MidiIn<'a> {
    buf: *const u8,
    next: u32,
    _l: std::marker::PhantomData<&'a ()>,
}

impl<'a> Iterator for MidiIn<'a> {
    type Item = MidiEvent<'a>;
    fn next(&mut self) -> Option<MidiEvent<'a>> {
        // SAFETY: `buf` is a MIDI buffer of MIDI_BUFFER_BYTES in a mapped
        // segment (a port buffer or the silence buffer) valid for 'a; `event`
        // checks every range, so the slice lies inside it.
        unsafe {
            while self.next < resound_shm::midi::event_count(self.buf) {
                let i = self.next;
                self.next += 1;
                if let Some(e) = resound_shm::midi::event(self.buf, i) {
                    return Some(MidiEvent {
                        time: e.time,
                        bytes: std::slice::from_raw_parts(e.data, e.size as usize),
                    });
                }
            }
        }
        None
    }
}

/// Writer of a MIDI output's events this cycle.
pub struct MidiOut<'a> {
    buf: *mut u8,
    _l: std::marker::PhantomData<&'a mut ()>,
}

impl MidiOut<'_> {
    /// Writes an event at frame `time` (times must not decrease).
    pub fn write(&mut self, time: u32, bytes: &[u8]) -> Result<(), resound_shm::midi::WriteError> {
        if self.buf.is_null() {
            return Err(resound_shm::midi::WriteError::Invalid);
        }
        // SAFETY: our own port's MIDI buffer, initialised by midi_out.
        unsafe { resound_shm::midi::write(self.buf, time, bytes.as_ptr(), bytes.len()) }
    }
}

/// What the process callback sees of the current cycle.
pub struct ProcessScope<'a> {
    view: &'a View,
    table: Table<'a>,
    frames: usize,
    cycle: u64,
    frame_time: u64,
    cycle_start_ns: u64,
}

impl ProcessScope<'_> {
    /// Frames in this cycle.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Cycle number (the server's first cycle is 1).
    pub fn cycle(&self) -> u64 {
        self.cycle
    }

    /// Frame time of the first frame of this cycle (JACK's jack_last_frame_time).
    pub fn last_frame_time(&self) -> u64 {
        self.frame_time
    }

    /// CLOCK_MONOTONIC ns at which this cycle began.
    pub fn cycle_start_ns(&self) -> u64 {
        self.cycle_start_ns
    }

    /// Raw buffer pointer of any port of the graph by id (for C bindings):
    /// inputs resolve their connections like [`Port::audio_in`].
    pub fn raw_buffer(&self, port: u32, me: u32) -> Option<*mut f32> {
        let (state, owner, flags, _) = self.table.port_info(port)?;
        if state != 1 {
            return None;
        }
        if flags & port_flags::IS_INPUT != 0 && owner == me {
            Some(input_buffer(self.view, &self.table, port, me, self.frames) as *mut f32)
        } else {
            self.view.port_buffer(port)
        }
    }
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

/// A notification callback (runs on the notification thread; may call [`Client`] methods).
pub trait NotificationHandler: Send + 'static {
    /// One notification.
    fn notification(&mut self, client: &Client, n: &Notification);
}

impl<F: FnMut(&Client, &Notification) + Send + 'static> NotificationHandler for F {
    fn notification(&mut self, client: &Client, n: &Notification) {
        self(client, n)
    }
}

struct RtThread {
    quit: Arc<AtomicBool>,
    handle: JoinHandle<()>,
    /// Activation generation (see `Inner::quit_requested`).
    gen: u32,
}

struct Inner {
    name: String,
    server: String,
    slot: u32,
    uuid: u64,
    view: View,
    stream: UnixStream,
    requests: Mutex<(u32, Receiver<(u32, Reply)>)>,
    handler: Mutex<Option<Box<dyn NotificationHandler>>>,
    rt: Mutex<Option<RtThread>>,
    /// Generation of the latest activation (1, 2, ...).
    activation_gen: AtomicU32,
    /// Set by the process thread when its callback asked to quit (or its
    /// body ended): the generation of that activation, 0 for none. The
    /// dispatcher then deactivates that activation, and only that one.
    quit_requested: AtomicU32,
    /// Wakes the dispatcher: bumped (futex) after every notification the
    /// reader queues and when the process thread asks to quit.
    wake: Arc<AtomicU32>,
    /// Last consistent transport read by [`Client::transport`] (any thread):
    /// the fallback when the published cell cannot be read in bounded time.
    transport_last: TransportCell,
    server_gone: AtomicBool,
    closed: AtomicBool,
    shutdown_seen: AtomicBool,
    /// Scheduling the process thread got ("SCHED_FIFO 9" or why not).
    rt_sched: Mutex<String>,
    rt_tid: AtomicU32,
}

/// An open client. Cheap to clone (shared handle); closed when the last
/// handle is dropped or [`Client::close`] is called.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
    /// Present in the handles the application holds; the last one dropped closes the client.
    _owner: Option<Arc<OwnerGuard>>,
}

struct OwnerGuard(Arc<Inner>);

impl Drop for OwnerGuard {
    fn drop(&mut self) {
        let _ = close_inner(&self.0);
    }
}

fn connect(server: Option<&str>, dir: Option<&std::path::Path>) -> Result<(UnixStream, String)> {
    let name = resound_protocol::paths::server_name(server);
    let path = match dir {
        Some(d) => d.join(format!("{name}.sock")),
        None => resound_protocol::paths::socket_path(&name),
    };
    match UnixStream::connect(&path) {
        Ok(s) => Ok((s, name)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            Err(Error::NoServer {
                name,
                path: path.display().to_string(),
            })
        }
        Err(e) => Err(e.into()),
    }
}

impl Client {
    /// Opens a client called `name` on a running server.
    pub fn open(name: &str, opts: OpenOptions) -> Result<Client> {
        let (stream, _server) = connect(opts.server.as_deref(), opts.dir.as_deref())?;
        let hello = Hello {
            protocol: wire::PROTOCOL_VERSION,
            kind: HelloKind::Client {
                name: name.to_string(),
                exact_name: opts.exact_name,
            },
        };
        wire::send_frame(&stream, &hello)?;
        let (payload, mut fds) =
            wire::recv_frame_with_fds(&stream, limits::MAX_REPLY_BYTES).map_err(frame_err)?;
        let (slot, actual, uuid, server) = match wire::decode::<Welcome>(&payload)? {
            Welcome::Client {
                slot,
                name,
                uuid,
                server,
            } => (slot, name, uuid, server),
            Welcome::Refused(e) => return Err(e.into()),
            Welcome::Control { .. } | Welcome::Profile { .. } => {
                return Err(Error::State("server answered as to a control session"))
            }
        };
        if fds.len() != 2 {
            return Err(Error::Io(std::io::Error::other(format!(
                "expected 2 shared-memory fds, got {}",
                fds.len()
            ))));
        }
        let shared = fds.pop().expect("two fds");
        let ctl = fds.pop().expect("two fds");
        let view = View::open(ctl, shared)?;
        let (rtx, rrx) = channel();
        let (ntx, nrx) = channel();
        let wake = Arc::new(AtomicU32::new(0));
        let inner = Arc::new(Inner {
            name: actual,
            server,
            slot,
            uuid,
            view,
            stream: stream.try_clone()?,
            requests: Mutex::new((0, rrx)),
            handler: Mutex::new(None),
            rt: Mutex::new(None),
            activation_gen: AtomicU32::new(0),
            quit_requested: AtomicU32::new(0),
            wake: wake.clone(),
            transport_last: TransportCell::new(),
            server_gone: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            shutdown_seen: AtomicBool::new(false),
            rt_sched: Mutex::new(String::new()),
            rt_tid: AtomicU32::new(0),
        });
        let weak = Arc::downgrade(&inner);
        let w = wake.clone();
        std::thread::Builder::new()
            .name("resound-reader".into())
            .spawn(move || reader(stream, rtx, ntx, w))?;
        std::thread::Builder::new()
            .name("resound-notify".into())
            .spawn(move || dispatcher(weak, nrx, wake))?;
        Ok(Client {
            _owner: Some(Arc::new(OwnerGuard(inner.clone()))),
            inner,
        })
    }

    /// The client's actual name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Name of the server.
    pub fn server_name(&self) -> &str {
        &self.inner.server
    }

    /// Slot of the client (its node index).
    pub fn slot(&self) -> u32 {
        self.inner.slot
    }

    /// Unique id.
    pub fn uuid(&self) -> u64 {
        self.inner.uuid
    }

    /// Sample rate in Hz.
    pub fn sample_rate(&self) -> u32 {
        self.inner.view.header().sample_rate.load(Ordering::Relaxed)
    }

    /// Period in frames.
    pub fn buffer_size(&self) -> u32 {
        self.inner
            .view
            .header()
            .buffer_frames
            .load(Ordering::Relaxed)
    }

    /// The shared-memory view (for bindings and tools).
    pub fn view(&self) -> &View {
        &self.inner.view
    }

    /// Whether the server went away.
    pub fn server_gone(&self) -> bool {
        self.inner.server_gone.load(Ordering::Acquire)
    }

    /// Scheduling the process thread got, once activated.
    pub fn process_thread_sched(&self) -> String {
        self.inner
            .rt_sched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Kernel thread id of the process thread (0 when not active).
    pub fn process_thread_tid(&self) -> i32 {
        self.inner.rt_tid.load(Ordering::Relaxed) as i32
    }

    fn request(&self, req: Request) -> Result<Reply> {
        request(
            &self.inner.stream,
            &self.inner.requests,
            &self.inner.server_gone,
            req,
        )
    }

    fn ok(&self, req: Request) -> Result<()> {
        expect_ok(self.request(req)?)
    }

    /// Registers a port ("short" name; the full name is "client:short").
    pub fn register_port(&self, short: &str, kind: PortKind, flags: PortFlags) -> Result<Port> {
        match self.request(Request::RegisterPort {
            name: short.into(),
            port_type: kind.type_name().into(),
            flags: flags.0,
        })? {
            Reply::Port { port, name } => Ok(Port {
                id: port,
                name,
                slot: self.inner.slot,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// Registers a port of any type name (for bindings).
    pub fn register_port_raw(&self, short: &str, type_name: &str, flags: u32) -> Result<Port> {
        match self.request(Request::RegisterPort {
            name: short.into(),
            port_type: type_name.into(),
            flags,
        })? {
            Reply::Port { port, name } => Ok(Port {
                id: port,
                name,
                slot: self.inner.slot,
            }),
            other => Err(unexpected(other)),
        }
    }

    /// Unregisters a port.
    pub fn unregister_port(&self, port: Port) -> Result<()> {
        self.ok(Request::UnregisterPort { port: port.id })
    }

    /// Unregisters a port of this client by id (for bindings that keep ids, not [`Port`]s).
    pub fn unregister_port_id(&self, id: u32) -> Result<()> {
        self.ok(Request::UnregisterPort { port: id })
    }

    /// Loads one of the server's built-in in-process clients (JACK's internal
    /// clients), e.g. `load_internal("", "profiler", "-c -p -e")`. It stays
    /// loaded until [`Client::unload_internal`], whatever happens to this client.
    pub fn load_internal(
        &self,
        client_name: &str,
        load_name: &str,
        load_init: &str,
    ) -> Result<InternalClientInfo> {
        expect_internal(self.request(load_internal_request(client_name, load_name, load_init))?)
    }

    /// Unloads an internal client by uuid.
    pub fn unload_internal(&self, uuid: u64) -> Result<()> {
        self.ok(Request::UnloadInternal { uuid })
    }

    /// Connects an output to an input (full names; JACK's argument order).
    pub fn connect(&self, src: &str, dst: &str) -> Result<()> {
        self.ok(Request::Connect {
            src: src.into(),
            dst: dst.into(),
        })
    }

    /// Disconnects two ports.
    pub fn disconnect(&self, src: &str, dst: &str) -> Result<()> {
        self.ok(Request::Disconnect {
            src: src.into(),
            dst: dst.into(),
        })
    }

    /// Removes every connection of a port.
    pub fn disconnect_all(&self, port: &str) -> Result<()> {
        self.ok(Request::DisconnectAll { port: port.into() })
    }

    /// Server status.
    pub fn status(&self) -> Result<Status> {
        expect_status(self.request(Request::Status)?)
    }

    /// Changes the server's period (frames per cycle).
    pub fn set_buffer_size(&self, frames: u32) -> Result<()> {
        self.ok(Request::SetBufferSize { frames })
    }

    /// Every port with its connections (asks the server).
    pub fn list_ports(&self) -> Result<Vec<PortInfo>> {
        expect_ports(self.request(Request::ListPorts)?)
    }

    /// A consistent snapshot of the graph read from shared memory (no server round trip).
    pub fn snapshot(&self) -> Snapshot {
        snapshot(&self.inner.view)
    }

    /// Every client of the graph, read from shared memory.
    pub fn clients(&self) -> Vec<ClientSnap> {
        clients(&self.inner.view)
    }

    /// Renames one of this client's ports (new short name).
    pub fn rename_port(&self, port: u32, short: &str) -> Result<()> {
        self.ok(Request::RenamePort {
            port,
            name: short.into(),
        })
    }

    /// Adds an alias to any port.
    pub fn set_port_alias(&self, port: u32, alias: &str) -> Result<()> {
        self.ok(Request::SetPortAlias {
            port,
            alias: alias.into(),
        })
    }

    /// Removes an alias of a port.
    pub fn unset_port_alias(&self, port: u32, alias: &str) -> Result<()> {
        self.ok(Request::UnsetPortAlias {
            port,
            alias: alias.into(),
        })
    }

    /// Sets the latency range (frames) of one of this client's ports;
    /// `playback` picks the playback range, else the capture range.
    pub fn set_latency_range(&self, port: u32, playback: bool, min: u32, max: u32) -> Result<()> {
        self.ok(Request::SetLatencyRange {
            port,
            mode: playback as u32,
            min,
            max,
        })
    }

    /// Whether this client sets its ports' latencies itself (in response to
    /// [`Notification::Latency`]); otherwise the server applies JACK's default rule.
    pub fn set_latency_callback(&self, on: bool) -> Result<()> {
        self.ok(Request::SetLatencyCallback { on })
    }

    /// Recomputes all latencies (and notifies clients with latency callbacks).
    pub fn recompute_latencies(&self) -> Result<()> {
        self.ok(Request::RecomputeLatencies)
    }

    /// Requests (or withdraws a request for) monitoring on a port.
    pub fn request_monitor(&self, port: u32, on: bool) -> Result<()> {
        self.ok(Request::RequestMonitor { port, on })
    }

    /// Turns monitoring of a port on if it is off, or off.
    pub fn ensure_monitor(&self, port: u32, on: bool) -> Result<()> {
        self.ok(Request::EnsureMonitor { port, on })
    }

    /// Starts or stops freewheeling (the server runs cycles as fast as the graph allows).
    pub fn set_freewheel(&self, on: bool) -> Result<()> {
        self.ok(Request::SetFreewheel { on })
    }

    /// Whether the server is freewheeling.
    pub fn freewheeling(&self) -> bool {
        self.inner.view.header().freewheel.load(Ordering::Acquire) != 0
    }

    /// DSP load in percent.
    pub fn cpu_load(&self) -> f32 {
        f32::from_bits(self.inner.view.header().cpu_load.load(Ordering::Relaxed))
    }

    /// Largest driver wake-up delay since start or the last reset (µs).
    pub fn max_delayed_usecs(&self) -> f32 {
        self.inner
            .view
            .header()
            .max_delayed_us
            .load(Ordering::Relaxed) as f32
    }

    /// Driver wake-up delay in the last cycle with an xrun (µs).
    pub fn xrun_delayed_usecs(&self) -> f32 {
        self.inner
            .view
            .header()
            .xrun_delayed_us
            .load(Ordering::Relaxed) as f32
    }

    /// Resets the maximum delay statistic.
    pub fn reset_max_delayed_usecs(&self) -> Result<()> {
        self.ok(Request::ResetMaxDelayed)
    }

    /// The transport as published for the current cycle. Real-time safe
    /// and bounded: if the published cell cannot be read consistently in a
    /// few dozen spins (the server was preempted or killed in the middle of
    /// publishing it), the last value this client read is returned.
    pub fn transport(&self) -> Transport {
        let last = &self.inner.transport_last;
        match self.inner.view.header().transport.try_load(RT_TRIES) {
            Some(t) => {
                // Several threads may read at once: a busy local cell just
                // keeps its (equally recent) value.
                last.put(&t, 4);
                t
            }
            None => last.try_load(RT_TRIES).unwrap_or_default(),
        }
    }

    fn transport_command(&self, cmd: u32) {
        if let Some(mb) = self.inner.view.mailbox(self.inner.slot) {
            let mut w = mb.transport_cmd.load(Ordering::Relaxed);
            loop {
                let nw = ((w >> 8).wrapping_add(1) << 8) | cmd as u64;
                match mb.transport_cmd.compare_exchange_weak(
                    w,
                    nw,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(x) => w = x,
                }
            }
        }
    }

    /// Starts the transport (real-time safe: a write into shared memory).
    pub fn transport_start(&self) {
        self.transport_command(resound_shm::transport::command::START);
    }

    /// Stops the transport (real-time safe).
    pub fn transport_stop(&self) {
        self.transport_command(resound_shm::transport::command::STOP);
    }

    /// Requests a new transport position (real-time safe). Only the frame and
    /// the BBT/timecode fields named in `pos.valid` count; other valid bits
    /// are an error (as JACK's EINVAL).
    pub fn transport_reposition(&self, pos: &Position) -> Result<()> {
        use resound_shm::transport::valid;
        if pos.valid & !valid::REQUESTABLE != 0 {
            return Err(Error::State(
                "a reposition may only carry BBT and timecode fields",
            ));
        }
        let mb = self
            .inner
            .view
            .mailbox(self.inner.slot)
            .ok_or(Error::State("no mailbox"))?;
        if !mb.locate_pos.put(pos, 1024) {
            return Err(Error::State("transport request cell busy"));
        }
        mb.locate_req.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Locates the transport to a frame (real-time safe).
    pub fn transport_locate(&self, frame: u32) -> Result<()> {
        self.transport_reposition(&Position {
            frame,
            ..Default::default()
        })
    }

    /// Declares whether this client is a slow-sync client (has a sync callback).
    pub fn set_sync_client(&self, on: bool) -> Result<()> {
        self.ok(Request::SetSyncClient { on })
    }

    /// Sets the slow-sync timeout (µs).
    pub fn set_sync_timeout(&self, usecs: u64) -> Result<()> {
        self.ok(Request::SetSyncTimeout { usecs })
    }

    /// Becomes the timebase master (`conditional`: fail if there is one).
    pub fn set_timebase(&self, conditional: bool) -> Result<()> {
        self.ok(Request::SetTimebase { conditional })
    }

    /// Stops being the timebase master.
    pub fn release_timebase(&self) -> Result<()> {
        self.ok(Request::ReleaseTimebase)
    }

    /// Whether this client is the timebase master.
    pub fn is_timebase_master(&self) -> bool {
        self.inner
            .view
            .header()
            .timebase_master
            .load(Ordering::Acquire)
            == self.inner.slot
    }

    /// Sets a metadata property of a subject (client or port UUID).
    pub fn set_property(
        &self,
        subject: u64,
        key: &str,
        value: &str,
        type_name: &str,
    ) -> Result<()> {
        self.ok(Request::SetProperty {
            subject,
            key: key.into(),
            value: value.into(),
            type_name: type_name.into(),
        })
    }

    /// Metadata requests that need no client identity (shared with [`ControlSession`]).
    pub fn metadata(&self) -> MetadataApi<'_> {
        MetadataApi(Box::new(move |r| self.request(r)))
    }

    /// Removes one property.
    pub fn remove_property(&self, subject: u64, key: &str) -> Result<()> {
        self.ok(Request::RemoveProperty {
            subject,
            key: key.into(),
        })
    }

    /// Removes every property of a subject; returns how many there were.
    pub fn remove_properties(&self, subject: u64) -> Result<u32> {
        match self.request(Request::RemoveProperties { subject })? {
            Reply::Count(n) => Ok(n),
            other => Err(unexpected(other)),
        }
    }

    /// Removes every property of every subject.
    pub fn remove_all_properties(&self) -> Result<()> {
        self.ok(Request::RemoveAllProperties)
    }

    /// Sets the notification handler (replacing any previous one).
    pub fn set_notification_handler(&self, h: impl NotificationHandler) {
        *self.inner.handler.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(h));
    }

    /// Starts the process thread and joins the activation graph.
    ///
    /// When the handler returns [`Control::Quit`] (or panics) it is not
    /// called again, and the client is deactivated soon after (by the
    /// notification thread). Until then its process thread keeps its place
    /// in the graph: every cycle it silences the client's outputs and wakes
    /// the clients downstream, so they run on time and hear silence.
    pub fn activate(&self, mut handler: impl ProcessHandler) -> Result<()> {
        self.activate_with(move |ctx: &mut RtContext| {
            handler.thread_init();
            ctx.ready();
            while let Some(c) = ctx.wait() {
                let ctl = assert_no_alloc::assert_no_alloc(|| {
                    let mut ps = ctx.scope(&c);
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        handler.process(&mut ps)
                    }))
                    .unwrap_or(Control::Quit)
                });
                // After Quit, wait() only returns at deactivation (None).
                ctx.signal(ctl);
            }
        })
    }

    /// Starts the process thread running `body` and joins the activation
    /// graph. `body` runs on the real-time thread; it drives the cycles itself
    /// with [`RtContext::wait`] and [`RtContext::signal`] (JACK's
    /// jack_cycle_wait/jack_cycle_signal). This call returns once the body
    /// has called [`RtContext::ready`] (or its first `wait`): what it does
    /// before is thread initialisation (jackd's thread-init callback), and
    /// it must not wait there for anything the caller does after this call.
    ///
    /// When `body` returns while the client is still active (it signalled
    /// [`Control::Quit`], or just ended), the client is deactivated as after
    /// a Quit, and until then the thread keeps running the client's cycles
    /// silently (outputs silenced, downstream woken).
    pub fn activate_with(&self, body: impl FnOnce(&mut RtContext) + Send + 'static) -> Result<()> {
        let mut rt = self.inner.rt.lock().unwrap_or_else(|e| e.into_inner());
        if rt.is_some() {
            return Err(Error::State("client is already active"));
        }
        let gen = match self.inner.activation_gen.fetch_add(1, Ordering::AcqRel) {
            u32::MAX => self.inner.activation_gen.fetch_add(1, Ordering::AcqRel) + 1,
            g => g + 1,
        };
        let quit = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = channel();
        let inner = self.inner.clone();
        let q = quit.clone();
        let handle = std::thread::Builder::new()
            .name(format!("resound-rt:{}", self.inner.name))
            .spawn(move || process_thread(inner, body, q, ready_tx, gen))?;
        let tid = ready_rx
            .recv()
            .map_err(|_| Error::State("process thread failed to start"))?;
        if let Err(e) = self.ok(Request::Activate { tid }) {
            quit.store(true, Ordering::Release);
            self.wake_rt();
            let _ = handle.join();
            return Err(e);
        }
        *rt = Some(RtThread { quit, handle, gen });
        Ok(())
    }

    fn wake_rt(&self) {
        if let Some(r) = self.inner.view.record(self.inner.slot) {
            futex::bump_and_wake(&r.trigger);
        }
    }

    /// Leaves the activation graph and stops the process thread.
    pub fn deactivate(&self) -> Result<()> {
        self.deactivate_gen(None)
    }

    /// Deactivates; with `Some(gen)`, only if the running activation is that one.
    fn deactivate_gen(&self, only: Option<u32>) -> Result<()> {
        let rt = {
            let mut g = self.inner.rt.lock().unwrap_or_else(|e| e.into_inner());
            match (g.as_ref(), only) {
                (Some(r), Some(gen)) if r.gen != gen => None,
                _ => g.take(),
            }
        };
        let Some(rt) = rt else {
            return Err(Error::State("client is not active"));
        };
        let r = if self.server_gone() {
            Ok(())
        } else {
            self.ok(Request::Deactivate)
        };
        rt.quit.store(true, Ordering::Release);
        self.wake_rt();
        let _ = rt.handle.join();
        self.inner.rt_tid.store(0, Ordering::Relaxed);
        r
    }

    /// Whether the process thread runs.
    pub fn is_active(&self) -> bool {
        self.inner
            .rt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Deactivates (if active) and closes the client.
    pub fn close(self) -> Result<()> {
        close_inner(&self.inner)
    }
}

fn close_inner(inner: &Arc<Inner>) -> Result<()> {
    if inner.closed.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let c = Client {
        inner: inner.clone(),
        _owner: None,
    };
    if c.is_active() {
        let _ = c.deactivate();
    }
    let r = if inner.server_gone.load(Ordering::Acquire) {
        Ok(Reply::Ok)
    } else {
        c.request(Request::Close)
    };
    let _ = inner.stream.shutdown(std::net::Shutdown::Both);
    r.map(|_| ())
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

fn expect_ok(r: Reply) -> Result<()> {
    match r {
        Reply::Ok => Ok(()),
        other => Err(unexpected(other)),
    }
}

/// An internal client the server loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalClientInfo {
    /// Its uuid (for [`Client::unload_internal`]).
    pub uuid: u64,
    /// Its actual name.
    pub name: String,
}

fn load_internal_request(client_name: &str, load_name: &str, load_init: &str) -> Request {
    Request::LoadInternal {
        client_name: client_name.into(),
        load_name: load_name.into(),
        init: load_init.into(),
    }
}

fn expect_internal(r: Reply) -> Result<InternalClientInfo> {
    match r {
        Reply::Internal { uuid, name } => Ok(InternalClientInfo { uuid, name }),
        other => Err(unexpected(other)),
    }
}

fn expect_status(r: Reply) -> Result<Status> {
    match r {
        Reply::Status(s) => Ok(*s),
        other => Err(unexpected(other)),
    }
}

fn expect_ports(r: Reply) -> Result<Vec<PortInfo>> {
    match r {
        Reply::Ports(p) => Ok(p),
        other => Err(unexpected(other)),
    }
}

fn unexpected(r: Reply) -> Error {
    match r {
        Reply::Err(e) => Error::Server(e),
        other => Error::Server(WireError::new(
            ErrorCode::Protocol,
            format!("unexpected reply {other:?}"),
        )),
    }
}

fn frame_err(e: FrameError) -> Error {
    match e {
        FrameError::Closed => Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "server closed the connection",
        )),
        FrameError::TooLong(n, m) => Error::Io(std::io::Error::other(format!(
            "server sent a {n}-byte frame (limit {m})"
        ))),
        FrameError::Io(e) => Error::Io(e),
    }
}

fn request(
    stream: &UnixStream,
    requests: &Mutex<(u32, Receiver<(u32, Reply)>)>,
    gone: &AtomicBool,
    req: Request,
) -> Result<Reply> {
    let mut g = requests.lock().unwrap_or_else(|e| e.into_inner());
    if gone.load(Ordering::Acquire) {
        return Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::NotConnected,
            "the server has gone away",
        )));
    }
    g.0 = g.0.wrapping_add(1) % (u32::MAX - 1);
    let seq = g.0;
    wire::send_frame(stream, &Envelope { seq, req })?;
    loop {
        match g.1.recv_timeout(REQUEST_TIMEOUT) {
            Ok((s, r)) if s == seq => {
                return match r {
                    Reply::Err(e) => Err(Error::Server(e)),
                    r => Ok(r),
                }
            }
            Ok((u32::MAX, Reply::Err(e))) => return Err(Error::Server(e)),
            Ok(_) => continue, // a stale reply to a request that timed out
            Err(RecvTimeoutError::Timeout) => return Err(Error::Timeout(REQUEST_TIMEOUT)),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Error::Io(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server has gone away",
                )))
            }
        }
    }
}

/// Reads the socket: replies go to the requester, notifications to the
/// dispatcher (woken through `wake`).
fn reader(
    mut stream: UnixStream,
    replies: Sender<(u32, Reply)>,
    notes: Sender<Option<Notification>>,
    wake: Arc<AtomicU32>,
) {
    while let Ok(payload) = wire::read_frame(&mut stream, limits::MAX_REPLY_BYTES) {
        match wire::decode::<ServerMsg>(&payload) {
            Ok(ServerMsg::Reply { seq, reply }) => {
                let _ = replies.send((seq, reply));
            }
            Ok(ServerMsg::Notify(n)) => {
                let _ = notes.send(Some(n));
                futex::bump_and_wake(&wake);
            }
            Err(_) => break,
        }
    }
    // None: the connection is gone.
    let _ = notes.send(None);
    futex::bump_and_wake(&wake);
}

/// How long the dispatcher sleeps at most when nothing wakes it.
const DISPATCH_POLL_NS: u64 = 50_000_000;

/// Runs notification callbacks; also turns a process callback's Quit into a
/// deactivation. Sleeps on the futex word `wake`, which the reader bumps for
/// every notification and the process thread when it asks to quit, so a
/// Quit is acted on at once unless a callback is still running (meanwhile
/// the process thread keeps the stream intact, see [`RtContext::wait`]).
fn dispatcher(
    weak: std::sync::Weak<Inner>,
    notes: Receiver<Option<Notification>>,
    wake: Arc<AtomicU32>,
) {
    loop {
        // Read the word before checking for work: a bump after this read
        // ends the sleep below at once, so no wake-up is lost.
        let seen = wake.load(Ordering::Acquire);
        {
            let Some(inner) = weak.upgrade() else { return };
            let gen = inner.quit_requested.swap(0, Ordering::AcqRel);
            if gen != 0 {
                let client = Client {
                    inner: inner.clone(),
                    _owner: None,
                };
                // Only the activation that asked (not a newer one); an
                // application's own jack_deactivate may have come first.
                let _ = client.deactivate_gen(Some(gen));
            }
        }
        let msg = match notes.try_recv() {
            Ok(m) => Ok(m),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {
                let deadline = monotonic_ns() + DISPATCH_POLL_NS;
                futex::wait_changed(&wake, seen, Some(deadline));
                match notes.try_recv() {
                    Ok(m) => Ok(m),
                    Err(TryRecvError::Empty) => Err(RecvTimeoutError::Timeout),
                    Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                }
            }
        };
        let Some(inner) = weak.upgrade() else { return };
        let client = Client {
            inner: inner.clone(),
            _owner: None,
        };
        let n = match msg {
            Ok(Some(n)) => n,
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                inner.server_gone.store(true, Ordering::Release);
                if !inner.shutdown_seen.swap(true, Ordering::AcqRel)
                    && !inner.closed.load(Ordering::Acquire)
                {
                    let n = Notification::Shutdown {
                        reason: "connection to the server lost".into(),
                    };
                    deliver(&inner, &client, &n);
                }
                return;
            }
            Err(RecvTimeoutError::Timeout) => continue,
        };
        if matches!(n, Notification::Shutdown { .. }) {
            inner.shutdown_seen.store(true, Ordering::Release);
        }
        deliver(&inner, &client, &n);
    }
}

fn deliver(inner: &Inner, client: &Client, n: &Notification) {
    let mut h = inner.handler.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = h.as_mut() {
        h.notification(client, n);
    }
}

/// The process thread: real-time scheduling, then the body, which runs the cycles.
fn process_thread(
    inner: Arc<Inner>,
    body: impl FnOnce(&mut RtContext),
    quit: Arc<AtomicBool>,
    ready: Sender<i32>,
    gen: u32,
) {
    let prio = inner.view.header().client_priority;
    let sched = if prio > 0 {
        match resound_sched::apply(0, &resound_sched::Policy::Fifo { priority: prio }) {
            Ok(()) => resound_sched::describe_thread(0),
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
    let seen = inner
        .view
        .record(inner.slot)
        .map_or(0, |r| r.trigger.load(Ordering::Acquire));
    let mut ctx = RtContext {
        inner,
        quit,
        ready: Some((ready, tid)),
        seen,
        current: None,
        cpu0: 0,
        synced: false,
        tb_gen: None,
        tb_locate: 0,
        gen,
        quitting: false,
        transport: TransportReader::default(),
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

/// Silences every output port of client `slot` for a cycle of `frames`
/// frames: audio zeroed, MIDI emptied. For cycles a client's process code
/// skips. Real-time safe (no allocation, lock or syscall).
pub fn silence_outputs(view: &View, table: &Table<'_>, slot: u32, frames: usize) {
    let frames = frames.min(view.layout().caps.max_frames as usize);
    for id in 0..table.port_hw() {
        let Some((1, owner, flags, ty)) = table.port_info(id) else {
            continue;
        };
        if owner != slot || flags & port_flags::IS_OUTPUT == 0 {
            continue;
        }
        if let Some(b) = view.port_buffer(id) {
            // SAFETY: an output port of `slot`, the caller's own: its buffer
            // holds max_frames f32 (≥ frames) and at least a MIDI buffer, and
            // only its owner writes it.
            unsafe {
                if ty == shm::port_type::MIDI {
                    resound_shm::midi::init(b as *mut u8, frames as u32);
                } else {
                    std::slice::from_raw_parts_mut(b, frames).fill(0.0);
                }
            }
        }
    }
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
    inner: Arc<Inner>,
    quit: Arc<AtomicBool>,
    ready: Option<(Sender<i32>, i32)>,
    seen: u32,
    current: Option<CycleInfo>,
    cpu0: u64,
    /// The sync callback ran successfully at least once since activation.
    synced: bool,
    /// Timebase generation and relocation generation the master last saw.
    tb_gen: Option<u32>,
    tb_locate: u64,
    /// This activation's generation (see `Inner::quit_requested`).
    gen: u32,
    /// Quit was signalled: the application is not called again; cycles run
    /// silently until the deactivation.
    quitting: bool,
    /// The transport as this thread last read it (bounded reads).
    transport: TransportReader,
}

impl RtContext {
    fn send_ready(&mut self) {
        if let Some((tx, tid)) = self.ready.take() {
            let _ = tx.send(tid);
        }
    }

    /// Thread initialisation is done: lets [`Client::activate_with`] return
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
    fn request_quit(&mut self) {
        if self.quitting {
            return;
        }
        self.quitting = true;
        self.inner.quit_requested.store(self.gen, Ordering::Release);
        futex::bump_and_wake(&self.inner.wake);
    }

    /// The shared-memory view.
    pub fn view(&self) -> &View {
        &self.inner.view
    }

    /// This client's slot.
    pub fn slot(&self) -> u32 {
        self.inner.slot
    }

    /// The cycle being processed (between [`RtContext::wait`] and [`RtContext::signal`]).
    pub fn current(&self) -> Option<CycleInfo> {
        self.current
    }

    /// Sleeps until this client's next cycle and returns it; None when the
    /// client is being deactivated or the server stops (the body should then
    /// return). A cycle still open is signalled first.
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

    /// Sleeps until this client is triggered for a cycle; None when it must stop.
    fn next_cycle(&mut self) -> Option<CycleInfo> {
        let inner = self.inner.clone();
        let view = &inner.view;
        let h = view.header();
        let rec = view.record(inner.slot)?;
        let max_frames = view.layout().caps.max_frames as usize;
        let stop =
            |q: &AtomicBool| q.load(Ordering::Acquire) || h.running.load(Ordering::Acquire) == 0;
        loop {
            // Checked before sleeping too: a stop whose wake-up an earlier
            // wait consumed must not leave this thread asleep for good.
            if stop(&self.quit) {
                return None;
            }
            if let futex::Wait::Changed(v) = futex::wait_changed(&rec.trigger, self.seen, None) {
                self.seen = v;
            }
            if stop(&self.quit) {
                return None;
            }
            let c = assert_no_alloc::assert_no_alloc(|| {
                // Stamp the wake-up first: reading the thread CPU clock costs
                // about 0.4 us, which belongs to the CPU time, not to the hop.
                rec.awake_ns.store(monotonic_ns(), Ordering::Relaxed);
                let cpu0 = thread_cpu_ns();
                rec.status
                    .store(NodeStatus::Running as u32, Ordering::Relaxed);
                let cycle = rec.cycle.load(Ordering::Relaxed);
                let table = view.current_index();
                if view.table(table).client_state(inner.slot) != client_state::ACTIVE {
                    // Woken by a stale trigger after deactivation: nothing to do.
                    return None;
                }
                let t = view.timer();
                let frames = (t.frames as usize).min(max_frames);
                // A late thread may run after the driver began a newer cycle: its
                // frame time and start are those of *its* cycle.
                let behind = t.cycle.saturating_sub(cycle);
                let period = h.period_ns.load(Ordering::Relaxed);
                Some((
                    CycleInfo {
                        cycle,
                        frames,
                        frame_time: t.frame_time.saturating_sub(behind * frames as u64),
                        cycle_start_ns: t.start_ns.saturating_sub(behind * period),
                        next_start_ns: t.next_start_ns.saturating_sub(behind * period),
                        table,
                    },
                    cpu0,
                ))
            });
            if let Some((c, cpu0)) = c {
                self.cpu0 = cpu0;
                return Some(c);
            }
        }
    }

    /// Ends the current cycle: stamps it finished and wakes the downstream
    /// clients. `Control::Quit` also asks for deactivation (as a non-zero
    /// return from a JACK process callback); the next [`RtContext::wait`]
    /// then returns None once the client is deactivated, running the cycles
    /// until then silently.
    pub fn signal(&mut self, ctl: Control) {
        if let Some(c) = self.current.take() {
            self.finish(c, ctl);
        }
    }

    fn finish(&mut self, c: CycleInfo, ctl: Control) {
        let inner = &self.inner;
        let view = &inner.view;
        let Some(rec) = view.record(inner.slot) else {
            return;
        };
        assert_no_alloc::assert_no_alloc(|| {
            rec.finish_ns.store(monotonic_ns(), Ordering::Relaxed);
            rec.finished_cycle.store(c.cycle, Ordering::Release);
            rec.status
                .store(NodeStatus::Finished as u32, Ordering::Release);
            signal_downstream(view, &view.table(c.table), inner.slot, c.cycle);
            rec.store_cpu(c.cycle, thread_cpu_ns().saturating_sub(self.cpu0));
        });
        if ctl == Control::Quit {
            self.request_quit();
        }
    }

    /// What the process callback sees of a cycle.
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

    /// Slow-sync step, before the process callback: the transport, if this
    /// client still has to report ready for it (JACK calls the sync callback
    /// once after activation, then after every relocation and whenever the
    /// transport enters Starting, until it returns true).
    pub fn sync_due(&mut self) -> Option<Transport> {
        let t = self.transport.read(&self.inner.view.header().transport);
        let mb = self.inner.view.mailbox(self.inner.slot)?;
        if !self.synced || mb.sync_ready.load(Ordering::Acquire) != t.sync_gen {
            Some(t)
        } else {
            None
        }
    }

    /// The sync callback returned true for `t`.
    pub fn sync_ready(&mut self, t: &Transport) {
        self.synced = true;
        if let Some(mb) = self.inner.view.mailbox(self.inner.slot) {
            mb.sync_ready.store(t.sync_gen, Ordering::Release);
        }
    }

    /// Timebase step, after the process callback: if this client is the
    /// timebase master and its callback is due (a new position — first cycle
    /// as master, or a relocation — or the transport rolls), returns the
    /// transport state, the position for the *next* cycle (extended fields of
    /// this one, frame advanced when rolling) and `new_pos`.
    pub fn timebase_due(&mut self) -> Option<(u32, Position, bool)> {
        let h = self.inner.view.header();
        if h.timebase_master.load(Ordering::Acquire) != self.inner.slot {
            self.tb_gen = None;
            return None;
        }
        let c = self.current?;
        let t = self.transport.read(&h.transport);
        let gen = h.timebase_gen.load(Ordering::Acquire);
        let new_pos = self.tb_gen != Some(gen) || self.tb_locate != t.locate_gen;
        self.tb_gen = Some(gen);
        self.tb_locate = t.locate_gen;
        if !new_pos && t.state != resound_shm::transport::state::ROLLING {
            return None;
        }
        let mut next = t.pos;
        if t.state == resound_shm::transport::state::ROLLING {
            next.frame = next.frame.wrapping_add(c.frames as u32);
        }
        Some((t.state, next, new_pos))
    }

    /// Hands the timebase master's position for the next cycle to the driver.
    pub fn timebase_commit(&self, pos: &Position) {
        let (Some(c), Some(mb)) = (self.current, self.inner.view.mailbox(self.inner.slot)) else {
            return;
        };
        if mb.timebase_pos.put(pos, 64) {
            mb.timebase_cycle.store(c.cycle, Ordering::Release);
        }
    }
}

/// A port in a [`Snapshot`].
#[derive(Debug, Clone, PartialEq)]
pub struct PortSnap {
    /// Port id.
    pub id: u32,
    /// Full name.
    pub name: String,
    /// Owning client slot.
    pub owner: u32,
    /// JACK flags.
    pub flags: u32,
    /// Type name.
    pub type_name: &'static str,
    /// Aliases.
    pub aliases: Vec<String>,
    /// Connected ports (ids): for an input its sources, for an output its destinations.
    pub connections: Vec<u32>,
}

/// A consistent copy of the graph from shared memory.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Graph version.
    pub version: u64,
    /// Clients: (slot, name, active).
    pub clients: Vec<(u32, String, bool)>,
    /// Ports.
    pub ports: Vec<PortSnap>,
}

impl Snapshot {
    /// A port by full name or alias.
    pub fn port(&self, name: &str) -> Option<&PortSnap> {
        self.ports
            .iter()
            .find(|p| p.name == name || p.aliases.iter().any(|a| a == name))
    }

    /// A port by id.
    pub fn port_by_id(&self, id: u32) -> Option<&PortSnap> {
        self.ports.iter().find(|p| p.id == id)
    }
}

/// Reads a consistent snapshot of the current graph table.
pub fn snapshot(view: &View) -> Snapshot {
    switch::read_consistent(&view.header().switch, |idx| {
        let t = view.table(idx);
        let mut s = Snapshot {
            version: t.version(),
            ..Default::default()
        };
        for slot in 0..t.client_hw() {
            if let Some(c) = t.client(slot) {
                if c.state != client_state::FREE {
                    s.clients.push((
                        slot,
                        shm::get_name(&c.name),
                        c.state == client_state::ACTIVE,
                    ));
                }
            }
        }
        for id in 0..t.port_hw() {
            let Some(p) = t.port(id) else { continue };
            if p.state != 1 {
                continue;
            }
            let sources: Vec<u32> = (0..t.source_count(id))
                .filter_map(|i| t.source_at(id, i))
                .collect();
            s.ports.push(PortSnap {
                id,
                name: shm::get_name(&p.name),
                owner: p.owner,
                flags: p.flags,
                type_name: if p.ptype == shm::port_type::MIDI {
                    MIDI_TYPE
                } else {
                    AUDIO_TYPE
                },
                aliases: p
                    .aliases
                    .iter()
                    .map(|a| shm::get_name(a))
                    .filter(|a| !a.is_empty())
                    .collect(),
                connections: sources,
            });
        }
        // Outputs: their destinations are the inputs listing them as a source.
        let dests: Vec<(u32, u32)> = s
            .ports
            .iter()
            .flat_map(|p| p.connections.iter().map(move |&src| (src, p.id)))
            .collect();
        for p in s
            .ports
            .iter_mut()
            .filter(|p| p.flags & port_flags::IS_OUTPUT != 0)
        {
            p.connections = dests
                .iter()
                .filter(|(src, _)| *src == p.id)
                .map(|(_, d)| *d)
                .collect();
        }
        s
    })
}

/// A client in the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSnap {
    /// Slot.
    pub slot: u32,
    /// Name.
    pub name: String,
    /// Active (in the activation graph).
    pub active: bool,
    /// UUID.
    pub uuid: u64,
    /// Process id.
    pub pid: u32,
}

/// Every client of the current graph table, read consistently.
pub fn clients(view: &View) -> Vec<ClientSnap> {
    switch::read_consistent(&view.header().switch, |idx| {
        let t = view.table(idx);
        (0..t.client_hw())
            .filter_map(|slot| {
                let c = t.client(slot)?;
                (c.state != client_state::FREE).then(|| ClientSnap {
                    slot,
                    name: shm::get_name(&c.name),
                    active: c.state == client_state::ACTIVE,
                    uuid: c.uuid,
                    pid: c.pid,
                })
            })
            .collect()
    })
}

type RequestFn<'a> = dyn Fn(Request) -> Result<Reply> + 'a;

/// Metadata queries (see [`Client::metadata`], [`ControlSession::metadata`]).
pub struct MetadataApi<'a>(Box<RequestFn<'a>>);

impl MetadataApi<'_> {
    /// One property: (value, type).
    pub fn get(&self, subject: u64, key: &str) -> Result<Option<wire::Property>> {
        match (self.0)(Request::GetProperty {
            subject,
            key: key.into(),
        })? {
            Reply::Property(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Every property of a subject.
    pub fn get_all(&self, subject: u64) -> Result<Vec<wire::Property>> {
        match (self.0)(Request::GetProperties { subject })? {
            Reply::Properties(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }

    /// Every subject with its properties.
    pub fn all(&self) -> Result<Vec<(u64, Vec<wire::Property>)>> {
        match (self.0)(Request::GetAllProperties)? {
            Reply::AllProperties(p) => Ok(p),
            other => Err(unexpected(other)),
        }
    }
}

/// A control session: status, port listing and (dis)connection without being a client.
pub struct ControlSession {
    stream: UnixStream,
    requests: Mutex<(u32, Receiver<(u32, Reply)>)>,
    gone: Arc<AtomicBool>,
    server: String,
}

impl ControlSession {
    /// Connects to a server as a control session (`dir`: socket directory override).
    pub fn connect(server: Option<&str>, dir: Option<&std::path::Path>) -> Result<ControlSession> {
        Self::connect_kind(server, dir, HelloKind::Control).map(|(s, _)| s)
    }

    /// Connects as a control session that also maps the server's profile
    /// ring (`resound_shm::profile`), read-only.
    pub fn connect_profile(
        server: Option<&str>,
        dir: Option<&std::path::Path>,
    ) -> Result<(ControlSession, resound_shm::profile::ProfileSegment)> {
        let (s, fd) = Self::connect_kind(server, dir, HelloKind::Profile)?;
        let fd = fd.ok_or(Error::State("the server sent no profile segment"))?;
        Ok((s, resound_shm::profile::ProfileSegment::open(fd)?))
    }

    fn connect_kind(
        server: Option<&str>,
        dir: Option<&std::path::Path>,
        kind: HelloKind,
    ) -> Result<(ControlSession, Option<std::os::fd::OwnedFd>)> {
        let (stream, _) = connect(server, dir)?;
        wire::send_frame(
            &stream,
            &Hello {
                protocol: wire::PROTOCOL_VERSION,
                kind,
            },
        )?;
        let (payload, mut fds) =
            wire::recv_frame_with_fds(&stream, limits::MAX_REPLY_BYTES).map_err(frame_err)?;
        let rd = stream.try_clone()?;
        let server = match wire::decode::<Welcome>(&payload)? {
            Welcome::Control { server } | Welcome::Profile { server } => server,
            Welcome::Refused(e) => return Err(e.into()),
            Welcome::Client { .. } => return Err(Error::State("server answered as to a client")),
        };
        let (rtx, rrx) = channel();
        let (ntx, _nrx) = channel();
        let gone = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(AtomicU32::new(0));
        std::thread::Builder::new()
            .name("resound-ctl-reader".into())
            .spawn(move || reader(rd, rtx, ntx, wake))?;
        Ok((
            ControlSession {
                stream,
                requests: Mutex::new((0, rrx)),
                gone,
                server,
            },
            fds.pop(),
        ))
    }

    /// Server name.
    pub fn server_name(&self) -> &str {
        &self.server
    }

    fn request(&self, req: Request) -> Result<Reply> {
        request(&self.stream, &self.requests, &self.gone, req)
    }

    /// Server status.
    pub fn status(&self) -> Result<Status> {
        expect_status(self.request(Request::Status)?)
    }

    /// Every port with its connections.
    pub fn list_ports(&self) -> Result<Vec<PortInfo>> {
        expect_ports(self.request(Request::ListPorts)?)
    }

    /// Changes the server's period (frames per cycle).
    pub fn set_buffer_size(&self, frames: u32) -> Result<()> {
        expect_ok(self.request(Request::SetBufferSize { frames })?)
    }

    /// Connects two ports.
    pub fn connect_ports(&self, src: &str, dst: &str) -> Result<()> {
        expect_ok(self.request(Request::Connect {
            src: src.into(),
            dst: dst.into(),
        })?)
    }

    /// Metadata queries.
    pub fn metadata(&self) -> MetadataApi<'_> {
        MetadataApi(Box::new(move |r| self.request(r)))
    }

    /// Disconnects two ports.
    pub fn disconnect_ports(&self, src: &str, dst: &str) -> Result<()> {
        expect_ok(self.request(Request::Disconnect {
            src: src.into(),
            dst: dst.into(),
        })?)
    }

    /// Loads a built-in internal client (see [`Client::load_internal`]).
    pub fn load_internal(
        &self,
        client_name: &str,
        load_name: &str,
        load_init: &str,
    ) -> Result<InternalClientInfo> {
        expect_internal(self.request(load_internal_request(client_name, load_name, load_init))?)
    }

    /// Unloads an internal client by uuid.
    pub fn unload_internal(&self, uuid: u64) -> Result<()> {
        expect_ok(self.request(Request::UnloadInternal { uuid })?)
    }
}

impl Drop for ControlSession {
    fn drop(&mut self) {
        let _ = self.request(Request::Close);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}
