//! [`Client`]: opening and closing a client, its identity and the server
//! values it reads from shared memory, activation (starting and stopping the
//! process thread) and deactivation. The shared state all of a client's
//! threads use is [`Inner`].
//!
//! Threads: every method here is for non-real-time threads (they talk to the
//! server over the socket or join threads), unless its docs say
//! `Real-time safe.`.

use crate::connection::{handshake, Connection, NotifySink, OpenOptions};
use crate::error::{Error, Result};
use crate::notify::{dispatcher, NotificationHandler};
use crate::process::{process_thread, Control, ProcessHandler, RtContext};
use crate::requests::{expect_ok, Requests};
use resound_protocol::wire::{HelloKind, Reply, Request, Welcome};
use resound_shm::sync::{futex, switch, Ordering};
use resound_shm::transport::TransportCell;
use resound_shm::{Table, Timer, View};
use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The running process thread of one activation.
struct RtThread {
    /// Tells the thread to end.
    quit: Arc<AtomicBool>,
    handle: JoinHandle<()>,
    /// Activation generation (see `Inner::quit_requested`).
    gen: u32,
}

/// What a client's handles and threads share.
pub(crate) struct Inner {
    pub name: String,
    pub server: String,
    pub slot: u32,
    pub uuid: u64,
    /// The control segment and every node segment mapped here (the reader
    /// thread maps the other clients' as the server passes them on).
    pub view: Arc<View>,
    /// Bumped (futex) to wake the process thread, wherever it sleeps, when
    /// it must stop.
    pub rt_wake: AtomicU32,
    pub conn: Connection,
    pub handler: Mutex<Option<Box<dyn NotificationHandler>>>,
    rt: Mutex<Option<RtThread>>,
    /// The process thread of an activation the server evicted (see
    /// [`Client::on_evicted`]), told to end but not joined yet: it may still
    /// be inside the application's process callback.
    evicted: Mutex<Option<RtThread>>,
    /// Generation of the latest activation (1, 2, ...).
    activation_gen: AtomicU32,
    /// Set by the process thread when its callback asked to quit (or its
    /// body ended): the generation of that activation, 0 for none. The
    /// dispatcher then deactivates that activation, and only that one.
    pub quit_requested: AtomicU32,
    /// Wakes the dispatcher: bumped (futex) after every notification the
    /// reader queues and when the process thread asks to quit.
    pub wake: Arc<AtomicU32>,
    /// Last consistent transport read by [`Client::transport`] (any thread):
    /// the fallback when the published cell cannot be read in bounded time.
    pub transport_last: TransportCell,
    /// The client was closed.
    pub closed: AtomicBool,
    /// A shutdown notification was delivered (or synthesised).
    pub shutdown_seen: AtomicBool,
    /// Scheduling the process thread got ("SCHED_FIFO 9" or why not).
    pub rt_sched: Mutex<String>,
    /// Kernel thread id of the process thread (0: none).
    pub rt_tid: AtomicU32,
}

/// An open client. Cheap to clone (shared handle); closed when the last
/// handle is dropped or [`Client::close`] is called.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
    /// Present in the handles the application holds; the last one dropped closes the client.
    _owner: Option<Arc<OwnerGuard>>,
}

struct OwnerGuard(Arc<Inner>);

impl Drop for OwnerGuard {
    fn drop(&mut self) {
        let _ = close_inner(&self.0);
    }
}

/// What the server's welcome gives a client.
struct Identity {
    slot: u32,
    name: String,
    uuid: u64,
    server: String,
}

fn client_identity(welcome: Welcome) -> Result<Identity> {
    match welcome {
        Welcome::Client {
            slot,
            name,
            uuid,
            server,
        } => Ok(Identity {
            slot,
            name,
            uuid,
            server,
        }),
        Welcome::Refused(e) => Err(e.into()),
        Welcome::Control { .. } | Welcome::Profile { .. } => {
            Err(Error::State("server answered as to a control session"))
        }
    }
}

