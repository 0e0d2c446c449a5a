//! `jack_client_t`: opening and closing, activation, callbacks, the process
//! thread (process callback or jack_set_process_thread with
//! jack_cycle_wait/jack_cycle_signal) and the notification thread.
//!
//! A `jack_client_t *` is a pointer to a boxed [`LjClient`], which wraps one
//! [`resound_client::Client`]. Threads, as in jackd:
//!
//! * **process thread** (real-time, created at jack_activate): buffer-size
//!   and thread-init callbacks once, then per cycle the sync callback (slow-
//!   sync clients), the process callback, the timebase callback (master).
//!   Nothing of ours on this path allocates, locks or blocks; the callbacks
//!   the application registered are read from atomics.
//! * **notification thread** (resound-client's dispatcher): every other
//!   callback, only while the client is active (jackd's rule), except
//!   shutdown, which always comes.
//!
//! The buffer-size callback runs on the notification thread while the
//! process thread skips the application's process code (its outputs are
//! silenced), so the two never run at the same time and the process callback
//! never sees a period its buffer-size callback has not announced.

use crate::ffi::{self, *};
use crate::port::LjPort;
use resound_client::prelude::*;
use resound_client::{Client, Code, Control, Error, Event, OpenOptions, RtContext};
use resound_shm::port_flags;
use resound_shm::sync::Ordering;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::Mutex;

const MAGIC: u64 = u64::from_le_bytes(*b"rsJACKcl");

/// A callback and its argument.
#[derive(Clone, Copy)]
pub struct Cb<F: Copy> {
    pub f: Option<F>,
    pub arg: *mut c_void,
}

impl<F: Copy> Default for Cb<F> {
    fn default() -> Self {
        Cb {
            f: None,
            arg: std::ptr::null_mut(),
        }
    }
}

// SAFETY: a C function pointer and an opaque argument the application gave
// us to call from our threads, as JACK does.
unsafe impl<F: Copy> Send for Cb<F> {}
// SAFETY: as above.
unsafe impl<F: Copy> Sync for Cb<F> {}

/// Callbacks set while the client is inactive (jackd refuses changes while active).
#[derive(Clone, Copy, Default)]
pub struct Callbacks {
    pub process: Cb<JackProcessCallback>,
    pub thread: Cb<JackThreadCallback>,
    pub thread_init: Cb<JackThreadInitCallback>,
    pub shutdown: Cb<JackShutdownCallback>,
    pub info_shutdown: Cb<JackInfoShutdownCallback>,
    pub freewheel: Cb<JackFreewheelCallback>,
    pub bufsize: Cb<JackBufferSizeCallback>,
    pub srate: Cb<JackSampleRateCallback>,
    pub client_reg: Cb<JackClientRegistrationCallback>,
    pub port_reg: Cb<JackPortRegistrationCallback>,
    pub port_connect: Cb<JackPortConnectCallback>,
    pub port_rename: Cb<JackPortRenameCallback>,
    pub graph_order: Cb<JackGraphOrderCallback>,
    pub xrun: Cb<JackXRunCallback>,
    pub latency: Cb<JackLatencyCallback>,
    pub property: Cb<JackPropertyChangeCallback>,
}

/// What the process thread publishes about the cycle it runs (read by
/// jack_port_get_buffer, jack_last_frame_time & co on any thread).
#[derive(Default)]
pub struct RtShared {
    /// Graph table of the current cycle.
    pub table: AtomicUsize,
    /// Frames of the current cycle.
    pub frames: AtomicU32,
    /// Frame time of the current cycle's first frame.
    pub frame_time: AtomicU64,
    /// Start and next start (CLOCK_MONOTONIC ns) of the current cycle.
    pub start_ns: AtomicU64,
    pub next_ns: AtomicU64,
    /// pthread_t of the process thread (0: none).
    pub thread: AtomicUsize,
    /// The process thread's RtContext (only dereferenced on that thread).
    pub ctx: AtomicPtr<RtContext>,
    /// The application's process code is running.
    pub in_process: AtomicBool,
    /// The notification thread is running the buffer-size callback.
    pub gate: AtomicBool,
    /// Period the application's buffer-size callback last announced.
    pub app_bufsize: AtomicU32,
    /// The application has a buffer-size callback (fixed while active).
    pub has_bufsize: AtomicBool,
}

