//! The names of what a run measures, shared by scenario files (published
//! values name them), the runner (it computes them) and the report (it
//! prints them with their units). Statistics are over the measured window
//! (after the warm-up).

use serde::{Deserialize, Serialize};

/// A measured quantity of one configuration on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Driver period: time between consecutive driver wake-ups, minimum (us).
    DriverPeriodMinUs,
    /// Driver period, maximum (us).
    DriverPeriodMaxUs,
    /// Driver period, average (us).
    DriverPeriodAvgUs,
    /// Driver period, standard deviation (us).
    DriverPeriodSdUs,
    /// Driver end date: when the driver finished its cycle and went to
    /// sleep, from the cycle's start (the driver's wake-up, on both
    /// servers); minimum (us).
    DriverEndMinUs,
    /// Driver end date, maximum (us).
    DriverEndMaxUs,
    /// Driver end date, average (us).
    DriverEndAvgUs,
    /// Driver end date, standard deviation (us).
    DriverEndSdUs,
    /// End of chain: the last client's end date from the cycle start (the
    /// driver's wake-up), median (us).
    EndP50Us,
    /// End of chain, 99th percentile (us).
    EndP99Us,
    /// End of chain, maximum (us).
    EndMaxUs,
    /// End of chain, average (us).
    EndAvgUs,
    /// Xruns the server reported during the measured window.
    Xruns,
    /// Cycles in which a client of the graph did not finish, or finished
    /// after the next cycle began (its block missed the output).
    LostCycles,
    /// Cycles measured.
    Cycles,
    /// rt-app jobs released in the window.
    RtappJobs,
    /// rt-app jobs that missed their deadline (negative slack).
    RtappMisses,
    /// rt-app deadline misses in percent of its jobs.
    RtappMissPct,
    /// rt-app response time (end - release), 99th percentile (us).
    RtappRespP99Us,
    /// rt-app response time, maximum (us).
    RtappRespMaxUs,
    /// rt-app slack, minimum (us; negative = a miss).
    RtappSlackMinUs,
    /// CPU time the graph's threads used per cycle, average (us).
    GraphCpuUs,
    /// Reserved budget per audio period, summed over the graph's threads, average (us).
    GraphBudgetUs,
    /// Reserved budget / CPU used (bandwidth efficiency; 1 = exact).
    BudgetOverUsed,
}

impl Metric {
    /// Every metric, in report order.
    pub const ALL: [Metric; 24] = [
        Metric::DriverPeriodMinUs,
        Metric::DriverPeriodMaxUs,
        Metric::DriverPeriodAvgUs,
        Metric::DriverPeriodSdUs,
        Metric::DriverEndMinUs,
        Metric::DriverEndMaxUs,
        Metric::DriverEndAvgUs,
        Metric::DriverEndSdUs,
        Metric::EndP50Us,
        Metric::EndP99Us,
        Metric::EndMaxUs,
        Metric::EndAvgUs,
        Metric::Xruns,
        Metric::LostCycles,
        Metric::Cycles,
        Metric::RtappJobs,
        Metric::RtappMisses,
        Metric::RtappMissPct,
        Metric::RtappRespP99Us,
        Metric::RtappRespMaxUs,
        Metric::RtappSlackMinUs,
        Metric::GraphCpuUs,
        Metric::GraphBudgetUs,
        Metric::BudgetOverUsed,
    ];

    /// The name used in scenario files, CSV and JSON (snake_case).
    pub fn key(self) -> &'static str {
        match self {
            Metric::DriverPeriodMinUs => "driver_period_min_us",
            Metric::DriverPeriodMaxUs => "driver_period_max_us",
            Metric::DriverPeriodAvgUs => "driver_period_avg_us",
            Metric::DriverPeriodSdUs => "driver_period_sd_us",
            Metric::DriverEndMinUs => "driver_end_min_us",
            Metric::DriverEndMaxUs => "driver_end_max_us",
            Metric::DriverEndAvgUs => "driver_end_avg_us",
            Metric::DriverEndSdUs => "driver_end_sd_us",
            Metric::EndP50Us => "end_p50_us",
            Metric::EndP99Us => "end_p99_us",
            Metric::EndMaxUs => "end_max_us",
            Metric::EndAvgUs => "end_avg_us",
            Metric::Xruns => "xruns",
            Metric::LostCycles => "lost_cycles",
            Metric::Cycles => "cycles",
            Metric::RtappJobs => "rtapp_jobs",
            Metric::RtappMisses => "rtapp_misses",
            Metric::RtappMissPct => "rtapp_miss_pct",
            Metric::RtappRespP99Us => "rtapp_resp_p99_us",
            Metric::RtappRespMaxUs => "rtapp_resp_max_us",
            Metric::RtappSlackMinUs => "rtapp_slack_min_us",
            Metric::GraphCpuUs => "graph_cpu_us",
            Metric::GraphBudgetUs => "graph_budget_us",
            Metric::BudgetOverUsed => "budget_over_used",
        }
    }

    /// Column heading for tables (with the unit).
    pub fn heading(self) -> &'static str {
        match self {
            Metric::DriverPeriodMinUs => "period min (us)",
            Metric::DriverPeriodMaxUs => "period max (us)",
            Metric::DriverPeriodAvgUs => "period avg (us)",
            Metric::DriverPeriodSdUs => "period sd (us)",
            Metric::DriverEndMinUs => "driver end min (us)",
            Metric::DriverEndMaxUs => "driver end max (us)",
            Metric::DriverEndAvgUs => "driver end avg (us)",
            Metric::DriverEndSdUs => "driver end sd (us)",
            Metric::EndP50Us => "end p50 (us)",
            Metric::EndP99Us => "end p99 (us)",
            Metric::EndMaxUs => "end max (us)",
            Metric::EndAvgUs => "end avg (us)",
            Metric::Xruns => "xruns",
            Metric::LostCycles => "lost cycles",
            Metric::Cycles => "cycles",
            Metric::RtappJobs => "rt-app jobs",
            Metric::RtappMisses => "rt-app misses",
            Metric::RtappMissPct => "rt-app misses (%)",
            Metric::RtappRespP99Us => "rt-app resp p99 (us)",
            Metric::RtappRespMaxUs => "rt-app resp max (us)",
            Metric::RtappSlackMinUs => "rt-app slack min (us)",
            Metric::GraphCpuUs => "graph CPU/cycle (us)",
            Metric::GraphBudgetUs => "graph budget/period (us)",
            Metric::BudgetOverUsed => "budget / used",
        }
    }

    /// The metric named `key` (as in [`Metric::key`]).
    pub fn from_key(key: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_match_serde() {
        for m in Metric::ALL {
            assert_eq!(Metric::from_key(m.key()), Some(m));
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.key()));
        }
        assert_eq!(Metric::from_key("nope"), None);
    }
}
