//! The timing measures of a profiled cycle, derived in one place: the
//! engine (DSP load), the in-process profiler client and the profiler crate
//! all use these.
//!
//! * **scheduling latency**: awake − signal (how long a woken thread waited
//!   for a CPU);
//! * **duration**: finish − awake;
//! * **dates relative to the cycle start**: t − start (driver wake-up and
//!   end, client signal/awake/finish dates, the graph's end);
//! * **load**: a time as a fraction of the period.
//!
//! The times come from records clients can write, so every difference
//! saturates at 0 instead of wrapping. Pure functions, real-time safe, run
//! by whichever thread reads the records.

use super::{node_flags, CycleData, NodeData};

/// Scheduling latency: `awake_ns − signal_ns` (0 if reversed). Real-time safe.
#[inline]
pub fn scheduling_ns(signal_ns: u64, awake_ns: u64) -> u64 {
    awake_ns.saturating_sub(signal_ns)
}

/// Duration: `finish_ns − awake_ns` (0 if reversed). Real-time safe.
#[inline]
pub fn duration_ns(awake_ns: u64, finish_ns: u64) -> u64 {
    finish_ns.saturating_sub(awake_ns)
}

/// A date relative to the cycle's nominal start (0 if before it). Real-time safe.
#[inline]
pub fn since_start_ns(start_ns: u64, t_ns: u64) -> u64 {
    t_ns.saturating_sub(start_ns)
}

/// Measured period: a driver wake-up minus the previous cycle's (0 if
/// reversed). Real-time safe.
#[inline]
pub fn measured_period_ns(prev_awake_ns: u64, awake_ns: u64) -> u64 {
    awake_ns.saturating_sub(prev_awake_ns)
}

/// `ns` as a fraction of the period (unclamped; a zero period counts as
/// 1 ns). Real-time safe.
#[inline]
pub fn fraction_of_period(ns: u64, period_ns: u64) -> f64 {
    ns as f64 / period_ns.max(1) as f64
}

/// End of the graph relative to the cycle start: the latest of the
/// clients' `finish_dates` (relative ns), or the driver's end date
/// `driver_end_ns` (relative) when none finished; a cycle with a late client
/// counts as ending at the period `period_ns` at least. Real-time safe.
pub fn graph_end_ns(
    finish_dates: impl Iterator<Item = u64>,
    driver_end_ns: u64,
    period_ns: u64,
    any_late: bool,
) -> u64 {
    let end = finish_dates.max().unwrap_or(driver_end_ns);
    if any_late {
        end.max(period_ns)
    } else {
        end
    }
}

impl NodeData {
    fn has(&self, bit: u32) -> bool {
        self.flags & bit != 0
    }

    /// Scheduling latency (ns), if it was signalled and woke. Real-time safe.
    pub fn scheduling_ns(&self) -> Option<u64> {
        (self.has(node_flags::SIGNALLED) && self.has(node_flags::AWAKE))
            .then(|| scheduling_ns(self.signal_ns, self.awake_ns))
    }

    /// Duration (ns), if it finished. Real-time safe.
    pub fn duration_ns(&self) -> Option<u64> {
        self.has(node_flags::FINISHED)
            .then(|| duration_ns(self.awake_ns, self.finish_ns))
    }

    /// It had not finished when the next cycle began. Real-time safe.
    pub fn is_late(&self) -> bool {
        self.has(node_flags::LATE)
    }

    /// Signal, awake and finish dates relative to `start_ns`, each only if
    /// valid (flags). Real-time safe.
    pub fn dates_since(&self, start_ns: u64) -> [Option<u64>; 3] {
        let at = |bit, t| self.has(bit).then(|| since_start_ns(start_ns, t));
        [
            at(node_flags::SIGNALLED, self.signal_ns),
            at(node_flags::AWAKE, self.awake_ns),
            at(node_flags::FINISHED, self.finish_ns),
        ]
    }
}

