//! Ending a blocking tracer on time: a watchdog thread that, once the
//! deadline passes or the stop flag is set, interrupts the tracer thread's
//! blocking wait with SIGALRM (a no-op handler installed without
//! SA_RESTART), every 20 ms until the tracer says it is done.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

extern "C" fn wake(_: libc::c_int) {}

/// The watchdog; dropping it stops and joins the thread.
pub struct Watchdog {
    done: Arc<AtomicBool>,
    fired: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Start watching for the calling thread: interrupt it at `deadline` or
    /// when `stop` is set.
    pub fn start(deadline: Instant, stop: Arc<AtomicBool>) -> Self {
        install_handler();
        // SAFETY: gettid and getpid have no preconditions.
        let (pid, tid) = unsafe { (libc::getpid(), libc::gettid()) };
        let done = Arc::new(AtomicBool::new(false));
        let fired = Arc::new(AtomicBool::new(false));
        let (d, f) = (done.clone(), fired.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(Ordering::Acquire) {
                if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
                    f.store(true, Ordering::Release);
                    // SAFETY: signals our own tracer thread, which has a handler.
                    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGALRM) };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self {
            done,
            fired,
            thread: Some(thread),
        }
    }

    /// Has the deadline passed or the stop been asked for?
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::Acquire)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn install_handler() {
    // SAFETY: a zeroed sigaction with a valid handler and empty mask is a
    // valid argument; `wake` is async-signal-safe (it does nothing).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = wake as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = 0; // no SA_RESTART: blocking calls return EINTR
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
    }
}