/// Maps the two shared-memory segments (control, the driver's node) the
/// welcome carried.
fn map_segments(mut fds: Vec<std::os::fd::OwnedFd>) -> Result<View> {
    if fds.len() != 2 {
        return Err(Error::Io(std::io::Error::other(format!(
            "expected 2 shared-memory fds, got {}",
            fds.len()
        ))));
    }
    let driver = fds.pop().expect("two fds");
    let ctl = fds.pop().expect("two fds");
    Ok(View::open(ctl, driver)?)
}

/// Makes this client's own node segment (mapped read-write here, sealed
/// against anybody else writing it), installs it in `view` for `id`'s slot
/// and returns a descriptor of it for the server.
fn own_node(view: &View, id: &Identity) -> Result<std::os::fd::OwnedFd> {
    let seg = view.create_node()?;
    let fd = seg.fd().try_clone_to_owned()?;
    if !view.install_node(id.slot, id.uuid, seg) {
        return Err(Error::State("own node segment could not be installed"));
    }
    Ok(fd)
}

impl Client {
    /// Opens a client called `name` on a running server.
    pub fn open(name: &str, opts: OpenOptions) -> Result<Client> {
        let kind = HelloKind::Client {
            name: name.to_string(),
            exact_name: opts.exact_name,
        };
        let hs = handshake(opts.server.as_deref(), opts.dir.as_deref(), kind)?;
        let id = client_identity(hs.welcome)?;
        let view = Arc::new(map_segments(hs.fds)?);
        let node = own_node(&view, &id)?;
        let (notes, nrx) = channel();
        let wake = Arc::new(AtomicU32::new(0));
        let sink = NotifySink {
            notes,
            wake: wake.clone(),
        };
        let conn = Connection::start(hs.stream, sink, Some(view.clone()), "resound-reader")?;
        conn.attach_node(node)?;
        let inner = Arc::new(Inner {
            name: id.name,
            server: id.server,
            slot: id.slot,
            uuid: id.uuid,
            view,
            rt_wake: AtomicU32::new(0),
            conn,
            handler: Mutex::new(None),
            rt: Mutex::new(None),
            evicted: Mutex::new(None),
            activation_gen: AtomicU32::new(0),
            quit_requested: AtomicU32::new(0),
            wake: wake.clone(),
            transport_last: TransportCell::new(),
            closed: AtomicBool::new(false),
            shutdown_seen: AtomicBool::new(false),
            rt_sched: Mutex::new(String::new()),
            rt_tid: AtomicU32::new(0),
        });
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("resound-notify".into())
            .spawn(move || dispatcher(weak, nrx, wake))?;
        Ok(Client {
            _owner: Some(Arc::new(OwnerGuard(inner.clone()))),
            inner,
        })
    }

    /// A handle that does not keep the client open (for the library's own threads).
    pub(crate) fn borrowed(inner: Arc<Inner>) -> Client {
        Client {
            inner,
            _owner: None,
        }
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

    /// The server's real-time priority for client threads (0: clients do
    /// not run real-time). Real-time safe.
    pub fn client_priority(&self) -> i32 {
        self.inner.view.header().client_priority
    }

    /// The driver's timer as published for the current cycle. Real-time safe.
    pub fn timer(&self) -> Timer {
        self.inner.view.timer()
    }

    /// Index of the graph table currently in use (for [`Client::table`]).
    /// Real-time safe.
    pub fn current_table_index(&self) -> usize {
        self.inner.view.current_index()
    }

    /// Waits until a connection change the server has answered but the
    /// driver not yet taken is in the current table (connection changes are
    /// answered before the driver's switch, so that back-to-back requests
    /// take effect in the same cycle): call it before reading connections
    /// off the process thread. At most four periods; not real-time safe.
    pub fn settle(&self) {
        settle(&self.inner.view);
    }

    /// Graph table `index` (read-only shared memory): port and client
    /// entries, connections, latencies. Real-time safe.
    pub fn table(&self, index: usize) -> Table<'_> {
        self.inner.view.table(index)
    }

