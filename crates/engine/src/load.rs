//! DSP load statistics (jack_cpu_load): how much of the period the graph
//! kept busy, jackd's rule (the worst cycle of a window, smoothed).
//!
//! Runs on the driver thread (real-time), at the look-back.

use crate::verdict::Verdict;
use resound_shm::profile::measures;
use resound_shm::sync::Ordering;
use resound_shm::ControlHeader;

/// Cycles over which the DSP load takes its maximum (as jackd).
pub const LOAD_WINDOW: u32 = 32;

/// The load window and the smoothed load.
#[derive(Debug, Default)]
pub struct LoadStats {
    /// Largest busy time in the current window (ns).
    max_busy_ns: u64,
    /// Cycles in the current window.
    cycles: u32,
    /// Smoothed load (%).
    load: f32,
}

impl LoadStats {
    /// Busy time of a judged cycle that started at `start_ns`: until the last
    /// client finished, or the driver's own CPU time if no client was active.
    /// Real-time safe.
    pub fn busy_ns(verdicts: &[Verdict], start_ns: u64, driver_cpu_ns: u64) -> u64 {
        if verdicts.is_empty() {
            return driver_cpu_ns;
        }
        let end = verdicts.iter().map(|v| v.finish_ns).max().unwrap_or(0);
        measures::since_start_ns(start_ns, end)
    }

    /// Adds one cycle's busy time; at the end of a window publishes the
    /// smoothed load in `h.cpu_load`. Real-time safe.
    pub fn add(&mut self, busy_ns: u64, period_ns: u64, h: &ControlHeader) {
        self.max_busy_ns = self.max_busy_ns.max(busy_ns);
        self.cycles += 1;
        if self.cycles >= LOAD_WINDOW && period_ns > 0 {
            let busy = measures::fraction_of_period(self.max_busy_ns, period_ns);
            let inst = (busy * 100.0).clamp(0.0, 100.0) as f32;
            self.load = 0.5 * inst + 0.5 * self.load;
            h.cpu_load.store(self.load.to_bits(), Ordering::Relaxed);
            self.max_busy_ns = 0;
            self.cycles = 0;
        }
    }

    /// The smoothed load (%). Real-time safe.
    pub fn load(&self) -> f32 {
        self.load
    }
}
