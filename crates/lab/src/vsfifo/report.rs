//! The bench's table (a column per policy; beside each reservation its
//! ratio to SCHED_FIFO run by run and in how many repetitions it did
//! worse) and `runs.csv`. Pure; runs on the bench's main thread.

use super::metrics::RunMetrics;
use super::tasks::Contender;
use crate::vsjackd::report::{cell, median, ratio_cell};

/// One run of one policy.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Repetition (0-based).
    pub run: usize,
    /// The policy's label.
    pub label: String,
    /// What it measured.
    pub metrics: RunMetrics,
}

/// A row: its name and how to read it off a run.
type Row = (&'static str, fn(&RunMetrics) -> f64);

const ROWS: [Row; 5] = [
    ("deadline misses per 10k jobs", |m| m.misses_per_10k()),
    ("misses in strings of 4+ per 10k", |m| m.held_per_10k()),
    ("longest string of misses (periods)", |m| m.longest as f64),
    ("worst lateness (ms)", |m| m.worst_late_us as f64 / 1e3),
    ("host steal in the window (ms)", |m| m.steal_ms()),
];

/// Values of `get` for `label`'s runs, by repetition.
fn values(rs: &[RunResult], label: &str, get: fn(&RunMetrics) -> f64) -> Vec<(usize, f64)> {
    rs.iter()
        .filter(|r| r.label == label)
        .map(|r| (r.run, get(&r.metrics)))
        .collect()
}

/// `label`'s value beside SCHED_FIFO's in each repetition both ran.
fn paired(rs: &[RunResult], label: &str, get: fn(&RunMetrics) -> f64) -> Vec<(f64, f64)> {
    let fifo = values(rs, "fifo", get);
    values(rs, label, get)
        .into_iter()
        .filter_map(|(run, x)| Some((x, fifo.iter().find(|f| f.0 == run)?.1)))
        .collect()
}

/// "ratio [min-max], more in k/n": the median and range of the per-run
/// ratios to SCHED_FIFO (runs where SCHED_FIFO's value is 0 have none),
/// and the repetitions where the reservation's value was higher.
fn versus_fifo(pairs: &[(f64, f64)]) -> String {
    let worse = pairs.iter().filter(|(x, f)| x > f).count();
    format!("{}, more in {worse}/{}", ratio_cell(pairs), pairs.len())
}

/// The table under `head`.
pub fn table(rs: &[RunResult], contenders: &[Contender], head: &str) -> String {
    let mut o = format!("{head}\n{:<38}", "metric (median over runs)");
    for c in contenders {
        o += &format!(" {:>16}", c.label);
        if c.label != "fifo" {
            o += &format!(" {:<32}", "/fifo [min-max], runs above fifo");
        }
    }
    o.push('\n');
    for (name, get) in ROWS {
        o += &format!("{name:<38}");
        for c in contenders {
            let v: Vec<f64> = values(rs, &c.label, get).into_iter().map(|v| v.1).collect();
            o += &format!(" {:>16}", cell(median(&v)));
            if c.label != "fifo" {
                o += &format!(" {:<32}", versus_fifo(&paired(rs, &c.label, get)));
            }
        }
        o.push('\n');
    }
    for c in contenders {
        o += &format!("  {}: {}\n", c.label, c.policy.describe());
    }
    o += "  a miss: a job that ended after the next release; a string: consecutive misses of one task\n";
    o
}

/// One line per run: `run,policy,jobs,misses,held,longest,worst_late_us,steal_ms`.
pub fn csv(rs: &[RunResult]) -> String {
    let mut o = String::from("run,policy,jobs,misses,held,longest,worst_late_us,steal_ms\n");
    for r in rs {
        let m = &r.metrics;
        let steal = match m.steal_ms() {
            ms if ms.is_finite() => format!("{ms:.0}"),
            _ => String::new(),
        };
        o += &format!(
            "{},{},{},{},{},{},{},{steal}\n",
            r.run + 1,
            r.label,
            m.jobs,
            m.misses,
            m.held,
            m.longest,
            m.worst_late_us
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtapp::RtPolicy;

    fn result(run: usize, label: &str, misses: u64, longest: u64) -> RunResult {
        RunResult {
            run,
            label: label.into(),
            metrics: RunMetrics {
                jobs: 10_000,
                misses,
                held: 0,
                longest,
                worst_late_us: 1500,
                steal_ns: Some(30_000_000),
            },
        }
    }

    #[test]
    fn ratios_pair_each_run_with_fifos_run_of_the_same_repetition() {
        let rs = vec![
            result(0, "fifo", 10, 2),
            result(0, "deadline-1.1x", 30, 40),
            result(1, "deadline-1.1x", 5, 1),
            result(1, "fifo", 10, 2),
        ];
        let cs = vec![
            Contender::fifo(),
            Contender {
                label: "deadline-1.1x".into(),
                policy: RtPolicy::Deadline {
                    runtime_us: 300,
                    period_us: 2667,
                    deadline_us: 2667,
                },
            },
        ];
        let t = table(&rs, &cs, "== head ==");
        let misses = t
            .lines()
            .find(|l| l.starts_with("deadline misses"))
            .unwrap();
        assert!(misses.contains("1.75 [0.50-3.00], more in 1/2"), "{misses}");
        let longest = t.lines().find(|l| l.starts_with("longest")).unwrap();
        assert!(longest.contains("10.25 [0.50-20.00]"), "{longest}");
        // No SCHED_FIFO run held a string: no ratio, but the count stays.
        let held = t
            .lines()
            .find(|l| l.starts_with("misses in strings"))
            .unwrap();
        assert!(held.contains("-, more in 0/2"), "{held}");
        assert!(t.contains("SCHED_DEADLINE 300/2667/2667 us"));
    }

    #[test]
    fn csv_has_a_line_per_run() {
        let c = csv(&[result(0, "fifo", 3, 1)]);
        assert_eq!(
            c,
            "run,policy,jobs,misses,held,longest,worst_late_us,steal_ms\n1,fifo,10000,3,0,1,1500,30\n"
        );
    }
}
