//! What one `resound experiment run` produced: for each configuration and
//! server, the per-cycle series (driver period, driver end date, every
//! client's end date, the graph's budget, prediction and CPU used), the
//! rt-app jobs, the timeline marks, and the metrics computed from them over
//! the measured window. The runner fills it; the report reads it (and so can
//! a program, from `results.json`). Built and read on the command's main
//! thread.

use super::scenario::{Metric, Scenario, ServerKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything one experiment run produced.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResult {
    /// The scenario as run.
    pub scenario: Scenario,
    /// Where it came from: a file path, or `built-in NAME`.
    pub source: String,
    /// Run with `--quick`.
    pub quick: bool,
    /// Length of each configuration's run (s).
    pub duration_s: f64,
    /// The machine it ran on.
    pub machine: MachineInfo,
    /// When it started (UTC, `YYYY-MM-DD HH:MM:SS`).
    pub started: String,
    /// One per configuration and server, in scenario order (resound first).
    pub runs: Vec<RunResult>,
}

/// The machine and software versions.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MachineInfo {
    /// `uname -r`.
    pub kernel: String,
    /// Kernel preemption model (`uname -v`'s PREEMPT words).
    pub preemption: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// resound's version.
    pub resound_version: String,
    /// `jackd --version`'s version, when jackd runs in the scenario.
    pub jackd_version: Option<String>,
    /// rt-app's version, when rt-app runs in the scenario.
    pub rtapp_version: Option<String>,
}

/// One configuration on one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunResult {
    /// The configuration's name (`[[run]] name`).
    pub run: String,
    /// Its label.
    pub label: String,
    /// The server.
    pub server: ServerKind,
    /// The commands run (server, clients, rt-app), for the report's "setup used".
    pub setup: Vec<String>,
    /// Why it failed, when it did (the other fields hold what was measured before).
    pub error: Option<String>,
    /// Metrics over the measured window.
    pub metrics: BTreeMap<Metric, f64>,
    /// Client names, in the order of [`CycleSample::client_end_us`] (graph order).
    pub clients: Vec<String>,
    /// Every cycle of the run, oldest first.
    pub cycles: Vec<CycleSample>,
    /// Every rt-app job of the run, by task then release.
    pub jobs: Vec<JobSample>,
    /// Timeline marks for the figures (a client joined, rt-app started, ...).
    pub marks: Vec<Mark>,
    /// Scheduling the threads had, as the server and the kernel reported it.
    pub sched: String,
}

/// One audio cycle. Times are from the cycle's start (the driver's
/// wake-up: on resound its measured wake-up, not the timer's nominal
/// start; on jackd the traced return from its sleep) unless said otherwise;
/// a field is None where the server or the measurement has no value.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CycleSample {
    /// Cycle start, seconds from the start of the run.
    pub t_s: f64,
    /// Driver period: this wake-up minus the previous one (us).
    pub period_us: Option<f64>,
    /// Driver end date (us).
    pub driver_end_us: Option<f64>,
    /// End of chain: the last client's end date (us).
    pub end_us: Option<f64>,
    /// Each client's end date (us), in [`RunResult::clients`] order; None
    /// when the client was not in the graph or did not finish.
    pub client_end_us: Vec<Option<f64>>,
    /// Graph budget per audio period, summed over its reserved threads (us).
    pub budget_us: Option<f64>,
    /// Graph prediction per audio period, summed (us).
    pub predicted_us: Option<f64>,
    /// CPU time the graph's threads used in this cycle (us).
    pub used_us: Option<f64>,
    /// The server reported an xrun in this cycle.
    pub xrun: bool,
}

/// One rt-app job.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobSample {
    /// Task name (thread instance appended: `video-0`).
    pub task: String,
    /// Release, seconds from the start of the run.
    pub t_s: f64,
    /// Response time: end - release (us).
    pub response_us: f64,
    /// Slack: deadline - end (us; negative = a miss).
    pub slack_us: f64,
}

/// A moment of the timeline, drawn as a vertical line on time figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Mark {
    /// Seconds from the start of the run.
    pub t_s: f64,
    /// What happened ("dnl3 joins", "rt-app video starts").
    pub what: String,
}

