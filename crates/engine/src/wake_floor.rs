//! How early in its cycle each reserved thread wakes at best, to tell when
//! a wake-up came so much later than that that, on a light reservation, the
//! kernel could hold the next one (see `resound_sched::Controller::leave_light`).
//!
//! Per slot: the floor of its wake-up offsets from the cycle start. It
//! follows a lower offset at once and otherwise creeps up by 1/1024 of the
//! period per cycle, so it follows a thread that moved later in the chain
//! within about a thousand cycles. A wake-up is *late* when it is more than
//! a given margin above the floor: the kernel holds a light thread's next
//! wake-up only if that comes more than the light slack earlier in its cycle
//! than this one, and it will hardly come earlier than the floor.
//!
//! Threads: the driver thread. Preallocated; real-time safe.

/// No wake-up seen yet.
const UNKNOWN: u64 = u64::MAX;

/// Per-slot wake-up floors. See the module docs.
pub struct WakeFloors {
    /// Per slot: the floor (ns after the cycle start), or [`UNKNOWN`].
    floor_ns: Vec<u64>,
}

impl WakeFloors {
    /// Floors for `slots` slots, none known (allocates).
    pub fn new(slots: usize) -> Self {
        WakeFloors {
            floor_ns: vec![UNKNOWN; slots],
        }
    }

    /// Forgets `slot`'s floor (a new thread in it). Real-time safe.
    pub fn forget(&mut self, slot: u32) {
        if let Some(f) = self.floor_ns.get_mut(slot as usize) {
            *f = UNKNOWN;
        }
    }

    /// Notes that `slot` woke `offset_ns` after its cycle's start, in cycles
    /// of `period_ns`; returns whether that was more than `margin_ns` above
    /// its floor (never for the first wake-up seen). Real-time safe.
    pub fn note(&mut self, slot: u32, offset_ns: u64, period_ns: u64, margin_ns: u64) -> bool {
        let Some(f) = self.floor_ns.get_mut(slot as usize) else {
            return false;
        };
        if *f == UNKNOWN {
            *f = offset_ns;
            return false;
        }
        let late = offset_ns > f.saturating_add(margin_ns);
        *f = f.saturating_add(period_ns / 1024).min(offset_ns);
        late
    }
}

#[cfg(test)]
mod tests {
    use super::WakeFloors;

    const P: u64 = 2_666_667;

    #[test]
    fn a_wake_up_far_above_the_floor_is_late() {
        let mut w = WakeFloors::new(2);
        assert!(
            !w.note(1, 500_000, P, 500_000),
            "the first one sets the floor"
        );
        assert!(!w.note(1, 900_000, P, 500_000));
        assert!(w.note(1, 1_100_000, P, 500_000));
        // An earlier wake-up lowers the floor at once.
        assert!(!w.note(1, 100_000, P, 500_000));
        assert!(w.note(1, 700_000, P, 500_000));
        // Out of range slots are ignored.
        assert!(!w.note(7, u64::MAX, P, 0));
    }

    #[test]
    fn the_floor_creeps_up_to_a_thread_that_moved_later() {
        let mut w = WakeFloors::new(1);
        w.note(0, 100_000, P, 500_000);
        let late = (0..1100)
            .filter(|_| w.note(0, 1_000_000, P, 500_000))
            .count();
        assert!(late > 100 && late < 1000, "{late} late of 1100");
        assert!(!w.note(0, 1_000_000, P, 500_000));
        w.forget(0);
        assert!(!w.note(0, 2_000_000, P, 0));
    }
}