/// The object behind `jack_client_t *`.
pub struct LjClient {
    magic: u64,
    pub client: Client,
    pub name: CString,
    pub cbs: Mutex<Callbacks>,
    /// Sync and timebase callbacks may change while active: the process
    /// thread reads them through these pointers. Replaced boxes are kept in
    /// `retired` until close, so the process thread never sees freed memory.
    sync: AtomicPtr<Cb<JackSyncCallback>>,
    timebase: AtomicPtr<Cb<JackTimebaseCallback>>,
    retired: Mutex<Vec<RetiredCb>>,
    pub ports: Mutex<HashMap<u32, Box<LjPort>>>,
    pub rt: RtShared,
    /// The server went away or shut the client down.
    pub zombie: AtomicBool,
    /// Notification thread id (to recognise calls from inside callbacks).
    notify_thread: Mutex<Option<std::thread::ThreadId>>,
}

enum RetiredCb {
    Sync(*mut Cb<JackSyncCallback>),
    Timebase(*mut Cb<JackTimebaseCallback>),
}

// SAFETY: the raw pointers are boxes this struct owns.
unsafe impl Send for RetiredCb {}

impl Drop for LjClient {
    fn drop(&mut self) {
        let free = |p: *mut Cb<JackSyncCallback>| {
            if !p.is_null() {
                // SAFETY: created by Box::into_raw in set_sync; the process
                // thread has been joined (close deactivates first).
                drop(unsafe { Box::from_raw(p) });
            }
        };
        free(self.sync.swap(std::ptr::null_mut(), Ordering::AcqRel));
        let t = self.timebase.swap(std::ptr::null_mut(), Ordering::AcqRel);
        if !t.is_null() {
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(t) });
        }
        for r in self
            .retired
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            match r {
                RetiredCb::Sync(p) => free(p),
                // SAFETY: as above.
                RetiredCb::Timebase(p) => drop(unsafe { Box::from_raw(p) }),
            }
        }
    }
}

/// The client behind a `jack_client_t *`, None (with an error message) for
/// NULL or something that is not one of ours.
///
/// # Safety
/// `c` is NULL or a pointer returned by jack_client_open and not yet closed.
pub unsafe fn client<'a>(c: *const c_void, func: &str) -> Option<&'a LjClient> {
    if c.is_null() {
        ffi::error(&format!("{func}: called with a NULL client"));
        return None;
    }
    // SAFETY: per the function contract.
    let lc = unsafe { &*(c as *const LjClient) };
    if lc.magic != MAGIC {
        ffi::error(&format!("{func}: not a JACK client"));
        return None;
    }
    Some(lc)
}

fn status_of(e: &Error) -> c_int {
    use ffi::status::*;
    match e {
        Error::NoServer { .. } => FAILURE | SERVER_FAILED,
        Error::Server(w) => match w.code {
            Code::NameTaken => FAILURE | NAME_NOT_UNIQUE,
            Code::InvalidName => FAILURE | INVALID_OPTION,
            Code::Version => FAILURE | VERSION_ERROR,
            _ => FAILURE | SERVER_ERROR,
        },
        Error::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => FAILURE | SHM_FAILURE,
        _ => FAILURE | SERVER_ERROR,
    }
}

/// jack_client_open, non-variadic (shim.c reads the optional server name).
///
/// # Safety
/// `name` is NULL or a C string; `status` NULL or writable; `server_name`
/// NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn lj_client_open(
    name: *const c_char,
    options: c_int,
    status: *mut c_int,
    server_name: *const c_char,
) -> *mut c_void {
    ffi::guard(std::ptr::null_mut(), || {
        let mut st: c_int = 0;
        // SAFETY: per the function contract.
        let r = unsafe { open(name, options, &mut st, server_name) };
        if !status.is_null() {
            // SAFETY: the caller passes a writable jack_status_t or NULL.
            unsafe { *status = st };
        }
        r
    })
}

