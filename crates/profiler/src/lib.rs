//! # resound-profiler
//!
//! The per-cycle timing model of "Timing measurements in JACK2" (Letz, Fober,
//! Orlarey) and
//! what can be done with it off the real-time path. The server's driver
//! thread writes one record per cycle into the profile ring
//! (`resound_shm::profile`); this crate turns what a reader copied out
//! of the ring ([`Profile::from_ring`] reads it) into a [`Profile`] (times relative to each cycle's start,
//! clients named), computes that report's summary tables ([`Summary`]: min,
//! max, average, standard deviation), and writes everything for a person
//! and for a program ([`write_dir`]): CSV, JSON, plots as PNG and SVG
//! ([`plots`]), and an `index.html` tying them together.
//!
//! Threads: none of this is real-time; `resound profile` and `resound
//! monitor` call it on ordinary threads of their own processes.
//!
//! Units: nanoseconds in the model, CSV and JSON; microseconds on plot axes
//! and in the summary tables (as in the report's figures).

pub mod export;
pub mod plots;
mod ring;

use resound_shm::profile::{cycle_flags, measures, CycleData, NodeData};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use export::write_dir;

/// A profile: consecutive cycles of a running server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Profile {
    /// The server (its fields appear at the top level of the JSON).
    #[serde(flatten)]
    pub info: ServerInfo,
    /// Cycles that were asked for but had already been overwritten in the
    /// ring (it keeps the newest records), or were being overwritten while read.
    pub overwritten: u64,
    /// Every client that appears in the cycles, by uuid.
    pub clients: Vec<ClientInfo>,
    /// The cycles, oldest first.
    pub cycles: Vec<CycleRow>,
}

/// A client that appears in the profile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientInfo {
    /// Uuid (unique for the server's lifetime).
    pub uuid: u64,
    /// Name (made unique in the profile: a second client with the same name gets " (2)").
    pub name: String,
}

/// One cycle.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CycleRow {
    /// Cycle number.
    pub cycle: u64,
    /// Nominal start: absolute CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// Nominal period (ns).
    pub period_ns: u64,
    /// Frames.
    pub frames: u32,
    /// Measured period: this cycle's driver wake-up minus the previous
    /// cycle's (ns); None for the first cycle of the profile or after a gap.
    pub measured_period_ns: Option<u64>,
    /// Driver wake-up relative to the nominal start (its scheduling latency, ns).
    pub driver_awake_ns: u64,
    /// Driver end date relative to the start (ns).
    pub driver_end_ns: u64,
    /// Driver thread CPU time (ns).
    pub driver_cpu_ns: u64,
    /// Driver reservation budget (ns; 0 without one).
    pub driver_budget_ns: u64,
    /// Driver controller prediction (ns; 0 without one).
    pub driver_predicted_ns: u64,
    /// A client of this cycle was late (an xrun).
    pub xrun: bool,
    /// The driver woke more than a period late before this cycle.
    pub driver_late: bool,
    /// The clients of the graph in this cycle.
    pub nodes: Vec<NodeRow>,
    /// Audio periods per reservation period in this cycle (`--period-multiplier`).
    #[serde(default = "one")]
    pub multiplier: u32,
    /// The graph as one group reservation ([`GraphSums`]).
    #[serde(default)]
    pub graph: GraphSums,
}

fn one() -> u32 {
    1
}

/// One cycle's graph-level view: the single group reservation of the
/// papers, summed over the graph's threads (driver and clients). Budgets
/// and predictions are per reservation period in the ring; a thread whose
/// reservation period spans N audio periods counts for 1/N of them here
/// (rounded to the nearest ns), so every figure is per audio period.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct GraphSums {
    /// Sum of the budgets, per audio period (ns; 0 without reservations).
    pub budget_ns: u64,
    /// Sum of the controllers' predictions, per audio period (ns).
    pub predicted_ns: u64,
    /// Sum of the CPU time the driver and every client that finished used (ns).
    pub used_ns: u64,
}

impl GraphSums {
    /// Sums a cycle's driver and client figures; `multiplier` converts
    /// budgets and predictions to one audio period.
    pub fn of(multiplier: u32, driver: (u64, u64, u64), nodes: &[NodeRow]) -> GraphSums {
        let per = |v: u64| per_audio_period(v, multiplier);
        let (budget, predicted, cpu) = driver;
        let mut g = GraphSums {
            budget_ns: per(budget),
            predicted_ns: per(predicted),
            used_ns: cpu,
        };
        // Saturating: the ring is shared memory a client can scribble on.
        for n in nodes {
            g.budget_ns = g.budget_ns.saturating_add(per(n.budget_ns));
            g.predicted_ns = g.predicted_ns.saturating_add(per(n.predicted_ns));
            g.used_ns = g.used_ns.saturating_add(n.cpu_ns.unwrap_or(0));
        }
        g
    }
}