/// Mean and population standard deviation; None when empty.
fn mean_sd(v: &[f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    Some((mean, var.sqrt()))
}

/// The `p`-th percentile (nearest rank) of sorted `v`.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Min, max, average, standard deviation of `v` into four metrics.
fn put_stats(out: &mut BTreeMap<Metric, f64>, v: &[f64], keys: [Metric; 4]) {
    let Some((mean, sd)) = mean_sd(v) else {
        return;
    };
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    for (k, x) in keys.into_iter().zip([min, max, mean, sd]) {
        out.insert(k, x);
    }
}

/// The per-cycle metrics over the cycles at or after `from_s`: driver
/// period and end date statistics, end-of-chain percentiles, the graph's
/// CPU and budget. (Xruns, lost cycles and rt-app metrics are added by the
/// runner, which knows the server's counters and rt-app's jobs.)
pub fn cycle_metrics(cycles: &[CycleSample], from_s: f64) -> BTreeMap<Metric, f64> {
    let window: Vec<&CycleSample> = cycles.iter().filter(|c| c.t_s >= from_s).collect();
    let col = |f: fn(&CycleSample) -> Option<f64>| -> Vec<f64> {
        window.iter().filter_map(|c| f(c)).collect()
    };
    let mut out = BTreeMap::new();
    out.insert(Metric::Cycles, window.len() as f64);
    use Metric::*;
    let periods = col(|c| c.period_us);
    put_stats(
        &mut out,
        &periods,
        [
            DriverPeriodMinUs,
            DriverPeriodMaxUs,
            DriverPeriodAvgUs,
            DriverPeriodSdUs,
        ],
    );
    let ends = col(|c| c.driver_end_us);
    put_stats(
        &mut out,
        &ends,
        [
            DriverEndMinUs,
            DriverEndMaxUs,
            DriverEndAvgUs,
            DriverEndSdUs,
        ],
    );
    let mut chain = col(|c| c.end_us);
    if let Some((mean, _)) = mean_sd(&chain) {
        chain.sort_by(f64::total_cmp);
        out.insert(EndAvgUs, mean);
        out.insert(EndP50Us, percentile(&chain, 50.0).unwrap_or(f64::NAN));
        out.insert(EndP99Us, percentile(&chain, 99.0).unwrap_or(f64::NAN));
        out.insert(EndMaxUs, *chain.last().unwrap_or(&f64::NAN));
    }
    out.insert(LostCycles, lost_cycles(cycles, from_s) as f64);
    let used = col(|c| c.used_us);
    if let Some((u, _)) = mean_sd(&used) {
        out.insert(GraphCpuUs, u);
    }
    let budget = col(|c| c.budget_us.filter(|b| *b > 0.0));
    if let Some((b, _)) = mean_sd(&budget) {
        out.insert(GraphBudgetUs, b);
        if let Some(u) = out.get(&GraphCpuUs).copied().filter(|u| *u > 0.0) {
            out.insert(BudgetOverUsed, b / u);
        }
    }
    out
}

/// Cycles at or after `from_s` in which a client that was in the graph
/// (between the first and the last cycle it finished) did not finish, or
/// finished after the next cycle began: its block missed the output.
pub fn lost_cycles(cycles: &[CycleSample], from_s: f64) -> u64 {
    let n = cycles
        .iter()
        .map(|c| c.client_end_us.len())
        .max()
        .unwrap_or(0);
    let len_us = |i: usize| {
        cycles
            .get(i + 1)
            .map_or(f64::INFINITY, |next| (next.t_s - cycles[i].t_s) * 1e6)
    };
    let mut lost = vec![false; cycles.len()];
    for k in 0..n {
        let end = |c: &CycleSample| c.client_end_us.get(k).copied().flatten();
        let (Some(first), Some(last)) = (
            cycles.iter().position(|c| end(c).is_some()),
            cycles.iter().rposition(|c| end(c).is_some()),
        ) else {
            continue;
        };
        for i in first..=last {
            if end(&cycles[i]).is_none_or(|e| e > len_us(i)) {
                lost[i] = true;
            }
        }
    }
    cycles
        .iter()
        .zip(&lost)
        .filter(|(c, l)| **l && c.t_s >= from_s)
        .count() as u64
}

/// The rt-app metrics over the jobs released at or after `from_s`.
pub fn job_metrics(jobs: &[JobSample], from_s: f64) -> BTreeMap<Metric, f64> {
    let window: Vec<&JobSample> = jobs.iter().filter(|j| j.t_s >= from_s).collect();
    let mut out = BTreeMap::new();
    if window.is_empty() {
        return out;
    }
    let misses = window.iter().filter(|j| j.slack_us < 0.0).count() as f64;
    let mut resp: Vec<f64> = window.iter().map(|j| j.response_us).collect();
    resp.sort_by(f64::total_cmp);
    let slack_min = window
        .iter()
        .map(|j| j.slack_us)
        .fold(f64::INFINITY, f64::min);
    out.insert(Metric::RtappJobs, window.len() as f64);
    out.insert(Metric::RtappMisses, misses);
    out.insert(Metric::RtappMissPct, 100.0 * misses / window.len() as f64);
    out.insert(
        Metric::RtappRespP99Us,
        percentile(&resp, 99.0).unwrap_or(f64::NAN),
    );
    out.insert(Metric::RtappRespMaxUs, *resp.last().unwrap_or(&f64::NAN));
    out.insert(Metric::RtappSlackMinUs, slack_min);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle(t_s: f64, period: f64, end: f64) -> CycleSample {
        CycleSample {
            t_s,
            period_us: Some(period),
            driver_end_us: Some(end),
            end_us: Some(end),
            used_us: Some(100.0),
            budget_us: Some(150.0),
            ..Default::default()
        }
    }

    #[test]
    fn cycle_metrics_skip_the_warmup_and_compute_the_statistics() {
        let cycles = vec![
            cycle(0.5, 9999.0, 9999.0), // warm-up: left out
            cycle(1.0, 1300.0, 10.0),
            cycle(1.1, 1400.0, 30.0),
        ];
        let m = cycle_metrics(&cycles, 1.0);
        assert_eq!(m[&Metric::Cycles], 2.0);
        assert_eq!(m[&Metric::DriverPeriodMinUs], 1300.0);
        assert_eq!(m[&Metric::DriverPeriodMaxUs], 1400.0);
        assert_eq!(m[&Metric::DriverPeriodAvgUs], 1350.0);
        assert_eq!(m[&Metric::DriverPeriodSdUs], 50.0);
        assert_eq!(m[&Metric::EndP50Us], 10.0);
        assert_eq!(m[&Metric::EndMaxUs], 30.0);
        assert_eq!(m[&Metric::BudgetOverUsed], 1.5);
    }

    #[test]
    fn lost_cycles_count_gaps_while_a_client_was_in_the_graph() {
        let c = |t_s, ends: Vec<Option<f64>>| CycleSample {
            t_s,
            client_end_us: ends,
            ..Default::default()
        };
        let cycles = vec![
            c(0.0, vec![Some(1.0), None]), // c2 not joined yet: not lost
            c(1.0, vec![None, Some(2.0)]), // c1 missed: lost
            c(2.0, vec![Some(1.0), None]), // c2 missed: lost
            c(3.0, vec![Some(1.0), Some(2.0)]),
            c(4.0, vec![Some(1.0)]), // c2 left: not lost
        ];
        assert_eq!(lost_cycles(&cycles, 0.0), 2);
        assert_eq!(lost_cycles(&cycles, 1.5), 1);
        assert_eq!(cycle_metrics(&cycles, 0.0)[&Metric::LostCycles], 2.0);
    }

    #[test]
    fn job_metrics_count_negative_slack_as_misses() {
        let job = |t_s, slack_us| JobSample {
            task: "t-0".into(),
            t_s,
            response_us: 1000.0 - slack_us,
            slack_us,
        };
        let jobs = vec![job(0.0, -5.0), job(2.0, 10.0), job(2.1, -1.0)];
        let m = job_metrics(&jobs, 1.0);
        assert_eq!(m[&Metric::RtappJobs], 2.0);
        assert_eq!(m[&Metric::RtappMisses], 1.0);
        assert_eq!(m[&Metric::RtappMissPct], 50.0);
        assert_eq!(m[&Metric::RtappSlackMinUs], -1.0);
        assert_eq!(m[&Metric::RtappRespMaxUs], 1001.0);
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