impl CycleData {
    /// Driver wake-up relative to the nominal start (its latency, ns). Real-time safe.
    pub fn driver_awake_ns(&self) -> u64 {
        since_start_ns(self.start_ns, self.awake_ns)
    }

    /// Driver end date relative to the start (ns). Real-time safe.
    pub fn driver_end_ns(&self) -> u64 {
        since_start_ns(self.start_ns, self.end_ns)
    }

    /// Measured period: this wake-up minus `prev`'s, if `prev` is the cycle
    /// just before (ns). Real-time safe.
    pub fn measured_period_ns(&self, prev: &CycleData) -> Option<u64> {
        // Cycle numbers come from the ring as read: no overflow at u64::MAX.
        (prev.cycle.checked_add(1) == Some(self.cycle))
            .then(|| measured_period_ns(prev.awake_ns, self.awake_ns))
    }

    /// End of the graph relative to the start, from this cycle's rows (see
    /// [`graph_end_ns`]). Real-time safe.
    pub fn graph_end_ns(&self, rows: &[NodeData]) -> u64 {
        let finishes = rows.iter().filter_map(|r| r.dates_since(self.start_ns)[2]);
        graph_end_ns(
            finishes,
            self.driver_end_ns(),
            self.period_ns,
            rows.iter().any(NodeData::is_late),
        )
    }

    /// `ns` as a fraction of this cycle's period. Real-time safe.
    pub fn fraction(&self, ns: u64) -> f64 {
        fraction_of_period(ns, self.period_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A previous record numbered u64::MAX (a scribbled ring) is not the
    /// cycle before any other: no overflow. Found by the `profile_reader`
    /// fuzz target (fuzz/artifacts/profile_reader/crash-e85ee437…).
    #[test]
    fn measured_period_after_the_last_cycle_number_is_none() {
        let prev = CycleData {
            cycle: u64::MAX,
            ..Default::default()
        };
        let this = CycleData {
            cycle: 0,
            awake_ns: 5,
            ..Default::default()
        };
        assert_eq!(this.measured_period_ns(&prev), None);
        let next = CycleData {
            cycle: 1,
            awake_ns: 9,
            ..Default::default()
        };
        assert_eq!(next.measured_period_ns(&this), Some(4));
    }

    #[test]
    fn measures_of_a_cycle() {
        let c = CycleData {
            cycle: 2,
            start_ns: 1_000,
            awake_ns: 1_010,
            end_ns: 1_050,
            period_ns: 1_000,
            ..Default::default()
        };
        let done = NodeData {
            flags: node_flags::SIGNALLED | node_flags::AWAKE | node_flags::FINISHED,
            signal_ns: 1_100,
            awake_ns: 1_150,
            finish_ns: 1_400,
            ..Default::default()
        };
        assert_eq!(done.scheduling_ns(), Some(50));
        assert_eq!(done.duration_ns(), Some(250));
        assert_eq!(
            done.dates_since(c.start_ns),
            [Some(100), Some(150), Some(400)]
        );
        assert_eq!(c.driver_awake_ns(), 10);
        assert_eq!(c.driver_end_ns(), 50);
        assert_eq!(c.graph_end_ns(&[done]), 400);
        assert_eq!(c.graph_end_ns(&[]), 50);
        let late = NodeData {
            flags: node_flags::LATE,
            ..Default::default()
        };
        assert_eq!(late.scheduling_ns(), None);
        assert_eq!(c.graph_end_ns(&[done, late]), 1_000);
        let prev = CycleData {
            cycle: 1,
            awake_ns: 5,
            ..Default::default()
        };
        assert_eq!(c.measured_period_ns(&prev), Some(1_005));
        assert_eq!(c.fraction(250), 0.25);
        // Hostile stamps saturate instead of wrapping.
        assert_eq!(scheduling_ns(10, 5), 0);
    }
}
