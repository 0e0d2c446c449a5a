//! The application's callbacks: [`Cb`] (a C function and its argument),
//! the [`Callbacks`] set while the client is inactive, and the
//! jack_set_*_callback / jack_on_*shutdown entry points that register them
//! (application threads, not real-time).

use crate::client::{client, LjClient};
use crate::ffi::{self, *};
use std::ffi::{c_int, c_void};

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
// SAFETY: a shared `Cb` is only read (a copy of the function pointer and
// argument); calling it from several threads is what the application
// agreed to when it registered a JACK callback.
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
