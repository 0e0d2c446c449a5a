//! [`Dll`]: a second-order delay-locked loop that filters the times a
//! device-paced driver wakes at into smooth cycle starts, as described in
//! "Using a DLL to filter time" (F. Adriaensen, 2005). The wake-up of a
//! poll on a sound card jitters by tens of microseconds or more with the
//! scheduler; the card's periods do not. The filtered start of each cycle
//! and its predicted next start are what clients see (`jack_get_cycle_times`,
//! `jack_frame_time`), so frame times map to wall-clock times with the
//! card's regularity, and the loop follows the card's real rate.
//!
//! Runs on the driver thread (real-time): plain arithmetic, no allocation.

/// The loop's state, in nanoseconds of the engine's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct Dll {
    /// Filtered start of the current cycle.
    t0: f64,
    /// Predicted start of the next cycle.
    t1: f64,
    /// Filtered period.
    e2: f64,
    /// Loop coefficients (from the bandwidth and the period).
    b: f64,
    c: f64,
    /// Running (false until the first wake-up after a reset).
    locked: bool,
    /// Wake-ups in a row more than half a period off the prediction.
    outliers: u32,
}

/// Wake-ups in a row more than half a period off the prediction after
/// which the loop restarts at the last one: the card's timing really moved
/// (a restart the driver did not report). Fewer are late wake-ups of the
/// driver (a machine stall): the card's periods kept their pace, so the
/// loop keeps predicting them and ignores those wake-ups.
pub const RESTART_AFTER_OUTLIERS: u32 = 4;

/// The most lateness one wake-up may feed to the loop, as a fraction of
/// the period (1/16: 167 us at 128 frames / 48 kHz). A driver wakes after
/// the card's boundary, by tens of microseconds usually; a wake-up later
/// than this is mostly the machine's stall, which says nothing about the
/// card: fed whole, a stall of a few milliseconds would move the next
/// cycle starts by a percent. An early wake-up (the prediction is behind
/// the card) is fed whole, so the loop catches up at full speed.
pub const MAX_LATE_FEED: f64 = 1.0 / 16.0;

/// Loop bandwidth (Hz): slow enough to ignore wake-up jitter, fast enough
/// to lock within a second or two.
pub const BANDWIDTH_HZ: f64 = 1.0;

impl Dll {
    /// Forgets the past: the next wake-up starts the loop again (after the
    /// device started, recovered or changed its period). Real-time safe.
    pub fn reset(&mut self) {
        self.locked = false;
    }

