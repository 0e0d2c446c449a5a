//! The `Status` reply (server timing, clients with their last cycle's
//! timestamps, scheduling and reservations) and the `ListPorts` reply.
//!
//! Threads: session threads, under the state lock.

use super::{Server, State};
use resound_engine::kind;
use resound_graph::{port_type_name, ClientState, Graph, DRIVER};
use resound_protocol::wire::{ClientStatus, PortInfo, ReservationStatus, Status};
use resound_shm::sync::Ordering;
use std::sync::atomic::AtomicU64;

impl Server {
    /// Every port with its connections and latency (the `ListPorts` reply).
    pub(super) fn list_ports(g: &Graph) -> Vec<PortInfo> {
        g.ports()
            .map(|(slot, p)| PortInfo {
                id: slot,
                name: g.port_name(slot).unwrap_or_default(),
                port_type: port_type_name(p.ptype).to_string(),
                flags: p.flags,
                aliases: p.aliases.clone(),
                connections: g
                    .connections_of(slot)
                    .into_iter()
                    .filter_map(|q| g.port_name(q))
                    .collect(),
                latency: if p.is_input() {
                    (p.latency[2], p.latency[3])
                } else {
                    (p.latency[0], p.latency[1])
                },
            })
            .collect()
    }

    /// The scheduling mode, with the budget floor in force (floors are
    /// lowered only in deadline mode).
    fn sched_now(&self) -> String {
        if self.floors_lowered.load(Ordering::Relaxed) {
            super::sched_mode::deadline_description(
                &self.cfg.server,
                self.ledger_capacity,
                Some(resound_sched::controller::THESIS_MIN_BUDGET_PCT),
            )
        } else {
            self.sched_desc.clone()
        }
    }

    /// The `Status` reply: timing, clients, scheduling, reservations.
    pub(super) fn status(&self, st: &State) -> Status {
        let h = self.view.header();
        let t = self.view.timer();
        let (cycle, start) = (t.cycle, t.start_ns);
        let period = h.period_ns.load(Ordering::Relaxed).max(1);
        let table = self.view.table(self.view.current_index());
        let clients = self.client_statuses(st, cycle, start, period);
        let mut reservations = self.reservations(st);
        reservations.extend(self.client_thread_statuses(st));
        Status {
            server: self.name.clone(),
            driver: self.cfg.driver_name().to_string(),
            sample_rate: h.sample_rate.load(Ordering::Relaxed),
            buffer_frames: h.buffer_frames.load(Ordering::Relaxed),
            mode: if self.cfg.server.sync {
                "sync"
            } else {
                "async"
            }
            .into(),
            cycles: cycle,
            xruns: h.xruns.load(Ordering::Relaxed),
            graph_version: table.version(),
            driver_sched: self.driver_sched_now(),
            driver_cpu_ns: self.view.record(0).map_or(0, |r| r.last_cpu().1),
            clients,
            sched: self.sched_now(),
            ledger_used: self.engine.ledger_ppm.load(Ordering::Relaxed) as f64 / 1e6,
            ledger_departed: self.engine.departed_ppm.load(Ordering::Relaxed) as f64 / 1e6,
            // Also without reservations of its own when threads outside the graph are admitted.
            ledger_capacity: if self.deadline_mode || !st.external.is_empty() {
                self.ledger_capacity
            } else {
                0.0
            },
            period_multiplier: if self.deadline_mode {
                self.cfg.server.period_multiplier.at(period)
            } else {
                1
            },
            multiplier_floor: self.cfg.server.period_multiplier.rule().0,
            multiplier_min_period_ns: self.cfg.server.period_multiplier.rule().1,
            graph: resound_protocol::wire::GraphReservation::of(&reservations, period),
            reservations,
            recent_xruns: st.recent_xruns.iter().cloned().collect(),
        }
    }

    /// Every client (driver excluded) with its last cycle's timestamps made
    /// relative to that cycle's start (`cycle` began at `start`).
    fn client_statuses(
        &self,
        st: &State,
        cycle: u64,
        start: u64,
        period: u64,
    ) -> Vec<ClientStatus> {
        let rel = |t: u64, c: u64| -> u64 {
            // Cycle starts are absolute deadlines, so cycle c began (cycle - c) periods before the current one.
            let base = start.saturating_sub(cycle.saturating_sub(c).saturating_mul(period));
            t.saturating_sub(base)
        };
        st.graph
            .clients()
            .filter(|(s, _)| *s != DRIVER)
            .map(|(slot, c)| {
                let r = self.view.record(slot);
                let last = r.map_or(0, |r| r.finished_cycle.load(Ordering::Acquire));
                ClientStatus {
                    uuid: c.uuid,
                    internal: self.internals.contains(c.uuid),
                    name: c.name.clone(),
                    pid: c.pid,
                    slot,
                    active: c.state == ClientState::Active,
                    ports: st.graph.ports().filter(|(_, p)| p.owner == slot).count() as u32,
                    xruns: st.xruns[slot as usize],
                    zombie: st.zombies[slot as usize],
                    last_cycle: last,
                    signal_ns: r.map_or(0, |r| rel(r.signal_ns.load(Ordering::Relaxed), last)),
                    awake_ns: r.map_or(0, |r| rel(r.awake_ns.load(Ordering::Relaxed), last)),
                    finish_ns: r.map_or(0, |r| rel(r.finish_ns.load(Ordering::Relaxed), last)),
                    cpu_ns: r.map_or(0, |r| r.last_cpu().1),
                }
            })
            .collect()
    }

    /// Every live reservation (driver and clients), as status shows them.
    fn reservations(&self, st: &State) -> Vec<ReservationStatus> {
        let mut v = Vec::new();
        for (slot, r) in self.engine.res.iter().enumerate() {
            let k = r.kind.load(Ordering::Relaxed);
            if k == kind::NONE {
                continue;
            }
            let name = if slot == 0 {
                "driver".to_string()
            } else {
                match st.graph.client(slot as u32) {
                    Some(c) => c.name.clone(),
                    None => continue,
                }
            };
            let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
            v.push(ReservationStatus {
                name,
                slot: slot as u32,
                tid: r.tid.load(Ordering::Relaxed),
                policy: match k {
                    kind::DEADLINE => "SCHED_DEADLINE",
                    kind::FIFO => "SCHED_FIFO",
                    _ => "SCHED_OTHER",
                }
                .into(),
                period_ns: ld(&r.period_ns),
                budget_ns: ld(&r.budget_ns),
                deadline_ns: ld(&r.deadline_ns),
                predicted_ns: ld(&r.predicted_ns),
                used_ns: ld(&r.used_ns),
                throttles: ld(&r.throttles),
                xruns: ld(&r.xruns),
                updates: ld(&r.updates),
                rescues: ld(&r.rescues),
            });
        }
        v
    }
}
