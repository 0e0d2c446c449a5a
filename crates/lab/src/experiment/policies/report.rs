//! The experiment's results: one [`PolicyResult`] per policy, the competing
//! task's [`RtReport`], their table and details as text and as JSON. Pure
//! functions, run on the main thread after the measurement.

use serde_json::json;

/// Nearest-rank percentile `p` (0..=100) of sorted samples; None when empty.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    let n = sorted.len() as u64;
    crate::rtapp::nearest_rank(n, p).map(|r| sorted[(r - 1) as usize])
}

/// What the competing task reported at its end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RtReport {
    /// Jobs counted (after its warm-up).
    pub jobs: u64,
    /// Jobs that finished after their deadline.
    pub misses: u64,
    /// Response-time median (us).
    pub p50_us: f64,
    /// Response-time 99th percentile (us).
    pub p99_us: f64,
    /// Largest response time (us).
    pub max_us: f64,
    /// Its scheduling ("SCHED_FIFO 50").
    pub policy: String,
}

impl RtReport {
    /// From rtapp's `{"event":"final",...}` line.
    pub fn from_json(v: &serde_json::Value) -> Option<RtReport> {
        if v["event"] != "final" {
            return None;
        }
        Some(RtReport {
            jobs: v["jobs"].as_u64()?,
            misses: v["misses"].as_u64()?,
            p50_us: v["resp_p50_us"].as_f64().unwrap_or(f64::NAN),
            p99_us: v["resp_p99_us"].as_f64().unwrap_or(f64::NAN),
            max_us: v["resp_max_us"].as_f64().unwrap_or(f64::NAN),
            policy: v["policy"].as_str().unwrap_or("?").to_string(),
        })
    }
}

/// One policy's results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Xruns during the measurement.
    pub xruns: u64,
    /// Cycles whose end-of-chain time was measured.
    pub cycles: u64,
    /// Cycles in which the last client never finished (skipped or given up).
    pub lost: u64,
    /// Cycles the poller could not judge (it was too late to read them).
    pub unobserved: u64,
    /// End-of-chain time (us): p50, p99, max over the measured cycles.
    pub end_us: Option<(f64, f64, f64)>,
    /// The competing task's report.
    pub rt: Option<RtReport>,
    /// Mean budget allocated per audio period, summed over the graph's
    /// SCHED_DEADLINE reservations (ns).
    pub budget_ns: Option<f64>,
    /// Mean CPU used per cycle by the threads that held those reservations,
    /// each weighted by the share of status polls it held one in (ns).
    pub used_reserved_ns: Option<f64>,
    /// Mean number of graph threads under a reservation per status poll.
    pub reserved_threads: f64,
    /// Threads of the graph (the driver and the clients).
    pub graph_threads: usize,
    /// Mean CPU used per cycle by all the graph's threads (ns).
    pub used_ns: Option<f64>,
    /// Server scheduling mode (status `sched`).
    pub sched: String,
    /// Driver thread scheduling.
    pub driver_sched: String,
    /// Load clients' process thread scheduling (distinct values).
    pub client_sched: String,
    /// Most resound processes not started by this run seen during it (they disturb it).
    pub others_running: usize,
    /// CPU time (in CPUs) used during the measurement by processes outside this run.
    pub foreign_cpus: Option<f64>,
    /// CPU time (in CPUs) the hypervisor stole during the measurement.
    pub steal_cpus: Option<f64>,
    /// Why the policy could not be measured.
    pub error: Option<String>,
}

impl PolicyResult {
    /// Budget allocated / CPU used by the reserved threads, when both exist.
    pub fn efficiency(&self) -> Option<f64> {
        match (self.budget_ns, self.used_reserved_ns) {
            (Some(b), Some(u)) if u > 0.0 => Some(b / u),
            _ => None,
        }
    }

