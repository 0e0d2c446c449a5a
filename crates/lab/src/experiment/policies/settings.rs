//! What `resound experiment` runs: the scheduling policies it compares
//! ([`Policy`]) and its command-line options ([`ExperimentArgs`]). Parsed on
//! the main thread.

use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// A scheduling policy of the audio graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// No real-time scheduling (`resoundd -r`).
    Other,
    /// SCHED_FIFO (`resoundd --sched fifo -P PRIO`).
    Fifo,
    /// SCHED_DEADLINE reservations with feedback-controlled budgets, no reclaiming (`--no-reclaim`).
    Deadline,
    /// The same with GRUB reclaiming (resoundd's default).
    #[value(name = "deadline+reclaim")]
    DeadlineReclaim,
}

impl Policy {
    /// Name as in the table and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "other",
            Policy::Fifo => "fifo",
            Policy::Deadline => "deadline",
            Policy::DeadlineReclaim => "deadline+reclaim",
        }
    }

    /// The `resoundd` server options (before `-d`) that select this policy.
    pub fn server_flags(self, priority: i32) -> Vec<String> {
        let prio = priority.to_string();
        let v: &[&str] = match self {
            Policy::Other => &["-r"],
            Policy::Fifo => &["--sched", "fifo", "-P", &prio],
            Policy::Deadline => &["--sched", "deadline", "--no-reclaim"],
            Policy::DeadlineReclaim => &["--sched", "deadline", "--reclaim"],
        };
        v.iter().map(|s| s.to_string()).collect()
    }
}

/// Options of `resound experiment`.
#[derive(Debug, Clone, Args)]
pub struct ExperimentArgs {
    /// Policies to run, in order (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "other,fifo,deadline,deadline+reclaim"
    )]
    pub policies: Vec<Policy>,
    /// Measurement time per policy (seconds).
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Warm-up per policy before measuring (seconds).
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Load clients in the chain.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub clients: u32,
    /// Percent of the period each load client stays busy.
    #[arg(long, default_value_t = 7.5)]
    pub busy: f64,
    /// Sample rate (Hz).
    #[arg(short = 'r', long, default_value_t = 48_000)]
    pub rate: u32,
    /// Frames per period.
    #[arg(short = 'p', long, default_value_t = 128)]
    pub period: u32,
    /// SCHED_FIFO priority of the driver under the fifo policy (clients get one less).
    #[arg(short = 'P', long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(2..=99))]
    pub priority: i32,
    /// Competing task: period (microseconds).
    #[arg(long, default_value_t = 10_000)]
    pub rt_period_us: u64,
    /// Competing task: CPU time per job (microseconds); 0 = no competing task (baseline).
    #[arg(long, default_value_t = 1_700)]
    pub rt_run_us: u64,
    /// Competing task: SCHED_FIFO priority (0 = SCHED_OTHER).
    #[arg(long, default_value_t = 50)]
    pub rt_fifo: i32,
    /// Pin the server, the clients and the competing task to this CPU, so that
    /// they all contend for that one CPU. Not with the deadline
    /// policies: the kernel refuses SCHED_DEADLINE to a thread whose affinity
    /// is narrower than its root domain (use an exclusive cpuset for that).
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Extra resoundd server options for every policy, whitespace-separated
    /// (e.g. "--overprovision 20 --period-multiplier 2").
    #[arg(long, value_name = "OPTS", allow_hyphen_values = true)]
    pub server_args: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_flags() {
        assert_eq!(Policy::Other.server_flags(10), ["-r"]);
        assert_eq!(
            Policy::Fifo.server_flags(12),
            ["--sched", "fifo", "-P", "12"]
        );
        assert_eq!(
            Policy::Deadline.server_flags(10),
            ["--sched", "deadline", "--no-reclaim"]
        );
        assert_eq!(
            Policy::DeadlineReclaim.server_flags(10),
            ["--sched", "deadline", "--reclaim"]
        );
        assert_eq!(
            Policy::from_str("deadline+reclaim", false),
            Ok(Policy::DeadlineReclaim)
        );
    }
}
