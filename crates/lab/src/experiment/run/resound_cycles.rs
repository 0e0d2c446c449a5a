//! Every cycle of a resound run, from the server's profile ring: polled a
//! few times a second while the run goes on (the ring holds the newest
//! seconds only), then turned into the experiment's [`CycleSample`]s: the
//! driver's measured period and end date, each client's end date, the
//! graph's budget, prediction and CPU used (the papers' single group
//! reservation: the sum over the graph's threads, budgets taken per audio
//! period). Dates are taken from the driver's wake-up, as jackd2 takes its
//! cycle start (and as the jackd side of a run measures it), not from the
//! timer's nominal start. Runs on the command's main thread.

use crate::experiment::results::CycleSample;
use resound_profiler::{Profile, ServerInfo};
use resound_shm::profile::{CycleData, NodeData, ProfileRing};
use std::collections::BTreeMap;

/// What has been read out of the ring so far.
pub struct RingLog {
    next: u64,
    records: Vec<(CycleData, Vec<NodeData>)>,
    lost: u64,
    names: BTreeMap<u64, String>,
}

impl RingLog {
    /// Starts reading at the ring's next record.
    pub fn start(ring: &ProfileRing) -> RingLog {
        let mut log = RingLog {
            next: ring.cycles_written(),
            records: Vec::new(),
            lost: 0,
            names: BTreeMap::new(),
        };
        log.read_names(ring);
        log
    }

    fn read_names(&mut self, ring: &ProfileRing) {
        for (uuid, _slot, _pid, name) in ring.names() {
            self.names.entry(uuid).or_insert(name);
        }
    }

    /// Reads what was written since the last poll.
    pub fn poll(&mut self, ring: &ProfileRing) {
        let (recs, lost) = ring.read_from(self.next, usize::MAX);
        // read_from returns every record from `next` on, or counts it as
        // lost, up to the first one not yet written.
        self.next += lost + recs.len() as u64;
        self.lost += lost;
        self.records.extend(recs);
        self.read_names(ring);
    }

    /// Records lost (overwritten before they were read).
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Everything read, as the profiler's model (what `resound profile`
    /// writes), with the server's facts in `info`.
    pub fn profile(&self, info: ServerInfo) -> Profile {
        let names: Vec<(u64, String)> = self.names.iter().map(|(u, n)| (*u, n.clone())).collect();
        Profile::from_records(info, &self.records, &names, self.lost)
    }

    /// The cycles of `p` (from [`RingLog::profile`]) as samples, times from `t0_ns` (CLOCK_MONOTONIC), clients
    /// in the order of `clients` (names; other graph nodes are left out).
    /// The graph's budget, prediction and CPU are the profiler's group sums
    /// (budgets per audio period, by the server's multiplier rule).
    pub fn samples(&self, p: &Profile, t0_ns: u64, clients: &[String]) -> Vec<CycleSample> {
        let uuid_of = |name: &str| -> Vec<u64> {
            self.names
                .iter()
                .filter(|(_, n)| n.as_str() == name)
                .map(|(u, _)| *u)
                .collect()
        };
        let columns: Vec<Vec<u64>> = clients.iter().map(|c| uuid_of(c)).collect();
        let us = |ns: u64| ns as f64 / 1000.0;
        p.cycles
            .iter()
            .map(|c| {
                let from_wake = |ns: u64| us(ns.saturating_sub(c.driver_awake_ns));
                let client_end_us = columns
                    .iter()
                    .map(|uuids| {
                        c.nodes
                            .iter()
                            .find(|n| uuids.contains(&n.uuid))
                            .and_then(|n| n.finish_ns)
                            .map(from_wake)
                    })
                    .collect();
                let end = c.nodes.iter().filter_map(|n| n.finish_ns).max();
                CycleSample {
                    t_s: c.start_ns.saturating_sub(t0_ns) as f64 / 1e9,
                    period_us: c.measured_period_ns.map(us),
                    driver_end_us: Some(from_wake(c.driver_end_ns)),
                    end_us: end.map(from_wake),
                    client_end_us,
                    budget_us: (c.graph.budget_ns > 0).then(|| us(c.graph.budget_ns)),
                    predicted_us: (c.graph.predicted_ns > 0).then(|| us(c.graph.predicted_ns)),
                    used_us: Some(us(c.graph.used_ns)),
                    xrun: c.xrun,
                }
            })
            .collect()
    }
}