    pub(super) fn to_json(&self) -> serde_json::Value {
        let f = |v: Option<f64>| v.map_or(serde_json::Value::Null, |v| json!(v));
        json!({
            "policy": self.policy,
            "error": self.error,
            "xruns": self.xruns,
            "cycles_measured": self.cycles,
            "cycles_lost": self.lost,
            "cycles_unobserved": self.unobserved,
            "end_p50_us": f(self.end_us.map(|e| e.0)),
            "end_p99_us": f(self.end_us.map(|e| e.1)),
            "end_max_us": f(self.end_us.map(|e| e.2)),
            "rt": self.rt.as_ref().map(|r| json!({
                "jobs": r.jobs, "misses": r.misses, "resp_p50_us": r.p50_us,
                "resp_p99_us": r.p99_us, "resp_max_us": r.max_us, "policy": r.policy,
            })),
            "budget_mean_us": f(self.budget_ns.map(|v| v / 1000.0)),
            "used_reserved_mean_us": f(self.used_reserved_ns.map(|v| v / 1000.0)),
            "reserved_threads": self.reserved_threads,
            "graph_threads": self.graph_threads,
            "used_mean_us": f(self.used_ns.map(|v| v / 1000.0)),
            "budget_over_used": f(self.efficiency()),
            "sched": self.sched,
            "driver_sched": self.driver_sched,
            "client_sched": self.client_sched,
            "other_resound_processes": self.others_running,
            "foreign_cpus": f(self.foreign_cpus),
            "steal_cpus": f(self.steal_cpus),
        })
    }
}

