//! When a process thread wakes by its own timer, ahead of the release it
//! waits for, to spin for it instead of being woken by it (a futex wake-up
//! of a sleeping thread on another CPU costs about 30 µs on the machines we
//! measure on; a spinning thread sees the release in a few).
//!
//! Two releases are anticipated:
//! - the driver's, by the first client in the activation order
//!   ([`first_wake_at`], `resoundd --first-wake timer`);
//! - an upstream client's, by a downstream client, when that upstream
//!   client's cycles run longer than the early wake-up bound (a shorter one
//!   wakes its downstream threads as it starts its cycle instead, see
//!   `RtContext::poll`). The release is expected as long after the cycle
//!   start as it came in this thread's last cycle ([`hop_wake_at`]).
//!
//! A SCHED_FIFO first client sets its timer earlier by how late its own
//! timer wake-ups run ([`TimerLateness`]), so that it is running, not just
//! woken, when the release was expected.
//!
//! The times are pure functions; the process thread feeds them from its
//! own state and from the shared records, read here. Real-time safe.

use resound_shm::cycle::up_records;
use resound_shm::sync::{AtomicU32, Ordering};
use resound_shm::{ActivationRecord, Table, View};

/// When the first client's timer is set (CLOCK_MONOTONIC ns): so that the
/// thread runs `bound_ns` (how long it may spin) before the driver is
/// expected to release the cycle that starts at `next_ns`, and not before
/// that start; it runs about `late_ns` after its timer expires (its
/// [`TimerLateness`]; 0 for a timer at that time itself), so the timer is
/// set that much earlier. The release is expected as long after the start
/// as the driver released the current cycle (started at `start_ns`,
/// released at `released_ns`) after its start, at most half a period.
/// Real-time safe.
pub(crate) fn first_wake_at(
    start_ns: u64,
    next_ns: u64,
    released_ns: u64,
    bound_ns: u64,
    late_ns: u64,
) -> u64 {
    let half = next_ns.saturating_sub(start_ns) / 2;
    let lag = released_ns.saturating_sub(start_ns).min(half);
    next_ns
        .saturating_add(lag.saturating_sub(bound_ns))
        .saturating_sub(late_ns)
}

/// How late a thread's own timer wake-ups run: from the expiry it asked
/// for to its return from the sleep (ns), as a running estimate of their
/// median. Each wake-up moves the estimate 1 µs towards itself, so the
/// estimate settles where half the wake-ups are later; a single wake-up
/// delayed by milliseconds (a machine stall) moves it by 1 µs only.
/// Capped at [`TimerLateness::MAX_NS`]. Real-time safe.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TimerLateness {
    estimate_ns: u64,
}

impl TimerLateness {
    /// How far one wake-up moves the estimate (ns).
    const STEP_NS: u64 = 1_000;
    /// The estimate never exceeds this (ns).
    pub(crate) const MAX_NS: u64 = 200_000;

    /// A timer wake-up `late_ns` after its expiry. Real-time safe.
    pub(crate) fn note(&mut self, late_ns: u64) {
        self.estimate_ns = if late_ns > self.estimate_ns {
            (self.estimate_ns + Self::STEP_NS).min(Self::MAX_NS)
        } else if late_ns < self.estimate_ns {
            self.estimate_ns.saturating_sub(Self::STEP_NS)
        } else {
            self.estimate_ns
        };
    }

    /// The current estimate (ns). Real-time safe.
    pub(crate) fn ns(&self) -> u64 {
        self.estimate_ns
    }
}

/// When a downstream client's timer is set (CLOCK_MONOTONIC ns) for the
/// cycle that starts at `start_ns`: its inputs are expected `lag_ns` after
/// the start, as in its last cycle. Unlike the driver's, an upstream
/// client's release moves from cycle to cycle by tens of µs (the hops and
/// callbacks before it), either way, so the thread wakes three quarters of
/// its spin bound before the expected release: with a timer wake-up
/// taking a third to half of the bound, it spins from a little before the
/// expected release to a little after. Real-time safe.
pub(crate) fn hop_wake_at(start_ns: u64, lag_ns: u64, bound_ns: u64) -> u64 {
    let lead = bound_ns.saturating_mul(3) / 4;
    start_ns.saturating_add(lag_ns.saturating_sub(lead))
}