unsafe fn open(
    name: *const c_char,
    options: c_int,
    st: &mut c_int,
    server_name: *const c_char,
) -> *mut c_void {
    use ffi::status::*;
    // SAFETY: per lj_client_open's contract.
    let Some(req) = (unsafe { ffi::str_arg(name) }) else {
        ffi::error("jack_client_open: client name is NULL");
        *st = FAILURE | INVALID_OPTION;
        return std::ptr::null_mut();
    };
    if options & !ffi::options::OPEN != 0 {
        ffi::error(&format!("jack_client_open: invalid option {options:#x}"));
        *st = FAILURE | INVALID_OPTION;
        return std::ptr::null_mut();
    }
    let server = if options & ffi::options::SERVER_NAME != 0 {
        // SAFETY: per lj_client_open's contract.
        unsafe { ffi::str_arg(server_name) }.map(|s| s.into_owned())
    } else {
        None
    };
    let opts = OpenOptions {
        server,
        exact_name: options & ffi::options::USE_EXACT_NAME != 0,
        dir: None,
    };
    let client = match Client::open(&req, opts) {
        Ok(c) => c,
        Err(e) => {
            *st = status_of(&e);
            ffi::error(&format!("Cannot open client \"{req}\": {e}"));
            return std::ptr::null_mut();
        }
    };
    if client.name() != req {
        *st |= NAME_NOT_UNIQUE;
    }
    let name = CString::new(client.name()).unwrap_or_default();
    let lc = Box::new(LjClient {
        magic: MAGIC,
        client,
        name,
        cbs: Mutex::new(Callbacks::default()),
        sync: AtomicPtr::new(std::ptr::null_mut()),
        timebase: AtomicPtr::new(std::ptr::null_mut()),
        retired: Mutex::new(Vec::new()),
        ports: Mutex::new(HashMap::new()),
        rt: RtShared::default(),
        zombie: AtomicBool::new(false),
        notify_thread: Mutex::new(None),
    });
    let ptr = Box::into_raw(lc);
    let addr = ptr as usize;
    // SAFETY: `ptr` is the box we just leaked; it lives until
    // jack_client_close, which first replaces this handler (waiting for a
    // running callback) before freeing it.
    let lc = unsafe { &*ptr };
    lc.client
        .set_notification_handler(move |_c: &Client, n: &Event| {
            // SAFETY: see above.
            let me = unsafe { &*(addr as *const LjClient) };
            ffi::guard((), || me.on_notification(n));
        });
    crate::registry::opened(lc);
    ptr as *mut c_void
}

/// jack_client_new (deprecated): jack_client_open with JackUseExactName.
///
/// # Safety
/// `name` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn jack_client_new(name: *const c_char) -> *mut c_void {
    crate::ffi::guard(std::ptr::null_mut(), || {
        let mut opts = ffi::options::USE_EXACT_NAME;
        if std::env::var_os("JACK_START_SERVER").is_none() {
            opts |= ffi::options::NO_START_SERVER;
        }
        // SAFETY: per the function contract.
        unsafe { lj_client_open(name, opts, std::ptr::null_mut(), std::ptr::null()) }
    })
}

/// # Safety
/// `client` is NULL or an open client; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn jack_client_close(client: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_client_close") }) else {
            return -1;
        };
        if lc.on_process_thread() {
            ffi::error("jack_client_close: cannot be called from the client's own process thread");
            return -1;
        }
        crate::registry::closed(lc);
        let in_callback = lc.on_notification_thread();
        if !in_callback {
            // Waits for a notification callback in progress, then none follows.
            lc.client
                .set_notification_handler(|_: &Client, _: &Event| {});
        }
        let r = lc.client.clone().close();
        if in_callback {
            // Closing from inside one of its own callbacks: the dispatcher
            // still runs on this object, so it is left allocated (a few
            // hundred bytes) rather than freed under it.
            return if r.is_ok() { 0 } else { -1 };
        }
        // SAFETY: `client` came from Box::into_raw in open; the process thread
        // was joined by close and the notification handler no longer refers to it.
        drop(unsafe { Box::from_raw(client as *mut LjClient) });
        match r {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_client_close: {e}"));
                -1
            }
        }
    })
}

impl LjClient {
    fn on_notification_thread(&self) -> bool {
        *self.notify_thread.lock().unwrap_or_else(|e| e.into_inner())
            == Some(std::thread::current().id())
    }

    /// Whether the client is active (its process thread runs).
    pub fn active(&self) -> bool {
        self.client.is_active()
    }

