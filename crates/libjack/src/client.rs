//! `jack_client_t`: the [`LjClient`] object, opening and closing
//! (jack_client_open, jack_client_new, jack_client_close), and the checks
//! every entry point uses (a valid client handle, which thread is calling,
//! which graph table is current).
//!
//! A `jack_client_t *` is a pointer to a boxed [`LjClient`], which wraps one
//! [`resound_client::Client`]. Threads, as in jackd:
//!
//! * **process thread** (real-time, created at jack_activate; see
//!   [`crate::process`]): buffer-size and thread-init callbacks once, then per
//!   cycle the sync callback (slow-sync clients), the process callback, the
//!   timebase callback (master). Nothing of ours on this path allocates,
//!   locks or blocks; the callbacks the application registered are read
//!   from atomics.
//! * **notification thread** (resound-client's dispatcher; see
//!   [`crate::notify`]): every other callback, only while the client is
//!   active (jackd's rule), except shutdown, which always comes.
//!
//! The functions here run on application threads (not real-time), except
//! [`LjClient::on_process_thread`] and [`LjClient::table_index`], which are
//! real-time safe.

use crate::callbacks::{Callbacks, Cb};
use crate::ffi::{self, *};
use crate::port::LjPort;
use crate::process::RtShared;
use resound_client::{Client, Code, Error, Event, OpenOptions};
use resound_shm::port_flags;
use resound_shm::sync::Ordering;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicPtr};
use std::sync::Mutex;

const MAGIC: u64 = u64::from_le_bytes(*b"rsJACKcl");

/// The object behind `jack_client_t *`.
pub struct LjClient {
    magic: u64,
    pub client: Client,
    pub name: CString,
    pub cbs: Mutex<Callbacks>,
    /// Sync and timebase callbacks may change while active: the process
    /// thread reads them through these pointers. Replaced boxes are kept in
    /// `retired` until close, so the process thread never sees freed memory.
    pub(crate) sync: AtomicPtr<Cb<JackSyncCallback>>,
    pub(crate) timebase: AtomicPtr<Cb<JackTimebaseCallback>>,
    retired: Mutex<Vec<RetiredCb>>,
    pub ports: Mutex<HashMap<u32, Box<LjPort>>>,
    pub rt: RtShared,
    /// The server went away or shut the client down.
    pub zombie: AtomicBool,
    /// Notification thread id (to recognise calls from inside callbacks).
    pub(crate) notify_thread: Mutex<Option<std::thread::ThreadId>>,
    /// While a port-unregistration callback runs: the port being removed
    /// and its full name, so `jack_port_by_id` and `jack_port_name` answer
    /// for it there as on jackd (it is already gone from the graph).
    pub(crate) departing: Mutex<Option<(u32, CString)>>,
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
            // SAFETY: created by Box::into_raw in set_timebase and swapped
            // out here, so owned by nobody else; the process thread that
            // called it has been joined (close deactivates first).
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
                // SAFETY: a timebase callback replaced earlier: created by
                // Box::into_raw, kept here until no thread can call it (the
                // process thread is joined), freed exactly once.
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
    open_with(&req, opts, st)
}

/// Opens client `req` with `opts` and wraps it for the C API; null (and
/// `st` set) on failure.
pub(crate) fn open_with(req: &str, opts: OpenOptions, st: &mut c_int) -> *mut c_void {
    use ffi::status::*;
    let client = match Client::open(req, opts) {
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
        departing: Mutex::new(None),
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

    /// The full name of the port being unregistered, if `id` is the one
    /// whose unregistration callback runs now (see `departing`).
    pub(crate) fn departing_name(&self, id: u32) -> Option<*const c_char> {
        let d = self.departing.lock().unwrap_or_else(|e| e.into_inner());
        d.as_ref()
            .filter(|(p, _)| *p == id)
            .map(|(_, n)| n.as_ptr())
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
            self.client.current_table_index()
        }
    }

    /// Before a query of connections off the process thread: waits until a
    /// connection change the server has answered is in the current table
    /// (connection changes are answered before the driver's switch, so
    /// that back-to-back requests take effect in one cycle), so that a
    /// connection made just before is seen, as on jackd.
    pub fn settle_connections(&self) {
        if !self.on_process_thread() {
            self.client.settle();
        }
    }
}

/// Checks the port flags of a registration (exactly one direction).
pub fn direction_ok(flags: u32) -> bool {
    let d = flags & (port_flags::IS_INPUT | port_flags::IS_OUTPUT);
    d == port_flags::IS_INPUT || d == port_flags::IS_OUTPUT
}
