//! SIGINT/SIGTERM while attached: the handler only sets a flag the attach
//! loop polls each period, so the loop detaches cleanly.
//!
//! Threads: installed from the attach loop's thread; the handler runs on
//! whichever thread the signal hits.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; `signal` with a valid handler has no other
        // precondition.
        unsafe { libc::signal(sig, on_signal as *const () as libc::sighandler_t) };
    }
}

/// Whether a stop signal arrived.
pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}
