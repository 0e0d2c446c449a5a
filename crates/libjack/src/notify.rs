//! The notification thread (resound-client's dispatcher): JACK's
//! notification callbacks (shutdown, buffer size, sample rate, freewheel,
//! registrations, connections, renames, graph order, xruns, latency,
//! properties), run only while the client is active (jackd's rule), except
//! shutdown and eviction (zombie), which always come.
//!
//! The buffer-size callback runs here while the process thread skips the
//! application's process code (its outputs are silenced), so the two never
//! run at the same time and the process callback never sees a period its
//! buffer-size callback has not announced.

use crate::client::LjClient;
use crate::ffi;
use resound_client::Event;
use resound_shm::sync::Ordering;
use std::ffi::{c_int, CString};

impl LjClient {
    /// Runs the application's callback for one notification.
    pub(crate) fn on_notification(&self, n: &Event) {
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
                // Evicted from the cycle (JACK's zombie state): told as a
                // shutdown with the zombie status, but the client stays
                // open and may activate again.
                Event::Evicted { reason } => {
                    let reason = CString::new(reason.as_str()).unwrap_or_default();
                    if let Some(f) = cbs.info_shutdown.f {
                        f(
                            ffi::status::FAILURE | ffi::status::CLIENT_ZOMBIE,
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
                    port,
                    registered,
                    name,
                } => {
                    if let Some(f) = cbs.port_reg.f {
                        // The removed port stays visible to the callback.
                        if !*registered {
                            *self.departing.lock().unwrap_or_else(|e| e.into_inner()) =
                                Some((*port, CString::new(name.as_str()).unwrap_or_default()));
                        }
                        f(*port, *registered as c_int, cbs.port_reg.arg);
                        // The name's storage lives until here: the callback
                        // may not keep it (as on jackd, where the port is freed).
                        *self.departing.lock().unwrap_or_else(|e| e.into_inner()) = None;
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
}