/// `v` (ns per reservation period of `multiplier` audio periods) per audio
/// period, rounded to the nearest ns.
pub fn per_audio_period(v: u64, multiplier: u32) -> u64 {
    let m = multiplier.max(1) as u64;
    v / m + u64::from(v % m >= m.div_ceil(2))
}

/// One client in one cycle; times relative to the cycle's nominal start.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct NodeRow {
    /// Client uuid (see [`Profile::clients`]).
    pub uuid: u64,
    /// Signal date: when its last input finished and it was woken (ns).
    pub signal_ns: Option<u64>,
    /// Awake date: when its thread ran (ns).
    pub awake_ns: Option<u64>,
    /// End date: when its process callback returned (ns).
    pub finish_ns: Option<u64>,
    /// CPU time its thread used (ns).
    pub cpu_ns: Option<u64>,
    /// Reservation budget (ns per reservation period; 0 without one).
    pub budget_ns: u64,
    /// Controller prediction (ns; 0 without one).
    pub predicted_ns: u64,
    /// It had not finished when the next cycle began.
    pub late: bool,
}

impl NodeRow {
    /// Scheduling latency: awake - signal (ns).
    pub fn scheduling_ns(&self) -> Option<u64> {
        Some(measures::scheduling_ns(self.signal_ns?, self.awake_ns?))
    }

    /// Duration: finish - awake (ns).
    pub fn duration_ns(&self) -> Option<u64> {
        Some(measures::duration_ns(self.awake_ns?, self.finish_ns?))
    }
}

impl CycleRow {
    /// End of the graph: the latest client end date (ns from the start), or
    /// the driver's end date when no client finished. A cycle with a late
    /// client ended after the period: it counts as ending at the period
    /// (at least; the xrun flag says more).
    pub fn graph_end_ns(&self) -> u64 {
        measures::graph_end_ns(
            self.nodes.iter().filter_map(|n| n.finish_ns),
            self.driver_end_ns,
            self.period_ns,
            self.nodes.iter().any(|n| n.late),
        )
    }
}

/// Server facts a reader adds to the raw records.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ServerInfo {
    /// Server name.
    pub server: String,
    /// Sample rate (Hz).
    pub sample_rate: u32,
    /// Period (frames) at export time.
    pub buffer_frames: u32,
    /// "sync" or "async".
    pub mode: String,
    /// Scheduling of the graph's real-time threads, as the server describes it.
    pub sched: String,
    /// Seconds of history the server's ring holds at the current period.
    pub ring_seconds: f64,
    /// The `--period-multiplier` rule: the multiplier's floor (N, or 1 for `auto`).
    #[serde(default = "one")]
    pub multiplier_floor: u32,
    /// The `--period-multiplier auto` minimum reservation period (ns; 0: fixed N).
    #[serde(default)]
    pub multiplier_min_period_ns: u64,
}

impl ServerInfo {
    /// The multiplier in use at audio period `period_ns` (the server's rule,
    /// `resound_sched::multiplier_for`).
    pub fn multiplier_at(&self, period_ns: u64) -> u32 {
        resound_sched::multiplier_for(
            period_ns,
            self.multiplier_floor,
            self.multiplier_min_period_ns,
        )
    }
}