    fn on_notification(&self, n: &Event) {
        {
            let mut t = self.notify_thread.lock().unwrap_or_else(|e| e.into_inner());
            if t.is_none() {
                *t = Some(std::thread::current().id());
            }
        }
        let cbs = *self.cbs.lock().unwrap_or_else(|e| e.into_inner());
        let active = self.active();
        // SAFETY: every call below is an application callback, with the
        // arguments JACK documents, on the notification thread.
        unsafe {
            match n {
                Event::Shutdown { reason } => {
                    if self.zombie.swap(true, Ordering::AcqRel) {
                        return;
                    }
                    let reason = CString::new(reason.as_str()).unwrap_or_default();
                    if let Some(f) = cbs.info_shutdown.f {
                        f(
                            ffi::status::FAILURE | ffi::status::SERVER_ERROR,
                            reason.as_ptr(),
                            cbs.info_shutdown.arg,
                        );
                    } else if let Some(f) = cbs.shutdown.f {
                        f(cbs.shutdown.arg);
                    }
                }
                Event::BufferSize(frames) => {
                    if self.rt.thread.load(Ordering::Acquire) == 0 {
                        return;
                    }
                    if let Some(f) = cbs.bufsize.f {
                        // Keep the application's process code out while it adapts.
                        self.rt.gate.store(true, Ordering::SeqCst);
                        while self.rt.in_process.load(Ordering::SeqCst) {
                            std::thread::sleep(std::time::Duration::from_micros(100));
                        }
                        f(*frames, cbs.bufsize.arg);
                        self.rt.app_bufsize.store(*frames, Ordering::SeqCst);
                        self.rt.gate.store(false, Ordering::SeqCst);
                    }
                }
                _ if !active => {}
                Event::SampleRate(rate) => {
                    if let Some(f) = cbs.srate.f {
                        f(*rate, cbs.srate.arg);
                    }
                }
                Event::Freewheel(on) => {
                    if let Some(f) = cbs.freewheel.f {
                        f(*on as c_int, cbs.freewheel.arg);
                    }
                }
                Event::ClientRegistration { name, registered } => {
                    if let Some(f) = cbs.client_reg.f {
                        if name.as_bytes() != self.name.as_bytes() {
                            let n = CString::new(name.as_str()).unwrap_or_default();
                            f(n.as_ptr(), *registered as c_int, cbs.client_reg.arg);
                        }
                    }
                }
                Event::PortRegistration {
                    port, registered, ..
                } => {
                    if let Some(f) = cbs.port_reg.f {
                        f(*port, *registered as c_int, cbs.port_reg.arg);
                    }
                }
                Event::PortRename { port, old, new } => {
                    if let Some(f) = cbs.port_rename.f {
                        let o = CString::new(old.as_str()).unwrap_or_default();
                        let nw = CString::new(new.as_str()).unwrap_or_default();
                        f(*port, o.as_ptr(), nw.as_ptr(), cbs.port_rename.arg);
                    }
                }
                Event::PortConnect {
                    src,
                    dst,
                    connected,
                } => {
                    if let Some(f) = cbs.port_connect.f {
                        f(*src, *dst, *connected as c_int, cbs.port_connect.arg);
                    }
                }
                Event::GraphOrder => {
                    if let Some(f) = cbs.graph_order.f {
                        f(cbs.graph_order.arg);
                    }
                }
                Event::Xrun { .. } => {
                    if let Some(f) = cbs.xrun.f {
                        f(cbs.xrun.arg);
                    }
                }
                Event::Latency { mode } => {
                    if let Some(f) = cbs.latency.f {
                        f(*mode as c_int, cbs.latency.arg);
                    }
                }
                Event::PropertyChange {
                    subject,
                    key,
                    change,
                } => {
                    if let Some(f) = cbs.property.f {
                        let k = CString::new(key.as_str()).unwrap_or_default();
                        let kp = if key.is_empty() {
                            std::ptr::null()
                        } else {
                            k.as_ptr()
                        };
                        f(*subject, kp, *change as c_int, cbs.property.arg);
                    }
                }
            }
        }
    }

    /// Sets a callback unless the client is active (jackd's rule).
    pub fn set_cb(&self, func: &str, set: impl FnOnce(&mut Callbacks)) -> c_int {
        if self.active() {
            ffi::error(&format!(
                "{func}: you cannot set callbacks on an active client"
            ));
            return -1;
        }
        set(&mut self.cbs.lock().unwrap_or_else(|e| e.into_inner()));
        0
    }

