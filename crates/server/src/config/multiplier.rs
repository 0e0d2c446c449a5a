//! `--period-multiplier N | auto | auto:US`: how many audio periods one
//! reservation period spans (the rule itself is
//! `resound_sched::multiplier`).
//!
//! Threads: the thread parsing the command line; then read-only.

use resound_sched::multiplier::{multiplier_for, DEFAULT_AUTO_MIN_PERIOD_NS, MAX_MULTIPLIER};
use std::fmt;
use std::str::FromStr;

/// The `--period-multiplier` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodMultiplier {
    /// Always N audio periods (1..=64).
    Fixed(u32),
    /// As many audio periods as make the reservation period at least
    /// `min_period_us` (one when the audio period is that long already),
    /// recomputed when the buffer size changes.
    Auto {
        /// The minimum reservation period (us).
        min_period_us: u32,
    },
}

impl Default for PeriodMultiplier {
    fn default() -> Self {
        PeriodMultiplier::Fixed(1)
    }
}

impl PeriodMultiplier {
    /// `(floor, minimum reservation period in ns, 0 for none)`, as
    /// `resound_sched::ControllerConfig` takes them.
    pub fn rule(self) -> (u32, u64) {
        match self {
            PeriodMultiplier::Fixed(n) => (n, 0),
            PeriodMultiplier::Auto { min_period_us } => (1, min_period_us as u64 * 1_000),
        }
    }

    /// The multiplier in use at audio period `audio_period_ns`.
    pub fn at(self, audio_period_ns: u64) -> u32 {
        let (floor, min) = self.rule();
        multiplier_for(audio_period_ns, floor, min)
    }
}

impl fmt::Display for PeriodMultiplier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeriodMultiplier::Fixed(n) => write!(f, "{n}"),
            PeriodMultiplier::Auto { min_period_us } => write!(f, "auto:{min_period_us}"),
        }
    }
}

impl FromStr for PeriodMultiplier {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad_n = || format!("{s:?}: expected N (1..={MAX_MULTIPLIER}), auto or auto:US");
        if let Some(rest) = s.strip_prefix("auto") {
            let min_period_us = match rest.strip_prefix(':') {
                None if rest.is_empty() => (DEFAULT_AUTO_MIN_PERIOD_NS / 1_000) as u32,
                Some(us) => us
                    .parse::<u32>()
                    .ok()
                    .filter(|&v| (1..=1_000_000).contains(&v))
                    .ok_or_else(|| {
                        format!("{s:?}: the minimum reservation period must be 1..=1000000 us")
                    })?,
                None => return Err(bad_n()),
            };
            return Ok(PeriodMultiplier::Auto { min_period_us });
        }
        match s.parse::<u32>() {
            Ok(n) if (1..=MAX_MULTIPLIER).contains(&n) => Ok(PeriodMultiplier::Fixed(n)),
            _ => Err(bad_n()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numbers_and_auto() {
        assert_eq!("3".parse(), Ok(PeriodMultiplier::Fixed(3)));
        assert_eq!(
            "auto".parse(),
            Ok(PeriodMultiplier::Auto {
                min_period_us: 1333
            })
        );
        assert_eq!(
            "auto:2000".parse(),
            Ok(PeriodMultiplier::Auto {
                min_period_us: 2000
            })
        );
        for bad in ["0", "65", "x", "auto:", "auto:0", "autox", "auto:-1", ""] {
            assert!(bad.parse::<PeriodMultiplier>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_multiplier_in_use() {
        let auto: PeriodMultiplier = "auto".parse().unwrap();
        assert_eq!(auto.at(666_666), 2);
        assert_eq!(auto.at(2_666_666), 1);
        assert_eq!(
            "auto:2000".parse::<PeriodMultiplier>().unwrap().at(666_666),
            3
        );
        assert_eq!(PeriodMultiplier::Fixed(2).at(2_666_666), 2);
        assert_eq!(auto.to_string(), "auto:1333");
    }
}
