//! [`Pacer`]: cycles paced on the engine's [`Clock`] at absolute deadlines,
//! back to back while freewheeling, with a resync after a stall. Shared by
//! the drivers that have no device clock (dummy, file).
//!
//! Runs on the driver thread (real-time).

use super::{Period, Wake};
use crate::clock::Clock;
use resound_shm::time::frames_to_ns;

/// Planned cycle starts on the clock.
#[derive(Debug, Default)]
pub struct Pacer {
    /// Planned start of the next cycle (ns).
    deadline: u64,
    /// The previous cycle was freewheeling.
    was_freewheeling: bool,
}

impl Pacer {
    /// The first cycle starts at `now_ns` at the earliest.
    pub fn start(&mut self, now_ns: u64) {
        self.deadline = now_ns;
    }

    /// Sleeps until the planned start (unless freewheeling back to back) and
    /// resyncs if the wake-up came more than a period late. Real-time safe.
    pub fn pace(&mut self, clock: &dyn Clock, p: Period) -> Wake {
        // The first freewheeling cycle still starts on the clock (the
        // previous cycle had its period to finish); the following ones start
        // as soon as the graph is done; afterwards the clock restarts now.
        let back_to_back = p.freewheel && self.was_freewheeling;
        if back_to_back || (!p.freewheel && self.was_freewheeling) {
            self.deadline = clock.now_ns();
        }
        self.was_freewheeling = p.freewheel;
        if !back_to_back {
            clock.sleep_until(self.deadline);
        }
        let now = clock.now_ns();
        let period = frames_to_ns(p.frames as u64, p.rate.max(1)).max(1);
        let delay_ns = now.saturating_sub(self.deadline);
        let mut skipped = 0;
        if !p.freewheel && now > self.deadline + period {
            // Woke more than a period late (machine stalled): resync instead
            // of running a burst of back-to-back cycles.
            skipped = (now - self.deadline) / period;
            self.deadline += skipped * period;
        }
        let start_ns = self.deadline;
        self.deadline += period;
        Wake {
            start_ns,
            awake_ns: now,
            next_ns: self.deadline,
            skipped,
            delay_ns,
        }
    }
}
