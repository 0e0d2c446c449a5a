//! The process thread (real-time): what it publishes for other entry
//! points ([`RtShared`]), its body (buffer-size and thread-init callbacks
//! once, then per cycle the sync, process and timebase callbacks, or the
//! application's own jack_set_process_thread loop through jack_cycle_wait /
//! jack_cycle_signal), and jack_activate / jack_deactivate, which start and
//! stop it.
//!
//! Nothing of ours on the per-cycle path allocates, locks or blocks.

use crate::callbacks::Callbacks;
use crate::client::{client, LjClient};
use crate::ffi::{self, *};
use resound_client::{Control, Error, RtContext};
use resound_shm::sync::Ordering;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};

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

impl LjClient {
    /// Process thread: waits for the next cycle the application may process
    /// (sync callback done); None when the thread must end. Real-time safe.
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
    /// Real-time safe.
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

/// The body of the process thread: thread initialisation, then the cycles
/// (whose per-cycle path is real-time safe).
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
/// Real-time safe (it sleeps only until the client's next cycle).
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

/// jack_cycle_signal's Rust half. Real-time safe.
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
