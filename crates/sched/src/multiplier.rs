//! The reservation-period multiplier: how many audio periods one
//! reservation period spans.
//!
//! Short audio periods make short reservation periods, and a short
//! reservation period is expensive (a scheduler event every period, budget
//! overruns caught only at the next tick) and fragile (a thread woken late
//! in its period has little budget left). Bagnoli's thesis "Design and
//! development of a mechanism for low-latency real time audio processing on
//! Linux" (§3.4, §4.5.1) lets one reservation period span several audio
//! periods ("fragments"), enabled automatically below 1333 us. The rule here
//! ([`multiplier_for`]): with a minimum reservation period M, an audio period
//! P shorter than M gets the smallest multiplier N with N x P >= M (never
//! less than the configured floor); a period of M or more keeps the floor.
//! At 48 kHz, M = 1333 us: 32 frames (667 us) give 2, 16 frames give 4,
//! 64 frames and more give 1. The thesis ran 667 us with 3: M = 2000 us.
//! Audio periods are whole frames (3 x 32 frames at 48 kHz is 1999.998 us),
//! so a reservation period within [`TOLERANCE_NS`] of M counts as reaching it.
//!
//! Threads: pure functions, any thread; real-time safe.

/// The largest multiplier (`--period-multiplier` accepts 1..=64).
pub const MAX_MULTIPLIER: u32 = 64;

/// The default minimum reservation period of `--period-multiplier auto`
/// (the thesis's threshold, 1333 us).
pub const DEFAULT_AUTO_MIN_PERIOD_NS: u64 = 1_333_000;

/// How far below the minimum a reservation period may fall and still count
/// as reaching it (1 us: audio periods are whole frames, rounded to ns).
pub const TOLERANCE_NS: u64 = 1_000;

/// Multiplier in use for audio period `audio_period_ns`: `floor` (0 counts
/// as 1), raised, when `min_period_ns` is not 0 and the audio period is
/// shorter, to the smallest N with N x audio period >= `min_period_ns`
/// (less [`TOLERANCE_NS`]);
/// at most [`MAX_MULTIPLIER`] (and never below the floor).
///
/// Real-time safe.
pub fn multiplier_for(audio_period_ns: u64, floor: u32, min_period_ns: u64) -> u32 {
    let floor = floor.clamp(1, MAX_MULTIPLIER);
    if audio_period_ns == 0 || min_period_ns <= audio_period_ns {
        return floor;
    }
    let need = min_period_ns
        .saturating_sub(TOLERANCE_NS)
        .max(1)
        .div_ceil(audio_period_ns);
    (need.min(MAX_MULTIPLIER as u64) as u32).max(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// frames at 48 kHz, in ns, rounded down as `resound_shm::time::frames_to_ns`.
    fn at48k(frames: u64) -> u64 {
        frames * 1_000_000_000 / 48_000
    }

    #[test]
    fn the_thesis_threshold_doubles_667_us() {
        let m = DEFAULT_AUTO_MIN_PERIOD_NS;
        assert_eq!(multiplier_for(at48k(32), 1, m), 2);
        assert_eq!(multiplier_for(at48k(16), 1, m), 4);
        assert_eq!(multiplier_for(at48k(48), 1, m), 2);
        assert_eq!(multiplier_for(at48k(64), 1, m), 1);
        assert_eq!(multiplier_for(at48k(128), 1, m), 1);
    }

    #[test]
    fn a_target_of_2000_us_gives_the_thesis_three() {
        assert_eq!(multiplier_for(at48k(32), 1, 2_000_000), 3);
    }

    #[test]
    fn the_reservation_period_reaches_the_minimum_with_the_smallest_n() {
        for p in [1_000u64, 20_833, 333_334, 666_667, 1_000_000, 1_332_999] {
            let n = multiplier_for(p, 1, DEFAULT_AUTO_MIN_PERIOD_NS) as u64;
            let m = DEFAULT_AUTO_MIN_PERIOD_NS - TOLERANCE_NS;
            assert!(n * p >= m || n == MAX_MULTIPLIER as u64);
            assert!(n == 1 || (n - 1) * p < m, "{p}: {n}");
        }
    }

    #[test]
    fn the_floor_and_the_cap_hold() {
        assert_eq!(multiplier_for(at48k(32), 5, DEFAULT_AUTO_MIN_PERIOD_NS), 5);
        assert_eq!(multiplier_for(at48k(256), 3, DEFAULT_AUTO_MIN_PERIOD_NS), 3);
        assert_eq!(
            multiplier_for(1, 1, DEFAULT_AUTO_MIN_PERIOD_NS),
            MAX_MULTIPLIER
        );
        assert_eq!(multiplier_for(at48k(32), 0, 0), 1);
        assert_eq!(multiplier_for(0, 2, DEFAULT_AUTO_MIN_PERIOD_NS), 2);
    }

    #[test]
    fn off_keeps_the_floor() {
        assert_eq!(multiplier_for(at48k(32), 1, 0), 1);
        assert_eq!(multiplier_for(at48k(32), 4, 0), 4);
    }
}
