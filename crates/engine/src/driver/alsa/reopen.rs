//! Reopening a lost device off the real-time thread: [`Reopener`] runs a
//! plain helper thread ([`THREAD_NAME`]) while the device is gone. It closes
//! the dead PCMs, then once every retry interval opens and configures the
//! streams with the driver's negotiated parameters (alsa-lib's
//! configuration parsing, allocation and blocking calls all happen there)
//! and, once the device answers with the same channel counts, links them
//! and hands them over through a one-slot mailbox. The driver thread only
//! looks at the slot once a cycle ([`Reopener::take`]: one atomic load, no
//! lock, no allocation), takes a ready device, prefills and starts it.
//!
//! Threads: [`Reopener::start`] and [`Reopener::stop`] run on the driver
//! thread when the device is lost (spawning allocates, once per loss, while
//! there is no device to be late for) and when the driver stops;
//! [`Reopener::take`] runs on the driver thread in every cycle without the
//! device; the helper thread runs the rest.

use super::io::Stream;
use super::recovery::{link, open_streams};
use super::AlsaConfig;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The helper thread's name, as `/proc/PID/task/*/comm` shows it (the
/// kernel keeps 15 bytes of a thread name).
pub const THREAD_NAME: &str = "resound-reopen";

/// A device opened again: both directions configured, linked, not started.
pub struct Reopened {
    /// The capture stream (None: the driver has no capture).
    pub capture: Option<Stream>,
    /// The playback stream (None: the driver has no playback).
    pub playback: Option<Stream>,
}

/// The slot is empty: only the helper may write it.
const EMPTY: u8 = 0;
/// The slot holds a device: only the driver thread may take it.
const FULL: u8 = 1;

/// The one-slot mailbox between the helper and the driver thread.
struct Slot {
    /// [`EMPTY`] or [`FULL`]: who owns `cell` now.
    state: AtomicU8,
    /// The reopened device (written by the helper while EMPTY, taken by the
    /// driver thread while FULL).
    cell: UnsafeCell<Option<Reopened>>,
    /// Asks the helper to give up (the driver stops).
    stop: AtomicBool,
}

// SAFETY: `cell` is only accessed by the side that owns it according to
// `state` (the helper while EMPTY, the driver thread while FULL); the
// Release store handing it over and the Acquire load taking it order the
// accesses. Stream is Send, so moving it between the threads is sound.
unsafe impl Sync for Slot {}

/// Reopens a lost device on a helper thread (see the module docs).
pub struct Reopener {
    /// Shared with the helper; allocated once, when the driver opens, so
    /// that taking a device never frees anything on the driver thread.
    slot: Arc<Slot>,
    /// The helper of the last loss (joined at the next loss or at stop).
    thread: Option<JoinHandle<()>>,
    /// How long the helper waits between attempts.
    pub retry: Duration,
}

impl Reopener {
    /// An idle reopener retrying every `retry` once started. Not real-time.
    pub fn new(retry: Duration) -> Reopener {
        Reopener {
            slot: Arc::new(Slot {
                state: AtomicU8::new(EMPTY),
                cell: UnsafeCell::new(None),
                stop: AtomicBool::new(false),
            }),
            thread: None,
            retry,
        }
    }

    /// Starts the helper: it closes `dead` (the lost device's streams), then
    /// tries `cfg` every retry interval until the device opens with
    /// `channels` (capture, playback) or [`Reopener::stop`] is called.
    /// Not real-time (spawns a thread; called once per loss).
    pub fn start(&mut self, cfg: AlsaConfig, channels: (u32, u32), dead: Reopened) {
        self.stop();
        self.slot.stop.store(false, Ordering::Relaxed);
        let slot = self.slot.clone();
        let retry = self.retry;
        let spawned = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                drop(dead);
                helper(&slot, &cfg, channels, retry);
            });
        // Without a helper the graph keeps running on the clock, unresumed.
        self.thread = spawned.ok();
    }

    /// Whether a helper is running (the device is being looked for).
    pub fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// The reopened device, once the helper has one. Real-time safe (an
    /// atomic load; the device is moved out of the slot, nothing is freed).
    pub fn take(&self) -> Option<Reopened> {
        if self.slot.state.load(Ordering::Acquire) != FULL {
            return None;
        }
        // SAFETY: FULL: the helper wrote the cell before its Release store
        // and will not touch it again; the driver thread owns it now.
        let r = unsafe { (*self.slot.cell.get()).take() };
        self.slot.state.store(EMPTY, Ordering::Release);
        r
    }

    /// Stops and joins the helper; a device it opened but nobody took is
    /// closed. Not real-time (the helper may be inside alsa-lib's open).
    pub fn stop(&mut self) {
        self.slot.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
        if self.slot.state.load(Ordering::Acquire) == FULL {
            // SAFETY: FULL and the helper has exited: the cell is ours.
            drop(unsafe { (*self.slot.cell.get()).take() });
            self.slot.state.store(EMPTY, Ordering::Release);
        }
    }
}

impl Drop for Reopener {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The helper's loop: wait a retry interval, try to open, hand over.
fn helper(slot: &Slot, cfg: &AlsaConfig, channels: (u32, u32), retry: Duration) {
    loop {
        let until = Instant::now() + retry;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if slot.stop.load(Ordering::Relaxed) {
                return;
            }
            std::thread::park_timeout(left);
        }
        if slot.stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok((capture, playback)) = open_streams(cfg) else {
            continue;
        };
        let got = (
            capture.as_ref().map_or(0, |s| s.neg.channels),
            playback.as_ref().map_or(0, |s| s.neg.channels),
        );
        if got != channels {
            continue; // another device under the name: closed, retried
        }
        link(capture.as_ref(), playback.as_ref());
        if slot.state.load(Ordering::Acquire) != EMPTY {
            return; // cannot happen: one helper per loss, it hands over once
        }
        // SAFETY: EMPTY: the driver thread does not touch the cell.
        unsafe { *slot.cell.get() = Some(Reopened { capture, playback }) };
        slot.state.store(FULL, Ordering::Release);
        return;
    }
}
