//! Notifications: the [`NotificationHandler`] an application installs and
//! the dispatcher that runs it on the client's notification thread
//! ("resound-notify"), which also turns a process callback's Quit into a
//! deactivation and synthesises a shutdown when the connection is lost.

use crate::client::{Client, Inner};
use resound_protocol::wire::Notification;
use resound_shm::sync::{futex, Ordering};
use resound_shm::time::monotonic_ns;
use std::sync::atomic::AtomicU32;
use std::sync::mpsc::{Receiver, TryRecvError};
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
/// the process thread keeps the stream intact, see
/// [`crate::RtContext::wait`]).
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
            act_on_quit_request(&inner);
        }
        let next = next_note(&notes, &wake, seen);
        let Some(inner) = weak.upgrade() else { return };
        let client = Client::borrowed(inner.clone());
        match next {
            Next::Note(n) => {
                match n {
                    Notification::Shutdown { .. } => {
                        inner.shutdown_seen.store(true, Ordering::Release)
                    }
                    Notification::Evicted { .. } => client.on_evicted(),
                    _ => {}
                }
                deliver(&inner, &client, &n);
            }
            Next::Idle => continue,
            Next::Ended => {
                connection_lost(&inner, &client);
                return;
            }
        }
    }
}

/// What the dispatcher found in its queue.
enum Next {
    /// A notification.
    Note(Notification),
    /// Nothing before the poll deadline (or only a wake-up).
    Idle,
    /// The connection ended.
    Ended,
}

/// The next notification, sleeping on `wake` (last read as `seen`) for at
/// most [`DISPATCH_POLL_NS`] when the queue is empty.
fn next_note(notes: &Receiver<Option<Notification>>, wake: &AtomicU32, seen: u32) -> Next {
    let got = match notes.try_recv() {
        Err(TryRecvError::Empty) => {
            let deadline = monotonic_ns() + DISPATCH_POLL_NS;
            futex::wait_changed(wake, seen, Some(deadline));
            notes.try_recv()
        }
        other => other,
    };
    match got {
        Ok(Some(n)) => Next::Note(n),
        Err(TryRecvError::Empty) => Next::Idle,
        Ok(None) | Err(TryRecvError::Disconnected) => Next::Ended,
    }
}

/// Deactivates the activation whose process thread asked to quit, if any:
/// only that one (not a newer one); an application's own deactivation may
/// have come first.
fn act_on_quit_request(inner: &Arc<Inner>) {
    let gen = inner.quit_requested.swap(0, Ordering::AcqRel);
    if gen != 0 {
        let _ = Client::borrowed(inner.clone()).deactivate_gen(Some(gen));
    }
}

/// The connection ended: later requests fail at once, and the application
/// hears of it as a shutdown unless it already did or closed the client.
fn connection_lost(inner: &Inner, client: &Client) {
    inner.conn.mark_gone();
    if !inner.shutdown_seen.swap(true, Ordering::AcqRel) && !inner.closed.load(Ordering::Acquire) {
        let n = Notification::Shutdown {
            reason: "connection to the server lost".into(),
        };
        deliver(inner, client, &n);
    }
}

/// Runs the application's handler, if any, on one notification.
fn deliver(inner: &Inner, client: &Client, n: &Notification) {
    let mut h = inner.handler.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = h.as_mut() {
        h.notification(client, n);
    }
}