fn us1(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// The result table (one header line, one line per policy).
pub fn format_table(rows: &[PolicyResult]) -> String {
    let mut o = format!(
        "{:<17} {:>6} {:>5} {:>11} {:>11} {:>11} {:>9} {:>10} {:>15}\n",
        "policy",
        "xruns",
        "lost",
        "end p50 us",
        "end p99 us",
        "end max us",
        "rt misses",
        "rt max us",
        "budget/used"
    );
    for r in rows {
        if r.error.is_some() {
            o += &format!("{:<17} {:>6}\n", r.policy, "error (see below)");
            continue;
        }
        let (p50, p99, max) = r
            .end_us
            .map_or(("-".into(), "-".into(), "-".into()), |(a, b, c)| {
                (us1(a), us1(b), us1(c))
            });
        let (miss, rtmax) = r.rt.as_ref().map_or(("-".into(), "-".into()), |rt| {
            (format!("{}/{}", rt.misses, rt.jobs), us1(rt.max_us))
        });
        let eff = match r.efficiency() {
            None => "n/a".into(),
            Some(e) if r.reserved_threads + 0.05 < r.graph_threads as f64 => {
                let k = r.reserved_threads;
                if (k - k.round()).abs() < 0.05 {
                    format!("{e:.2} ({k:.0}/{})", r.graph_threads)
                } else {
                    format!("{e:.2} ({k:.1}/{})", r.graph_threads)
                }
            }
            Some(e) => format!("{e:.2}"),
        };
        o += &format!(
            "{:<17} {:>6} {:>5} {:>11} {:>11} {:>11} {:>9} {:>10} {:>15}\n",
            r.policy, r.xruns, r.lost, p50, p99, max, miss, rtmax, eff
        );
    }
    o
}

/// Details under the table: scheduling obtained, counts, errors.
pub(super) fn format_details(rows: &[PolicyResult]) -> String {
    let mut o = String::new();
    for r in rows {
        if let Some(e) = &r.error {
            o += &format!("  {}: error: {e}\n", r.policy);
            continue;
        }
        o += &format!(
            "  {}: server sched \"{}\", driver {}, clients {}, rtapp {}\n",
            r.policy,
            r.sched,
            r.driver_sched,
            r.client_sched,
            r.rt.as_ref().map_or("-", |rt| rt.policy.as_str())
        );
        let mut line = format!("      {} cycles measured", r.cycles);
        if r.unobserved > 0 {
            line += &format!(", {} not observed", r.unobserved);
        }
        if let Some(rt) = &r.rt {
            line += &format!(
                "; rtapp response p50/p99/max {}/{}/{} us",
                us1(rt.p50_us),
                us1(rt.p99_us),
                us1(rt.max_us)
            );
        }
        if let Some(u) = r.used_ns {
            line += &format!("; CPU used {} us/cycle", us1(u / 1000.0));
        }
        if let (Some(b), Some(u)) = (r.budget_ns, r.used_reserved_ns) {
            line += &format!(
                "; budget {} us/cycle for {:.1} reserved thread(s) using {} us/cycle",
                us1(b / 1000.0),
                r.reserved_threads,
                us1(u / 1000.0)
            );
        }
        o += &line;
        o += "\n";
        let foreign = r.foreign_cpus.unwrap_or(0.0);
        let steal = r.steal_cpus.unwrap_or(0.0);
        if foreign >= 0.05 || steal >= 0.05 {
            o += &format!(
                "      note: other processes used {foreign:.2} CPU and the hypervisor stole {steal:.2} CPU during the measurement\n"
            );
        }
        if r.others_running > 0 {
            o += &format!(
                "      note: {} other resound process(es) ran on this machine meanwhile; they disturbed the measurement\n",
                r.others_running
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        assert_eq!(percentile(&[], 50.0), None);
        let v: Vec<u64> = (1..=200).collect();
        assert_eq!(percentile(&v, 50.0), Some(100));
        assert_eq!(percentile(&v, 99.0), Some(198));
        assert_eq!(percentile(&v, 100.0), Some(200));
        assert_eq!(percentile(&[7], 99.0), Some(7));
    }

    #[test]
    fn table_rows_and_efficiency() {
        let rows = vec![
            PolicyResult {
                policy: "fifo".into(),
                xruns: 3,
                lost: 1,
                cycles: 7000,
                end_us: Some((2050.04, 2400.0, 4100.26)),
                rt: Some(RtReport {
                    jobs: 2000,
                    misses: 0,
                    p50_us: 1700.0,
                    p99_us: 1710.0,
                    max_us: 1720.5,
                    policy: "SCHED_FIFO 50".into(),
                }),
                used_ns: Some(2_000_000.0),
                ..Default::default()
            },
            PolicyResult {
                policy: "deadline".into(),
                budget_ns: Some(2_300_000.0),
                used_reserved_ns: Some(2_000_000.0),
                reserved_threads: 11.0,
                graph_threads: 11,
                used_ns: Some(2_000_000.0),
                ..Default::default()
            },
            PolicyResult {
                policy: "deadline+reclaim".into(),
                budget_ns: Some(690_000.0),
                used_reserved_ns: Some(600_000.0),
                reserved_threads: 3.02,
                graph_threads: 11,
                ..Default::default()
            },
            PolicyResult {
                policy: "deadline".into(),
                budget_ns: Some(2_600_000.0),
                used_reserved_ns: Some(2_000_000.0),
                reserved_threads: 10.8,
                graph_threads: 11,
                ..Default::default()
            },
            PolicyResult {
                policy: "other".into(),
                error: Some("boom".into()),
                ..Default::default()
            },
        ];
        let t = format_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6);
        assert!(lines[0].starts_with("policy"));
        assert!(lines[0].ends_with("budget/used"));
        let f: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            f,
            ["fifo", "3", "1", "2050.0", "2400.0", "4100.3", "0/2000", "1720.5", "n/a"]
        );
        assert!(lines[2].ends_with("1.15"));
        assert!(lines[3].ends_with(" 1.15 (3/11)"));
        assert!(lines[4].ends_with(" 1.30 (10.8/11)"));
        assert!(lines[5].starts_with("other") && lines[5].contains("error"));
        // Columns line up: every data line is as wide as the header.
        for l in &lines[1..5] {
            assert_eq!(l.len(), lines[0].len(), "{l:?}");
        }
        assert!(format_details(&rows).contains("other: error: boom"));
    }

    #[test]
    fn rt_report_parses_final_line() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"event":"final","jobs":2000,"misses":3,"resp_p50_us":1701.0,"resp_p99_us":1800.0,"resp_max_us":3400.5,"policy":"SCHED_FIFO 50"}"#,
        )
        .unwrap();
        let r = RtReport::from_json(&v).unwrap();
        assert_eq!(
            (r.jobs, r.misses, r.policy.as_str()),
            (2000, 3, "SCHED_FIFO 50")
        );
        assert_eq!(r.max_us, 3400.5);
        assert!(RtReport::from_json(&serde_json::json!({"event":"ready"})).is_none());
    }
}
