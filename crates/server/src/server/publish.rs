//! Graph publication: latencies propagated, the graph compiled and written
//! into the *next* shared table, then (except for connection changes) a
//! wait until the driver has switched to it.
//!
//! Threads: session threads (and start-up), under the state lock (the
//! table's single writer).

use super::{Server, State};
use resound_shm::sync::{switch, Ordering};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// How long a graph change waits for the driver to take the new table.
pub(super) const PUBLISH_WAIT: Duration = Duration::from_secs(2);

impl Server {
    /// Writes the graph into the next table and waits until the driver uses
    /// it, at most [`PUBLISH_WAIT`]. A driver that did not take a table in
    /// that time is starved or stopped: later changes only rewrite the
    /// pending table and do not wait (requests stay answered within a
    /// bounded time, under the state lock they all share) until the driver
    /// takes one again; the model stays the truth and reaches the driver
    /// when it runs.
    pub(super) fn publish(&self, st: &mut State) {
        let (before, still_pending) = self.write_graph(st);
        if still_pending && self.driver_stalled.load(Ordering::Relaxed) {
            return;
        }
        let h = self.view.header();
        let t0 = Instant::now();
        let taken = || switch::generation(h.switch.load(Ordering::Acquire)) != before;
        while !taken() && self.engine.running.load(Ordering::Acquire) && t0.elapsed() < PUBLISH_WAIT
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        let stalled = !taken() && self.engine.running.load(Ordering::Acquire);
        if stalled && !self.driver_stalled.swap(true, Ordering::Relaxed) {
            warn!(
                "the audio driver did not take a graph change within {PUBLISH_WAIT:?}: its thread is starved or stopped; changes are applied when it runs again"
            );
        } else if !stalled && self.driver_stalled.swap(false, Ordering::Relaxed) {
            info!("the audio driver takes graph changes again");
        }
    }

    /// Writes the graph into the next table without waiting for the driver
    /// to take it: for connection changes, so that a client's requests that
    /// arrive within one cycle (a stereo pair connected back to back) reach
    /// the driver in the same table and take effect in the same cycle.
    /// Queries stay exact: clients wait for a pending table before they read
    /// one off the process thread (`Client::settled_table_index`).
    pub(super) fn publish_soon(&self, st: &mut State) {
        self.write_graph(st);
    }

    /// Propagates latencies, compiles the graph and writes it into the next
    /// table. Returns the switch generation before, and whether a table was
    /// still pending (not taken by the driver) when it began.
    fn write_graph(&self, st: &mut State) -> (u32, bool) {
        let (capture, playback) = self.device_latency();
        crate::latency::propagate(&mut st.graph, &st.latency_custom, capture, playback);
        let c = st.graph.compile();
        let h = self.view.header();
        let before = switch::generation(h.switch.load(Ordering::Acquire));
        let still_pending = h.switch.load(Ordering::Acquire) & switch::PENDING != 0;
        // SAFETY: we hold the state lock, so this thread is the only graph
        // writer, and `self.view` is the server's own writable mapping.
        unsafe { c.write_next_table(&self.view) };
        if !c.feedback.is_empty() {
            debug!(
                "{} feedback connection(s) close loops (one period of delay each)",
                c.feedback.len()
            );
        }
        (before, still_pending)
    }

    /// The driver's device latencies in frames, as jackd reports them:
    /// capture one period plus the driver's extra (ALSA: `-I`); playback one
    /// period, one more in async mode, plus the driver's extra (ALSA: `-n`
    /// − 2 periods and `-O`; the dummy: none).
    pub(super) fn device_latency(&self) -> (u32, u32) {
        let p = self.view.header().buffer_frames.load(Ordering::Relaxed);
        let extra = match &self.device_period {
            Some(d) => d.latencies(p),
            None => self.device_latencies,
        };
        let play = if self.cfg.server.sync { p } else { 2 * p };
        (p + extra.capture_frames, play + extra.playback_frames)
    }
}