impl Profile {
    /// Builds a profile from records read out of the ring (oldest first),
    /// `names` from the ring's name records (uuid, name), and how many
    /// requested records were lost.
    pub fn from_records(
        info: ServerInfo,
        records: &[(CycleData, Vec<NodeData>)],
        names: &[(u64, String)],
        overwritten: u64,
    ) -> Profile {
        let name_of: BTreeMap<u64, &str> = names.iter().map(|(u, n)| (*u, n.as_str())).collect();
        let mut clients: Vec<ClientInfo> = Vec::new();
        let mut cycles = Vec::with_capacity(records.len());
        let mut prev: Option<&CycleData> = None;
        for (c, rows) in records {
            let measured = prev.and_then(|p| c.measured_period_ns(p));
            prev = Some(c);
            let nodes = rows
                .iter()
                .map(|r| {
                    if !clients.iter().any(|k| k.uuid == r.uuid) {
                        let base = name_of
                            .get(&r.uuid)
                            .map_or_else(|| format!("client {}", r.uuid), |n| n.to_string());
                        let mut name = base.clone();
                        let mut k = 2;
                        while clients.iter().any(|x| x.name == name) {
                            name = format!("{base} ({k})");
                            k += 1;
                        }
                        clients.push(ClientInfo { uuid: r.uuid, name });
                    }
                    let [signal_ns, awake_ns, finish_ns] = r.dates_since(c.start_ns);
                    NodeRow {
                        uuid: r.uuid,
                        signal_ns,
                        awake_ns,
                        finish_ns,
                        cpu_ns: finish_ns.map(|_| r.cpu_ns),
                        budget_ns: r.budget_ns,
                        predicted_ns: r.predicted_ns,
                        late: r.is_late(),
                    }
                })
                .collect::<Vec<_>>();
            let multiplier = info.multiplier_at(c.period_ns);
            let graph = GraphSums::of(multiplier, (c.budget_ns, c.predicted_ns, c.cpu_ns), &nodes);
            cycles.push(CycleRow {
                cycle: c.cycle,
                start_ns: c.start_ns,
                period_ns: c.period_ns,
                frames: c.frames,
                measured_period_ns: measured,
                driver_awake_ns: c.driver_awake_ns(),
                driver_end_ns: c.driver_end_ns(),
                driver_cpu_ns: c.cpu_ns,
                driver_budget_ns: c.budget_ns,
                driver_predicted_ns: c.predicted_ns,
                xrun: c.flags & cycle_flags::XRUN != 0,
                driver_late: c.flags & cycle_flags::DRIVER_LATE != 0,
                nodes,
                multiplier,
                graph,
            });
        }
        Profile {
            info,
            overwritten,
            clients,
            cycles,
        }
    }

    /// Name of a client by uuid.
    pub fn name(&self, uuid: u64) -> &str {
        self.clients
            .iter()
            .find(|c| c.uuid == uuid)
            .map_or("?", |c| c.name.as_str())
    }

    /// Nominal period of the newest cycle (ns), or 0.
    pub fn period_ns(&self) -> u64 {
        self.cycles.last().map_or(0, |c| c.period_ns)
    }

    /// Per client, in [`Profile::clients`] order: (cycle, value) for every
    /// cycle in which `f` gives a value.
    pub fn series(
        &self,
        f: impl Fn(&NodeRow) -> Option<u64>,
    ) -> Vec<(&ClientInfo, Vec<(u64, u64)>)> {
        self.clients
            .iter()
            .map(|ci| {
                let pts = self
                    .cycles
                    .iter()
                    .filter_map(|c| {
                        c.nodes
                            .iter()
                            .find(|n| n.uuid == ci.uuid)
                            .and_then(&f)
                            .map(|v| (c.cycle, v))
                    })
                    .collect();
                (ci, pts)
            })
            .collect()
    }

    /// Cycles with an xrun.
    pub fn xruns(&self) -> usize {
        self.cycles
            .iter()
            .filter(|c| c.xrun || c.driver_late)
            .count()
    }

