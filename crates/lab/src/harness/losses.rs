//! Which of the chain's lost blocks the machine caused: a block is lost in
//! a machine stall when some CPU was unavailable (cyclictest's probe woke
//! late by at least the threshold) at a time that could have cost it (see
//! [`LostBlock::window_ns`]); the others are resound's to explain. Shared
//! by `resound soak` and the hostile-client test.

use super::chain::LostBlock;
use super::stalls::Stalls;

/// The lost blocks, split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Lost while the machine stalled.
    pub in_stall: u64,
    /// Lost with no stall of that length anywhere near.
    pub outside: Vec<LostBlock>,
}

/// Splits `blocks` by whether a stall of at least `min_ns` overlaps each
/// one's window.
pub fn attribute(blocks: &[LostBlock], stalls: &Stalls, min_ns: u64) -> Attribution {
    let mut a = Attribution::default();
    for b in blocks {
        let (from, to) = b.window_ns();
        if stalls.stalled_within(from, to, min_ns) {
            a.in_stall += 1;
        } else {
            a.outside.push(*b);
        }
    }
    a
}

/// The share of all cycles whose window (as a lost block's) holds a stall
/// of at least `min_ns`, over `[from_ns, to_ns]`, with cycles of each
/// period in `periods_ns` for an equal share of the time: what the share of
/// lost blocks in a stall would be if losses fell at random times.
pub fn by_chance(
    stalls: &Stalls,
    from_ns: u64,
    to_ns: u64,
    periods_ns: &[u64],
    min_ns: u64,
) -> f64 {
    let mut shares = Vec::new();
    for &period_ns in periods_ns.iter().filter(|&&p| p > 0) {
        let (mut hit, mut all) = (0u64, 0u64);
        let mut start = from_ns + 3 * period_ns;
        while start + period_ns <= to_ns {
            let b = LostBlock {
                cycle: 0,
                start_ns: start,
                period_ns,
                gap: false,
                last_seen_ns: 0,
            };
            let (a, z) = b.window_ns();
            hit += stalls.stalled_within(a, z, min_ns) as u64;
            all += 1;
            start += period_ns;
        }
        if all > 0 {
            shares.push(hit as f64 / all as f64);
        }
    }
    if shares.is_empty() {
        0.0
    } else {
        shares.iter().sum::<f64>() / shares.len() as f64
    }
}

/// How many of `stalls` last at least `min_ns`.
pub fn count_at_least(stalls: &Stalls, min_ns: u64) -> usize {
    stalls.spikes.iter().filter(|s| s.len_ns >= min_ns).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::stalls::Stall;

    const MS: u64 = 1_000_000;

    fn block(start_ms: u64) -> LostBlock {
        LostBlock {
            cycle: start_ms,
            start_ns: start_ms * MS,
            period_ns: 2 * MS,
            gap: false,
            last_seen_ns: 0,
        }
    }

    #[test]
    fn a_block_is_the_machines_only_with_a_long_enough_stall_in_its_window() {
        let stalls = Stalls {
            spikes: vec![
                // CPU 1 unavailable from 95 to 100 ms.
                Stall {
                    cpu: 1,
                    end_ns: 100 * MS,
                    len_ns: 5 * MS,
                },
                // A short one at 300 ms.
                Stall {
                    cpu: 0,
                    end_ns: 300 * MS,
                    len_ns: MS / 10,
                },
            ],
            per_cpu: vec![(1, 100), (1, 5000)],
            trigger_us: 100,
        };
        // Windows [start - 6 ms, start + 2 ms]: 101 and 94 overlap the long
        // stall; 107 begins after it; 300 has only the short one.
        let blocks = [block(101), block(94), block(107), block(300)];
        let a = attribute(&blocks, &stalls, MS / 2);
        assert_eq!(a.in_stall, 2);
        assert_eq!(a.outside, vec![block(107), block(300)]);
        assert_eq!(count_at_least(&stalls, MS / 2), 1);
        // With a lower threshold the short stall counts too.
        assert_eq!(attribute(&blocks, &stalls, MS / 20).in_stall, 3);
        // A gap seen at 107 after the check last saw cycle 99: the check
        // itself missed the cycles between, and the stall is in its window.
        let gap = LostBlock {
            gap: true,
            last_seen_ns: 99 * MS,
            ..block(107)
        };
        assert_eq!(attribute(&[gap], &stalls, MS / 2).in_stall, 1);
    }

    #[test]
    fn the_chance_share_is_the_share_of_windows_touching_a_stall() {
        let stalls = Stalls {
            spikes: vec![Stall {
                cpu: 0,
                end_ns: 100 * MS,
                len_ns: 5 * MS,
            }],
            per_cpu: vec![(1, 5000)],
            trigger_us: 500,
        };
        // Cycles of 2 ms starting at 6, 8, ..., 198 ms (97 cycles); a window
        // [s - 6, s + 2] touches [95, 100] for s in 94..=106: 7 cycles.
        let share = by_chance(&stalls, 0, 200 * MS, &[2 * MS], MS);
        assert!((share - 7.0 / 97.0).abs() < 1e-9, "{share}");
        // Too short a stall for the threshold: never.
        assert_eq!(by_chance(&stalls, 0, 200 * MS, &[2 * MS], 10 * MS), 0.0);
    }
}