    /// Replaces the sync callback (allowed while active).
    pub fn set_sync(&self, cb: Cb<JackSyncCallback>) {
        let new = if cb.f.is_some() {
            Box::into_raw(Box::new(cb))
        } else {
            std::ptr::null_mut()
        };
        let old = self.sync.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            self.retired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(RetiredCb::Sync(old));
        }
    }

    /// Replaces the timebase callback (allowed while active).
    pub fn set_timebase(&self, cb: Cb<JackTimebaseCallback>) {
        let new = if cb.f.is_some() {
            Box::into_raw(Box::new(cb))
        } else {
            std::ptr::null_mut()
        };
        let old = self.timebase.swap(new, Ordering::AcqRel);
        if !old.is_null() {
            self.retired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(RetiredCb::Timebase(old));
        }
    }

    /// Whether the calling thread is this client's process thread.
    pub fn on_process_thread(&self) -> bool {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as usize;
        me != 0 && self.rt.thread.load(Ordering::Acquire) == me
    }

    /// The graph table of the cycle being processed (on the process thread),
    /// else the current one.
    pub fn table_index(&self) -> usize {
        if self.on_process_thread() {
            self.rt.table.load(Ordering::Relaxed)
        } else {
            self.client.view().current_index()
        }
    }

    /// Process thread: waits for the next cycle the application may process
    /// (sync callback done); None when the thread must end.
    fn next_cycle(&self, ctx: &mut RtContext) -> Option<u32> {
        let mut blocked_since: Option<u64> = None;
        loop {
            let c = ctx.wait()?;
            let rt = &self.rt;
            rt.table.store(c.table, Ordering::Relaxed);
            rt.frames.store(c.frames as u32, Ordering::Relaxed);
            rt.frame_time.store(c.frame_time, Ordering::Relaxed);
            rt.start_ns.store(c.cycle_start_ns, Ordering::Relaxed);
            rt.next_ns.store(c.next_start_ns, Ordering::Relaxed);
            rt.in_process.store(true, Ordering::SeqCst);
            let has_bufsize = rt.has_bufsize.load(Ordering::Relaxed);
            let mismatch = has_bufsize && rt.app_bufsize.load(Ordering::SeqCst) != c.frames as u32;
            if rt.gate.load(Ordering::SeqCst) || mismatch {
                // The buffer-size callback has not (yet) announced this period.
                // Safety valve: never hold the client silent for more than 2 s.
                let since = *blocked_since.get_or_insert(c.cycle_start_ns);
                if mismatch
                    && !rt.gate.load(Ordering::SeqCst)
                    && c.cycle_start_ns.saturating_sub(since) > 2_000_000_000
                {
                    rt.app_bufsize.store(c.frames as u32, Ordering::SeqCst);
                } else {
                    rt.in_process.store(false, Ordering::SeqCst);
                    crate::port::silence_outputs(self, c.table, c.frames);
                    ctx.signal(Control::Continue);
                    continue;
                }
            }
            let sync = self.sync.load(Ordering::Acquire);
            if !sync.is_null() {
                // SAFETY: a live box (retired ones are freed only at close).
                let cb = unsafe { *sync };
                if let (Some(f), Some(t)) = (cb.f, ctx.sync_due()) {
                    let mut pos = ffi::position_to_c(&t.pos, t.cycle);
                    // SAFETY: the application's sync callback, on the process thread.
                    if unsafe { f(t.state as c_int, &mut pos, cb.arg) } != 0 {
                        ctx.sync_ready(&t);
                    }
                }
            }
            return Some(c.frames as u32);
        }
    }

    /// Process thread: ends the cycle (timebase callback when due).
    fn end_cycle(&self, ctx: &mut RtContext, status: c_int) {
        if ctx.current().is_none() {
            return;
        }
        if status == 0 {
            let tb = self.timebase.load(Ordering::Acquire);
            if !tb.is_null() {
                // SAFETY: a live box (see next_cycle).
                let cb = unsafe { *tb };
                if let Some(f) = cb.f {
                    if let Some((state, next, new_pos)) = ctx.timebase_due() {
                        let frames = ctx.current().map_or(0, |c| c.frames as u32);
                        let mut p = ffi::position_to_c(&next, 0);
                        // SAFETY: the application's timebase callback, on the process thread.
                        unsafe { f(state as c_int, frames, &mut p, new_pos as c_int, cb.arg) };
                        ctx.timebase_commit(&ffi::position_from_c(&p));
                    }
                }
            }
        }
        self.rt.in_process.store(false, Ordering::SeqCst);
        ctx.signal(if status == 0 {
            Control::Continue
        } else {
            Control::Quit
        });
    }
}

extern "C" {
    fn lj_run_thread(fun: JackThreadCallback, arg: *mut c_void);
}