    /// Whether the server went away.
    pub fn server_gone(&self) -> bool {
        self.inner.conn.gone()
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

    /// Sends a request whose reply carries nothing.
    pub(crate) fn ok(&self, req: Request) -> Result<()> {
        expect_ok(self.call(req)?)
    }

    /// Connects an output to an input (full names; JACK's argument order):
    /// [`Requests::connect_ports`] under JACK's name.
    pub fn connect(&self, src: &str, dst: &str) -> Result<()> {
        self.connect_ports(src, dst)
    }

    /// Disconnects two ports: [`Requests::disconnect_ports`] under JACK's name.
    pub fn disconnect(&self, src: &str, dst: &str) -> Result<()> {
        self.disconnect_ports(src, dst)
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
        if !self.reap_evicted() {
            return Err(Error::State(
                "the process thread of the evicted activation is still inside its process callback",
            ));
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
        futex::bump_and_wake(&self.inner.rt_wake);
    }

    /// Leaves the activation graph and stops the process thread.
    pub fn deactivate(&self) -> Result<()> {
        self.deactivate_gen(None)
    }

    /// Deactivates; with `Some(gen)`, only if the running activation is that one.
    pub(crate) fn deactivate_gen(&self, only: Option<u32>) -> Result<()> {
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

    /// The server evicted this client from the cycle (it stayed late past
    /// the client timeout; JACK's zombie state) and has deactivated it: the
    /// running activation ends here without a request, and its process
    /// thread is told to stop. That thread may still be stuck in the
    /// application's process callback, so it is not joined now (this runs
    /// on the notification thread) but when the client activates again or
    /// closes. Called by the notification thread.
    pub(crate) fn on_evicted(&self) {
        let rt = self
            .inner
            .rt
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(rt) = rt else { return };
        rt.quit.store(true, Ordering::Release);
        self.wake_rt();
        self.inner.rt_tid.store(0, Ordering::Relaxed);
        let mut slot = self.inner.evicted.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = slot.replace(rt) {
            // An earlier eviction's thread: joined if it ended, else left
            // to end on its own.
            if old.handle.is_finished() {
                let _ = old.handle.join();
            }
        }
    }

    /// Joins the process thread of an evicted activation if it has ended;
    /// false if it is still running (still inside its process callback).
    fn reap_evicted(&self) -> bool {
        let mut slot = self.inner.evicted.lock().unwrap_or_else(|e| e.into_inner());
        match slot.take() {
            Some(old) if old.handle.is_finished() => {
                let _ = old.handle.join();
                true
            }
            Some(old) => {
                *slot = Some(old);
                false
            }
            None => true,
        }
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
    let c = Client::borrowed(inner.clone());
    if c.is_active() {
        let _ = c.deactivate();
    }
    // An evicted activation's thread still stuck in the application is left
    // to end on its own (it was told to stop); one that ended is joined.
    c.reap_evicted();
    let r = if inner.conn.gone() {
        Ok(Reply::Ok)
    } else {
        c.call(Request::Close)
    };
    inner.conn.shutdown();
    r.map(|_| ())
}

impl Requests for Client {
    fn call(&self, req: Request) -> Result<Reply> {
        self.inner.conn.call(req)
    }
}

/// Waits until the server's last answered graph change is in the current
/// table (see [`Client::settle`]): at most four periods and
/// 5 ms, so a stalled driver delays a query only that long. Not real-time
/// safe.
pub(crate) fn settle(view: &View) {
    let h = view.header();
    let frames = u64::from(h.buffer_frames.load(Ordering::Relaxed));
    let rate = h.sample_rate.load(Ordering::Relaxed);
    let period = resound_shm::time::frames_to_ns(frames, rate.max(1));
    let max = std::time::Duration::from_nanos(4 * period) + std::time::Duration::from_millis(5);
    switch::settle(&h.switch, max);
}
