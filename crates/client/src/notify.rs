//! Notifications: the [`NotificationHandler`] an application installs and
//! the dispatcher that runs it on the client's notification thread
//! ("resound-notify"), which also turns a process callback's Quit into a
//! deactivation and synthesises a shutdown when the connection is lost.

use crate::client::{Client, Inner};
use resound_protocol::wire::Notification;
use resound_shm::sync::{futex, Ordering};
use resound_shm::time::monotonic_ns;
use std::sync::atomic::AtomicU32;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Weak};

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

/// How long the dispatcher sleeps at most when nothing wakes it.
const DISPATCH_POLL_NS: u64 = 50_000_000;

/// Runs notification callbacks; also turns a process callback's Quit into a
/// deactivation. Sleeps on the futex word `wake`, which the reader bumps for
/// every notification and the process thread when it asks to quit, so a
/// Quit is acted on at once unless a callback is still running (meanwhile
/// the process thread keeps the stream intact, see [`RtContext::wait`]).
pub(crate) fn dispatcher(
    weak: Weak<Inner>,
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
                let client = Client::borrowed(inner.clone());
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
        let client = Client::borrowed(inner.clone());
        let n = match msg {
            Ok(Some(n)) => n,
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                inner.conn.mark_gone();
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

/// Runs the application's handler, if any, on one notification.
fn deliver(inner: &Inner, client: &Client, n: &Notification) {
    let mut h = inner.handler.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = h.as_mut() {
        h.notification(client, n);
    }
}