/// The body of the process thread.
fn process_body(lc: &LjClient, cbs: Callbacks, ctx: &mut RtContext) {
    lc.rt.ctx.store(ctx as *mut RtContext, Ordering::Release);
    // SAFETY: pthread_self has no preconditions.
    lc.rt
        .thread
        .store(unsafe { libc::pthread_self() } as usize, Ordering::Release);
    // jackd: the buffer-size callback with the current period, then the
    // thread-init callback, on this thread before the first cycle.
    let frames = lc.client.buffer_size();
    lc.rt
        .has_bufsize
        .store(cbs.bufsize.f.is_some(), Ordering::Relaxed);
    // SAFETY: the application's callbacks, with JACK's arguments, on the
    // process thread; lj_run_thread (shim.c) only calls `f(arg)`.
    unsafe {
        if let Some(f) = cbs.bufsize.f {
            f(frames, cbs.bufsize.arg);
        }
        lc.rt.app_bufsize.store(frames, Ordering::SeqCst);
        if let Some(f) = cbs.thread_init.f {
            f(cbs.thread_init.arg);
        }
        // jackd's activation waits for the thread to start and run thread
        // init, not for its first cycle: a jack_set_process_thread function
        // may wait for something the application does once jack_activate
        // has returned, or call the library, before its first
        // jack_cycle_wait.
        ctx.ready();
        if let Some(f) = cbs.thread.f {
            lj_run_thread(f, cbs.thread.arg);
        } else {
            while let Some(n) = lc.next_cycle(ctx) {
                let rc = match cbs.process.f {
                    Some(f) => f(n, cbs.process.arg),
                    None => 0,
                };
                // Non-zero: the callback is never called again; the next
                // wait runs the cycles silently until the deactivation.
                lc.end_cycle(ctx, rc);
            }
        }
    }
    lc.rt.in_process.store(false, Ordering::SeqCst);
    lc.rt.thread.store(0, Ordering::Release);
    lc.rt.ctx.store(std::ptr::null_mut(), Ordering::Release);
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_activate(client: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_activate") }) else {
            return -1;
        };
        if lc.active() {
            return 0;
        }
        if lc.zombie.load(Ordering::Acquire) {
            ffi::error("jack_activate: the server has gone away");
            return -1;
        }
        let cbs = *lc.cbs.lock().unwrap_or_else(|e| e.into_inner());
        let addr = lc as *const LjClient as usize;
        let r = lc.client.activate_with(move |ctx: &mut RtContext| {
            // SAFETY: the client outlives its process thread (close joins it).
            let lc = unsafe { &*(addr as *const LjClient) };
            process_body(lc, cbs, ctx);
        });
        match r {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!(
                    "Cannot activate client \"{}\": {e}",
                    lc.client.name()
                ));
                -1
            }
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_deactivate(client: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_deactivate") }) else {
            return -1;
        };
        if lc.on_process_thread() {
            ffi::error("jack_deactivate: cannot be called from the client's own process thread");
            return -1;
        }
        match lc.client.deactivate() {
            Ok(()) => 0,
            // Not active (any more): the notification thread may have just
            // deactivated it after its process callback returned non-zero.
            Err(Error::State(_)) => 0,
            Err(e) if lc.zombie.load(Ordering::Acquire) || lc.client.server_gone() => {
                let _ = e;
                0
            }
            Err(e) => {
                ffi::error(&format!("jack_deactivate: {e}"));
                -1
            }
        }
    })
}

/// jack_cycle_wait's Rust half (shim.c leaves the thread when told to).
///
/// # Safety
/// `client` is NULL or an open client; `must_exit` is writable.
#[no_mangle]
pub unsafe extern "C" fn lj_cycle_wait(
    client: *mut c_void,
    must_exit: *mut c_int,
) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_cycle_wait") }) else {
            return 0;
        };
        if !lc.on_process_thread() {
            ffi::error("jack_cycle_wait: must be called on the client's process thread");
            return 0;
        }
        let ctx = lc.rt.ctx.load(Ordering::Acquire);
        // SAFETY: set by this very thread in process_body; only used here.
        let ctx = unsafe { &mut *ctx };
        match lc.next_cycle(ctx) {
            Some(n) => n,
            None => {
                // SAFETY: per the function contract.
                unsafe { *must_exit = 1 };
                0
            }
        }
    })
}

/// jack_cycle_signal's Rust half.
///
/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn lj_cycle_signal(client: *mut c_void, status: c_int) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_cycle_signal") }) else {
            return;
        };
        if !lc.on_process_thread() {
            ffi::error("jack_cycle_signal: must be called on the client's process thread");
            return;
        }
        let ctx = lc.rt.ctx.load(Ordering::Acquire);
        // SAFETY: as in lj_cycle_wait.
        lc.end_cycle(unsafe { &mut *ctx }, status);
    })
}

macro_rules! setter {
    ($name:ident, $field:ident, $ty:ty) => {
        /// Sets the callback (inactive clients only, as in jackd).
        ///
        /// # Safety
        /// `client` is NULL or an open client.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            client: *mut c_void,
            f: Option<$ty>,
            arg: *mut c_void,
        ) -> c_int {
            ffi::guard(-1, || {
                // SAFETY: per the function contract.
                let Some(lc) = (unsafe { self::client(client, stringify!($name)) }) else {
                    return -1;
                };
                lc.set_cb(stringify!($name), |c| c.$field = Cb { f, arg })
            })
        }
    };
}