    /// A wake-up at `now_ns` for a cycle of nominal length `period_ns`
    /// (the ALSA driver passes the time the device passed the period's
    /// boundary, as far as the device's position tells it: its wake-up
    /// less the frames the device ran on since); returns (filtered start
    /// of this cycle, predicted start of the next).
    ///
    /// A wake-up later than predicted feeds at most [`MAX_LATE_FEED`] of a
    /// period of lateness to the loop. One more than half a period off the
    /// prediction (the driver woke late: a machine stall) is not fed to the
    /// loop: this cycle starts where the loop predicted, on the card's
    /// period boundary, so clients' cycle times do not jump;
    /// [`RESTART_AFTER_OUTLIERS`] in a row restart the loop at the last
    /// one. Real-time safe.
    pub fn wake(&mut self, now_ns: u64, period_ns: u64) -> (u64, u64) {
        let t = now_ns as f64;
        let p = period_ns.max(1) as f64;
        let outlier = self.locked && (t - self.t1).abs() > p / 2.0;
        self.outliers = if outlier { self.outliers + 1 } else { 0 };
        if !self.locked || self.outliers >= RESTART_AFTER_OUTLIERS {
            let omega = 2.0 * std::f64::consts::PI * BANDWIDTH_HZ * p * 1e-9;
            self.b = std::f64::consts::SQRT_2 * omega;
            self.c = omega * omega;
            self.e2 = p;
            self.t0 = t;
            self.t1 = t + p;
            self.locked = true;
            self.outliers = 0;
        } else if outlier {
            self.t0 = self.t1;
            self.t1 += self.e2;
        } else {
            let e = (t - self.t1).min(p * MAX_LATE_FEED);
            self.t0 = self.t1;
            self.t1 += self.b * e + self.e2;
            self.e2 += self.c * e;
        }
        (self.t0.max(0.0) as u64, self.t1.max(0.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 2_666_667; // 128 frames at 48 kHz

    /// A deterministic jitter in [0, amp) ns.
    fn jitter(i: u64, amp: u64) -> u64 {
        (i.wrapping_mul(2_654_435_761) >> 7) % amp
    }

    #[test]
    fn jittery_wake_ups_give_regular_cycle_starts() {
        let mut d = Dll::default();
        let mut worst_after_lock = 0i64;
        for i in 0..3000u64 {
            let ideal = 1_000_000_000 + i * P;
            let (start, next) = d.wake(ideal + jitter(i, 200_000), P);
            if i > 1000 {
                // Filtered starts sit within a few us of the card's grid
                // (offset by the mean wake-up delay), while wake-ups jitter
                // by 200 us.
                let err = start as i64 - (ideal as i64 + 100_000);
                worst_after_lock = worst_after_lock.max(err.abs());
                assert!((next - start).abs_diff(P) < 5_000, "{i}: {start} {next}");
            }
        }
        assert!(
            worst_after_lock < 20_000,
            "worst error {worst_after_lock} ns"
        );
    }

    #[test]
    fn it_follows_a_card_that_runs_slightly_slow() {
        let mut d = Dll::default();
        let real = P + P / 1000; // the card's clock 0.1 % slow
        let mut last = (0, 0);
        for i in 0..5000u64 {
            last = d.wake(1_000_000_000 + i * real, P);
        }
        let period = last.1 - last.0;
        assert!(
            period.abs_diff(real) < 50,
            "filtered period {period}, card {real}"
        );
    }

    #[test]
    fn a_late_wake_up_keeps_the_cards_boundaries() {
        let mut d = Dll::default();
        for i in 0..100u64 {
            d.wake(i * P, P);
        }
        // Woken 0.8 periods late (a stall), then on time again: both
        // cycles start on the card's boundaries, one period apart.
        let (s0, n0) = d.wake(100 * P + 4 * P / 5, P);
        let (s1, n1) = d.wake(101 * P, P);
        for (got, want) in [(s0, 100 * P), (n0, 101 * P), (s1, 101 * P), (n1, 102 * P)] {
            assert!(got.abs_diff(want) < 100, "{got} vs {want}");
        }
    }

    #[test]
    fn a_wake_up_under_half_a_period_late_barely_moves_the_next_start() {
        let mut d = Dll::default();
        for i in 0..100u64 {
            d.wake(i * P, P);
        }
        // Fed whole, 0.4 periods of lateness would move the next start by
        // about 1 % of a period (the loop's gain at 1 Hz); it moves by
        // less than 0.2 %.
        let (s0, n0) = d.wake(100 * P + 2 * P / 5, P);
        assert!(s0.abs_diff(100 * P) < 100, "{s0}");
        assert!(
            n0.abs_diff(101 * P) < P / 500,
            "next start {n0} vs {}",
            101 * P
        );
        let (s1, _) = d.wake(101 * P, P);
        assert_eq!(s1, n0);
    }

    #[test]
    fn a_moved_card_or_a_reset_restarts_the_loop() {
        let mut d = Dll::default();
        for i in 0..100u64 {
            d.wake(i * P, P);
        }
        // The card's boundaries moved by 0.6 periods for good: the loop
        // restarts at the fourth wake-up off its prediction.
        let moved = |i: u64| (100 + i) * P + 3 * P / 5;
        for i in 0..RESTART_AFTER_OUTLIERS as u64 - 1 {
            let (s, _) = d.wake(moved(i), P);
            assert!(s.abs_diff((100 + i) * P) < 100, "coasting {i}");
        }
        let last = moved(RESTART_AFTER_OUTLIERS as u64 - 1);
        assert_eq!(d.wake(last, P), (last, last + P));
        d.reset();
        assert_eq!(d.wake(5, P), (5, 5 + P));
    }
}