    /// The summary tables (min, max, average, standard deviation per measure).
    pub fn summary(&self) -> Summary {
        let mut rows = Vec::new();
        let mut add = |group: &str, what: &str, unit: Unit, vals: Vec<u64>| {
            if let Some(s) = Stats::of(&vals) {
                rows.push(SummaryRow {
                    group: group.to_string(),
                    measure: what.to_string(),
                    unit,
                    stats: s,
                });
            }
        };
        let c = &self.cycles;
        add(
            "driver",
            "period",
            Unit::Us,
            c.iter().filter_map(|c| c.measured_period_ns).collect(),
        );
        add(
            "driver",
            "wake-up latency",
            Unit::Us,
            c.iter().map(|c| c.driver_awake_ns).collect(),
        );
        add(
            "driver",
            "end date",
            Unit::Us,
            c.iter().map(|c| c.driver_end_ns).collect(),
        );
        add(
            "driver",
            "CPU time",
            Unit::Us,
            c.iter().map(|c| c.driver_cpu_ns).collect(),
        );
        add(
            "graph",
            "end date",
            Unit::Us,
            c.iter().map(|c| c.graph_end_ns()).collect(),
        );
        if c.iter().any(|c| c.driver_budget_ns > 0) {
            add(
                "driver",
                "budget",
                Unit::Us,
                c.iter().map(|c| c.driver_budget_ns).collect(),
            );
        }
        if c.iter().any(|c| c.graph.budget_ns > 0) {
            for (what, f) in [
                (
                    "budget",
                    (|g: &GraphSums| g.budget_ns) as fn(&GraphSums) -> u64,
                ),
                ("predicted", |g| g.predicted_ns),
                ("used", |g| g.used_ns),
            ] {
                add(
                    "graph (per cycle)",
                    what,
                    Unit::Us,
                    c.iter().map(|c| f(&c.graph)).collect(),
                );
            }
        }
        for ci in &self.clients {
            let rows_of = || {
                c.iter()
                    .filter_map(move |c| c.nodes.iter().find(|n| n.uuid == ci.uuid))
            };
            add(
                &ci.name,
                "end date",
                Unit::Us,
                rows_of().filter_map(|n| n.finish_ns).collect(),
            );
            add(
                &ci.name,
                "scheduling latency",
                Unit::Us,
                rows_of().filter_map(|n| n.scheduling_ns()).collect(),
            );
            add(
                &ci.name,
                "duration",
                Unit::Us,
                rows_of().filter_map(|n| n.duration_ns()).collect(),
            );
            add(
                &ci.name,
                "CPU time",
                Unit::Us,
                rows_of().filter_map(|n| n.cpu_ns).collect(),
            );
            if rows_of().any(|n| n.budget_ns > 0) {
                add(
                    &ci.name,
                    "budget",
                    Unit::Us,
                    rows_of().map(|n| n.budget_ns).collect(),
                );
                add(
                    &ci.name,
                    "predicted",
                    Unit::Us,
                    rows_of().map(|n| n.predicted_ns).collect(),
                );
            }
            add(
                &ci.name,
                "late cycles",
                Unit::Count,
                vec![rows_of().filter(|n| n.late).count() as u64],
            );
        }
        Summary {
            cycles: c.len(),
            xruns: self.xruns(),
            period_ns: self.period_ns(),
            rows,
        }
    }
}

/// Unit of a summary row.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum Unit {
    /// Values are ns, shown in microseconds.
    Us,
    /// A count.
    Count,
}

/// min, max, average, standard deviation (population), over n values.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Stats {
    /// Number of values.
    pub n: usize,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
    /// Average.
    pub avg: f64,
    /// Standard deviation.
    pub std: f64,
}

impl Stats {
    /// Statistics of a list (None when empty).
    pub fn of(v: &[u64]) -> Option<Stats> {
        if v.is_empty() {
            return None;
        }
        let n = v.len() as f64;
        let avg = v.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = v.iter().map(|&x| (x as f64 - avg).powi(2)).sum::<f64>() / n;
        Some(Stats {
            n: v.len(),
            min: *v.iter().min().expect("non-empty") as f64,
            max: *v.iter().max().expect("non-empty") as f64,
            avg,
            std: var.sqrt(),
        })
    }
}

/// One line of a summary table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SummaryRow {
    /// "driver", "graph" or a client name.
    pub group: String,
    /// What is measured.
    pub measure: String,
    /// Unit of the values.
    pub unit: Unit,
    /// The statistics (in ns for [`Unit::Us`]).
    pub stats: Stats,
}

/// The summary tables (min, max, average, standard deviation per measure).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// Cycles in the profile.
    pub cycles: usize,
    /// Cycles with an xrun.
    pub xruns: usize,
    /// Nominal period (ns).
    pub period_ns: u64,
    /// The rows.
    pub rows: Vec<SummaryRow>,
}

impl Summary {
    /// As a fixed-width text table (microseconds).
    pub fn to_text(&self) -> String {
        let mut o = format!(
            "{} cycles, {} with an xrun, period {:.1} us\n\n{:<24} {:<20} {:>10} {:>10} {:>10} {:>10}\n",
            self.cycles,
            self.xruns,
            self.period_ns as f64 / 1e3,
            "",
            "",
            "min",
            "max",
            "average",
            "std dev"
        );
        let mut last = "";
        for r in &self.rows {
            let g = if r.group == last { "" } else { &r.group };
            last = &r.group;
            let s = &r.stats;
            match r.unit {
                Unit::Us => {
                    o += &format!(
                        "{:<24} {:<20} {:>10.1} {:>10.1} {:>10.1} {:>10.1}\n",
                        g,
                        format!("{} us", r.measure),
                        s.min / 1e3,
                        s.max / 1e3,
                        s.avg / 1e3,
                        s.std / 1e3
                    )
                }
                Unit::Count => o += &format!("{:<24} {:<20} {:>10}\n", g, r.measure, s.max as u64),
            }
        }
        o
    }
}

#[cfg(test)]
mod tests;