setter!(
    jack_set_freewheel_callback,
    freewheel,
    JackFreewheelCallback
);
setter!(
    jack_set_buffer_size_callback,
    bufsize,
    JackBufferSizeCallback
);
setter!(
    jack_set_client_registration_callback,
    client_reg,
    JackClientRegistrationCallback
);
setter!(
    jack_set_port_registration_callback,
    port_reg,
    JackPortRegistrationCallback
);
setter!(
    jack_set_port_connect_callback,
    port_connect,
    JackPortConnectCallback
);
setter!(
    jack_set_port_rename_callback,
    port_rename,
    JackPortRenameCallback
);
setter!(
    jack_set_graph_order_callback,
    graph_order,
    JackGraphOrderCallback
);
setter!(jack_set_xrun_callback, xrun, JackXRunCallback);
setter!(
    jack_set_thread_init_callback,
    thread_init,
    JackThreadInitCallback
);
setter!(
    jack_set_property_change_callback,
    property,
    JackPropertyChangeCallback
);

/// Sets one of the two process models, a process callback or a thread
/// function: they exclude each other, as in jackd.
fn set_process_model(
    lc: &LjClient,
    func: &str,
    other_is_set: impl FnOnce(&Callbacks) -> bool,
    other: &str,
    set: impl FnOnce(&mut Callbacks),
) -> c_int {
    if other_is_set(&lc.cbs.lock().unwrap_or_else(|e| e.into_inner())) {
        ffi::error(&format!(
            "{func}: a {other} has already been set up, both models cannot be used at the same time"
        ));
        return -1;
    }
    lc.set_cb(func, set)
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_process_callback(
    client: *mut c_void,
    f: Option<JackProcessCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_process_callback") }) else {
            return -1;
        };
        set_process_model(
            lc,
            "jack_set_process_callback",
            |c| c.thread.f.is_some(),
            "thread callback",
            |c| c.process = Cb { f, arg },
        )
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_process_thread(
    client: *mut c_void,
    f: Option<JackThreadCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_process_thread") }) else {
            return -1;
        };
        set_process_model(
            lc,
            "jack_set_process_thread",
            |c| c.process.f.is_some(),
            "process callback",
            |c| c.thread = Cb { f, arg },
        )
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_sample_rate_callback(
    client: *mut c_void,
    f: Option<JackSampleRateCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_sample_rate_callback") }) else {
            return -1;
        };
        let r = lc.set_cb("jack_set_sample_rate_callback", |c| c.srate = Cb { f, arg });
        if r == 0 {
            if let Some(f) = f {
                // jackd calls it right away with the current rate.
                // SAFETY: the application's callback with JACK's arguments.
                unsafe { f(lc.client.sample_rate(), arg) };
            }
        }
        r
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_latency_callback(
    client: *mut c_void,
    f: Option<JackLatencyCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_latency_callback") }) else {
            return -1;
        };
        let r = lc.set_cb("jack_set_latency_callback", |c| c.latency = Cb { f, arg });
        if r == 0 {
            if let Err(e) = lc.client.set_latency_callback(f.is_some()) {
                ffi::error(&format!("jack_set_latency_callback: {e}"));
                return -1;
            }
        }
        r
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_on_shutdown(
    client: *mut c_void,
    f: Option<JackShutdownCallback>,
    arg: *mut c_void,
) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        if let Some(lc) = unsafe { self::client(client, "jack_on_shutdown") } {
            lc.set_cb("jack_on_shutdown", |c| c.shutdown = Cb { f, arg });
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_on_info_shutdown(
    client: *mut c_void,
    f: Option<JackInfoShutdownCallback>,
    arg: *mut c_void,
) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        if let Some(lc) = unsafe { self::client(client, "jack_on_info_shutdown") } {
            lc.set_cb("jack_on_info_shutdown", |c| c.info_shutdown = Cb { f, arg });
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_client_name(client: *mut c_void) -> *mut c_char {
    ffi::guard(std::ptr::null_mut(), || {
        // SAFETY: per the function contract.
        match unsafe { self::client(client, "jack_get_client_name") } {
            Some(lc) => lc.name.as_ptr() as *mut c_char,
            None => std::ptr::null_mut(),
        }
    })
}

#[no_mangle]
pub extern "C" fn jack_client_name_size() -> c_int {
    crate::ffi::guard(0, || resound_shm::limits::CLIENT_NAME_MAX as c_int + 1)
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_sample_rate(client: *mut c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_sample_rate") }
            .map_or(0, |lc| lc.client.sample_rate())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_buffer_size(client: *mut c_void) -> jack_nframes_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_buffer_size") }
            .map_or(0, |lc| lc.client.buffer_size())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_buffer_size(
    client: *mut c_void,
    frames: jack_nframes_t,
) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_buffer_size") }) else {
            return -1;
        };
        match lc.client.set_buffer_size(frames) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_buffer_size: {e}"));
                libc::EINVAL
            }
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_set_freewheel(client: *mut c_void, onoff: c_int) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_set_freewheel") }) else {
            return -1;
        };
        match lc.client.set_freewheel(onoff != 0) {
            Ok(()) => 0,
            Err(e) => {
                ffi::error(&format!("jack_set_freewheel: {e}"));
                -1
            }
        }
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_is_realtime(client: *mut c_void) -> c_int {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_is_realtime") }.map_or(0, |lc| {
            (lc.client.view().header().client_priority > 0) as c_int
        })
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_client_thread_id(client: *mut c_void) -> jack_native_thread_t {
    ffi::guard(0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_client_thread_id") }.map_or(0, |lc| {
            lc.rt.thread.load(Ordering::Acquire) as jack_native_thread_t
        })
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_cpu_load(client: *mut c_void) -> f32 {
    ffi::guard(0.0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_cpu_load") }.map_or(0.0, |lc| lc.client.cpu_load())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_max_delayed_usecs(client: *mut c_void) -> f32 {
    ffi::guard(0.0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_max_delayed_usecs") }
            .map_or(0.0, |lc| lc.client.max_delayed_usecs())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_get_xrun_delayed_usecs(client: *mut c_void) -> f32 {
    ffi::guard(0.0, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_get_xrun_delayed_usecs") }
            .map_or(0.0, |lc| lc.client.xrun_delayed_usecs())
    })
}

/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_reset_max_delayed_usecs(client: *mut c_void) {
    ffi::guard((), || {
        // SAFETY: per the function contract.
        if let Some(lc) = unsafe { self::client(client, "jack_reset_max_delayed_usecs") } {
            if let Err(e) = lc.client.reset_max_delayed_usecs() {
                ffi::error(&format!("jack_reset_max_delayed_usecs: {e}"));
            }
        }
    })
}

/// Real-time priority of the process thread (-1 when not real-time).
///
/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_client_real_time_priority(client: *mut c_void) -> c_int {
    ffi::guard(-1, || {
        // SAFETY: per the function contract.
        unsafe { self::client(client, "jack_client_real_time_priority") }.map_or(-1, |lc| {
            let p = lc.client.view().header().client_priority;
            if p > 0 {
                p
            } else {
                -1
            }
        })
    })
}

/// Highest priority a client thread may use: the server's client priority.
///
/// # Safety
/// `client` is NULL or an open client.
#[no_mangle]
pub unsafe extern "C" fn jack_client_max_real_time_priority(client: *mut c_void) -> c_int {
    crate::ffi::guard(-1, || {
        // SAFETY: per the function contract.
        unsafe { jack_client_real_time_priority(client) }
    })
}

extern "C" {
    fn lj_create_thread(
        thread: *mut libc::pthread_t,
        priority: c_int,
        realtime: c_int,
        fun: JackThreadCallback,
        arg: *mut c_void,
    ) -> c_int;
}

/// Creates a thread, real-time (SCHED_FIFO, like the server's client
/// threads) when asked; a priority below 1 means the server's client priority.
///
/// # Safety
/// `client` is NULL or an open client; `thread` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn jack_client_create_thread(
    client: *mut c_void,
    thread: *mut libc::pthread_t,
    priority: c_int,
    realtime: c_int,
    fun: Option<JackThreadCallback>,
    arg: *mut c_void,
) -> c_int {
    ffi::guard(libc::EINVAL, || {
        // SAFETY: per the function contract.
        let Some(lc) = (unsafe { self::client(client, "jack_client_create_thread") }) else {
            return libc::EINVAL;
        };
        let (Some(fun), false) = (fun, thread.is_null()) else {
            ffi::error("jack_client_create_thread: NULL thread or start routine");
            return libc::EINVAL;
        };
        let server_prio = lc.client.view().header().client_priority;
        let prio = if priority >= 1 {
            priority
        } else {
            server_prio.max(1)
        };
        let rt = (realtime != 0 && server_prio > 0) as c_int;
        // SAFETY: lj_create_thread (shim.c) writes *thread and starts `fun(arg)`.
        unsafe { lj_create_thread(thread, prio, rt, fun, arg) }
    })
}

/// Checks the port flags of a registration (exactly one direction).
pub fn direction_ok(flags: u32) -> bool {
    let d = flags & (port_flags::IS_INPUT | port_flags::IS_OUTPUT);
    d == port_flags::IS_INPUT || d == port_flags::IS_OUTPUT
}