/// The upstream record of node `slot` whose done word is `word`, if any.
/// Real-time safe.
pub(crate) fn upstream_of<'v>(
    view: &'v View,
    table: &Table<'_>,
    slot: u32,
    word: &AtomicU32,
) -> Option<&'v ActivationRecord> {
    up_records(view, table, slot).find(|r| std::ptr::eq(&r.done, word))
}

/// How long `up`'s last finished cycle ran, wake-up to finish (ns); None
/// while it runs a later one, or if its stamps say nothing sensible (a
/// client's own record: it can only mislead its downstream threads'
/// timers, which then wake at a useless time or not at all). Real-time
/// safe.
pub(crate) fn last_run_ns(up: &ActivationRecord) -> Option<u64> {
    let finished = up.finished_cycle.load(Ordering::Acquire);
    if up.cycle.load(Ordering::Relaxed) != finished {
        return None;
    }
    let awake = up.awake_ns.load(Ordering::Relaxed);
    up.finish_ns.load(Ordering::Relaxed).checked_sub(awake)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_clients_timer_is_set_before_the_expected_release() {
        let (start, next) = (1_000_000, 3_666_000);
        // Released 80 µs after the start: 30 µs before the release.
        assert_eq!(
            first_wake_at(start, next, start + 80_000, 30_000, 0),
            next + 50_000
        );
        // A bound longer than that: at the start, never before.
        assert_eq!(first_wake_at(start, next, start + 80_000, 100_000, 0), next);
        // A release long after the start counts half a period at most.
        assert_eq!(
            first_wake_at(start, next, next + 5_000_000, 0, 0),
            next + 1_333_000
        );
        // A release from before the start (an older cycle's): no lag.
        assert_eq!(first_wake_at(start, next, 5, 10, 0), next);
        assert_eq!(
            first_wake_at(0, u64::MAX, u64::MAX, 0, 0),
            u64::MAX,
            "saturates"
        );
    }

    #[test]
    fn a_downstream_clients_timer_leads_its_expected_inputs_by_three_quarters_of_its_bound() {
        let start = 10_000_000;
        assert_eq!(hop_wake_at(start, 500_000, 100_000), start + 425_000);
        assert_eq!(hop_wake_at(start, 500_000, 40_000), start + 470_000);
        assert_eq!(
            hop_wake_at(start, 20_000, 100_000),
            start,
            "not before the start"
        );
        assert_eq!(hop_wake_at(u64::MAX, 5, 0), u64::MAX, "saturates");
    }

    #[test]
    fn the_first_clients_timer_leads_by_its_wake_up_lateness_too() {
        let (start, next) = (1_000_000, 3_666_000);
        // Released 80 µs after the start, bound 30 µs, wake-ups 20 µs
        // late: running 30 µs before the release, the timer 20 µs before that.
        assert_eq!(
            first_wake_at(start, next, start + 80_000, 30_000, 20_000),
            next + 30_000
        );
        // A bound longer than the lag: running at the start, the timer
        // before it.
        assert_eq!(
            first_wake_at(start, next, start + 80_000, 100_000, 20_000),
            next - 20_000
        );
        assert_eq!(first_wake_at(start, 5, 6, 0, 10), 0, "saturates");
    }

    #[test]
    fn the_lateness_estimate_settles_at_the_median_and_shrugs_off_a_stall() {
        let mut t = TimerLateness::default();
        // Wake-ups 10, 20, 30, 40 and 50 µs late, in turn: the median is 30.
        for i in 0..5000u64 {
            t.note((i % 5 + 1) * 10_000);
        }
        assert!((28_000..=32_000).contains(&t.ns()), "{}", t.ns());
        let before = t.ns();
        t.note(50_000_000);
        assert_eq!(t.ns(), before + 1_000, "a stall moves it one step");
        for _ in 0..1000 {
            t.note(u64::MAX);
        }
        assert_eq!(t.ns(), TimerLateness::MAX_NS, "capped");
        for _ in 0..1000 {
            t.note(0);
        }
        assert_eq!(t.ns(), 0);
    }
}
