//! Graph publication: latencies propagated, the graph compiled and written
//! into the *next* shared table, then a wait until the driver has switched
//! to it.
//!
//! Threads: session threads (and start-up), under the state lock (the
//! table's single writer).

use super::{Server, State};
use resound_shm::sync::{switch, Ordering};
use std::time::{Duration, Instant};
use tracing::debug;

impl Server {
    /// Writes the graph into the next table and waits until the driver uses it.
    pub(super) fn publish(&self, st: &mut State) {
        let (capture, playback) = self.device_latency();
        crate::latency::propagate(&mut st.graph, &st.latency_custom, capture, playback);
        let c = st.graph.compile();
        let h = self.view.header();
        let before = switch::generation(h.switch.load(Ordering::Acquire));
        // SAFETY: we hold the state lock, so this thread is the only graph
        // writer, and `self.view` is the server's own writable mapping.
        unsafe { c.write_next_table(&self.view) };
        if !c.feedback.is_empty() {
            debug!(
                "{} feedback connection(s) close loops (one period of delay each)",
                c.feedback.len()
            );
        }
        let t0 = Instant::now();
        while switch::generation(h.switch.load(Ordering::Acquire)) == before
            && self.engine.running.load(Ordering::Acquire)
            && t0.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_micros(200));
        }
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
