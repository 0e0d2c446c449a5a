//! Holding a cycle back, briefly, for a downstream client that has not yet
//! taken this client's last block.
//!
//! A client that ran a cycle late may find the next one ready at once (its
//! upstream nodes, or the driver, released it meanwhile). Running it at
//! once overwrites the block it just released before a client it feeds has
//! read it: that client, woken for the block but not yet running (a
//! wake-up on another CPU, or a reservation whose deadline comes after the
//! writer's), then finds the newer block and the older one is lost. Under
//! reservations this is common: a thread that runs on without sleeping
//! keeps its earlier deadline, so the client it woke waits until it
//! sleeps.
//!
//! So a client that finished its last block late (after the driver began
//! the next cycle) looks, before it runs the next one, at each client it
//! feeds: one that finished the block before its last one but not its last
//! one is about to take it, and the client sleeps on that client's done
//! word until it has, for at most [`HOLD_PERIOD_FRACTION`] of a period,
//! once per cycle. A client on time never holds, so the clients it feeds,
//! slow or hostile, cannot slow it down; a client further behind (stopped,
//! or waiting for another late input) is not waited for: the hold is for a
//! block in flight, never for a stalled client. Real-time safe.

use resound_shm::sync::{AtomicU32, Ordering};
use resound_shm::{client_state, ActivationRecord, Table, View};

/// Whether node `me` finished its last block late: after the driver
/// (`driver`) released the cycle it started last. Real-time safe.
pub(crate) fn finished_late(me: &ActivationRecord, driver: &ActivationRecord) -> bool {
    me.finish_ns.load(Ordering::Relaxed) >= driver.release_ns.load(Ordering::Relaxed)
}

/// The longest a hold lasts: this fraction of a period (a quarter: time
/// for a woken thread to run a short cycle, well within what a late
/// block has left before the next cycle's start).
pub(crate) const HOLD_PERIOD_FRACTION: u64 = 4;

/// The done word of a client that node `slot` feeds and that has finished
/// the block before `last` (the last cycle `slot` released) but not `last`,
/// with the value it holds; None if every client it feeds took `last`, or
/// is further behind. Real-time safe.
pub(crate) fn unread_downstream<'v>(
    view: &'v View,
    table: &Table<'_>,
    slot: u32,
    last: u32,
) -> Option<(&'v AtomicU32, u32)> {
    (1..table.client_hw())
        .filter(|&d| d != slot && table.client_state(d) == client_state::ACTIVE)
        .filter(|&d| table.ups(d).any(|u| u == slot))
        .filter_map(|d| view.record(d))
        .find_map(|r| {
            let done = r.done.load(Ordering::Acquire);
            (done.wrapping_add(1) == last).then_some((&r.done, done))
        })
}

/// When a hold that begins at `now_ns` ends at the latest, for a period of
/// `period_ns`. Real-time safe.
pub(crate) fn hold_until(now_ns: u64, period_ns: u64) -> u64 {
    now_ns.saturating_add(period_ns / HOLD_PERIOD_FRACTION)
}

#[cfg(test)]
mod tests {
    use super::*;
    use resound_shm::fixture::{view_with_chain, SMALL_CAPS};

    /// Driver → 1 → 2 → 3.
    fn chain() -> View {
        view_with_chain(SMALL_CAPS, 128, 3)
    }

    fn set_done(v: &View, slot: u32, tag: u32) {
        v.record(slot).unwrap().done.store(tag, Ordering::Release);
    }

    #[test]
    fn a_client_that_has_not_taken_the_last_block_is_waited_for() {
        let v = chain();
        let t = v.table(v.current_index());
        set_done(&v, 2, 9);
        let (word, seen) = unread_downstream(&v, &t, 1, 10).expect("2 has not taken 10");
        assert!(std::ptr::eq(word, &v.record(2).unwrap().done));
        assert_eq!(seen, 9);
        set_done(&v, 2, 10);
        assert!(unread_downstream(&v, &t, 1, 10).is_none(), "2 took it");
    }

    #[test]
    fn a_client_further_behind_or_not_fed_is_not_waited_for() {
        let v = chain();
        let t = v.table(v.current_index());
        set_done(&v, 2, 7);
        assert!(unread_downstream(&v, &t, 1, 10).is_none(), "stalled");
        set_done(&v, 3, 9);
        assert!(
            unread_downstream(&v, &t, 1, 10).is_none(),
            "3 is fed by 2, not by 1"
        );
        assert!(unread_downstream(&v, &t, 3, 10).is_none(), "3 feeds nobody");
    }

    #[test]
    fn tags_wrap() {
        let v = chain();
        let t = v.table(v.current_index());
        set_done(&v, 3, u32::MAX);
        assert!(unread_downstream(&v, &t, 2, 0).is_some());
    }

    #[test]
    fn only_a_block_finished_after_the_drivers_last_release_is_late() {
        let v = chain();
        let (me, driver) = (v.record(1).unwrap(), v.record(0).unwrap());
        driver.release_ns.store(5_000, Ordering::Relaxed);
        me.finish_ns.store(4_999, Ordering::Relaxed);
        assert!(!finished_late(me, driver), "done before the next cycle");
        me.finish_ns.store(5_000, Ordering::Relaxed);
        assert!(finished_late(me, driver));
    }

    #[test]
    fn a_hold_lasts_a_quarter_period_at_most() {
        assert_eq!(hold_until(1_000, 2_666_664), 1_000 + 666_666);
        assert_eq!(hold_until(u64::MAX, 8), u64::MAX, "saturates");
    }
}
