//! Compilation of the model into the flat form the real-time side reads
//! from shared memory (see the crate docs): activation counts, downstream
//! edges, per-input sources, the activation order, feedback connections.
//!
//! Threads: the server's control thread, under its state lock.

use crate::{ClientState, Connection, Graph, DRIVER};
use resound_shm::{self as shm, client_state, ClientEntry, PortEntry};

/// The flat form of a graph (what goes into a shared-memory table).
#[derive(Clone)]
pub struct Compiled {
    /// Graph version.
    pub version: u64,
    /// Client entries, index = slot (length = client high-water mark).
    pub clients: Vec<ClientEntry>,
    /// Port entries, index = slot (length = port high-water mark).
    pub ports: Vec<PortEntry>,
    /// Flat sources array (CSR, see [`shm`]).
    pub sources: Vec<u32>,
    /// Flat edges array (CSR).
    pub edges: Vec<u32>,
    /// Activation order (driver first).
    pub order: Vec<u32>,
    /// Connections that close a loop (one cycle of delay).
    pub feedback: Vec<Connection>,
}

impl Graph {
    fn running(&self, slot: u32) -> bool {
        slot == DRIVER || matches!(self.client(slot), Some(c) if c.state == ClientState::Active)
    }

    /// Compiles the model into the flat form (see the crate docs).
    pub fn compile(&self) -> Compiled {
        let mc = self.caps.max_clients as usize;
        // Client-to-client dependency edges, feedback ones excluded.
        let mut succ: Vec<Vec<u32>> = vec![Vec::new(); mc];
        let mut from_driver = vec![false; mc];
        let mut to_driver = vec![false; mc];
        let mut feedback = Vec::new();
        for c in &self.connections {
            let (Some(ps), Some(pd)) = (self.port(c.src), self.port(c.dst)) else {
                continue;
            };
            let (u, v) = (ps.owner, pd.owner);
            if !self.running(u) || !self.running(v) {
                continue;
            }
            match (u == DRIVER, v == DRIVER) {
                (true, true) => {}
                (true, false) => from_driver[v as usize] = true,
                (false, true) => to_driver[u as usize] = true,
                (false, false) => {
                    if u == v || reaches(&succ, v, u) {
                        feedback.push(*c);
                    } else if !succ[u as usize].contains(&v) {
                        succ[u as usize].push(v);
                    }
                }
            }
        }
        let active: Vec<u32> = self
            .clients()
            .map(|(s, _)| s)
            .filter(|&s| s != DRIVER && self.running(s))
            .collect();
        let mut indeg = vec![0u32; mc];
        for &u in &active {
            for &v in &succ[u as usize] {
                indeg[v as usize] += 1;
            }
        }
        // Driver triggers clients fed by capture or with no client upstream.
        let roots: Vec<u32> = active
            .iter()
            .copied()
            .filter(|&s| from_driver[s as usize] || indeg[s as usize] == 0)
            .collect();
        // Clients that end the graph signal the driver.
        let sinks: Vec<u32> = active
            .iter()
            .copied()
            .filter(|&s| to_driver[s as usize] || succ[s as usize].is_empty())
            .collect();

        let hw = self
            .clients
            .iter()
            .rposition(|c| c.is_some())
            .map_or(1, |i| i + 1);
        let mut clients = vec![shm::empty_client(); hw];
        let mut edges = Vec::new();
        // Topological order (Kahn, lowest slot first) for display and for the driver's reset loop.
        let mut order = vec![DRIVER];
        let mut deg = indeg.clone();
        let mut ready: std::collections::BTreeSet<u32> = active
            .iter()
            .copied()
            .filter(|&s| deg[s as usize] == 0)
            .collect();
        while let Some(u) = ready.pop_first() {
            order.push(u);
            for &v in &succ[u as usize] {
                deg[v as usize] -= 1;
                if deg[v as usize] == 0 {
                    ready.insert(v);
                }
            }
        }
        debug_assert_eq!(
            order.len(),
            active.len() + 1,
            "dependency graph must be acyclic"
        );
        let pos = |s: u32| order.iter().position(|&x| x == s).unwrap_or(0) as u32;
        for (slot, c) in self.clients() {
            let e = &mut clients[slot as usize];
            e.pid = c.pid;
            e.uuid = c.uuid;
            shm::put_name(&mut e.name, &c.name);
            e.state = if self.running(slot) {
                client_state::ACTIVE
            } else {
                client_state::OPEN
            };
            e.order = pos(slot);
            e.down_start = edges.len() as u32;
            if slot == DRIVER {
                e.init_count = sinks.len() as u32;
                edges.extend_from_slice(&roots);
            } else if e.state == client_state::ACTIVE {
                e.init_count = indeg[slot as usize] + from_driver[slot as usize] as u32;
                if e.init_count == 0 {
                    e.init_count = 1;
                }
                edges.extend_from_slice(&succ[slot as usize]);
                if sinks.contains(&slot) {
                    edges.push(DRIVER);
                }
            }
            e.down_count = edges.len() as u32 - e.down_start;
        }

        let phw = self
            .ports
            .iter()
            .rposition(|p| p.is_some())
            .map_or(0, |i| i + 1);
        let mut ports = vec![shm::empty_port(); phw];
        let mut sources = Vec::new();
        for (slot, p) in self.ports() {
            let e = &mut ports[slot as usize];
            e.state = 1;
            e.owner = p.owner;
            e.flags = p.flags;
            e.ptype = p.ptype;
            e.uuid = p.uuid;
            e.latency = p.latency;
            e.monitor = p.monitor;
            shm::put_name(&mut e.name, &self.port_name(slot).unwrap_or_default());
            for (i, a) in p.aliases.iter().take(2).enumerate() {
                shm::put_name(&mut e.aliases[i], a);
            }
            e.src_start = sources.len() as u32;
            if p.is_input() {
                sources.extend(
                    self.connections
                        .iter()
                        .filter(|c| c.dst == slot)
                        .map(|c| c.src),
                );
            }
            e.src_count = sources.len() as u32 - e.src_start;
            e.n_connections = self
                .connections
                .iter()
                .filter(|c| c.src == slot || c.dst == slot)
                .count() as u32;
        }
        Compiled {
            version: self.version,
            clients,
            ports,
            sources,
            edges,
            order,
            feedback,
        }
    }
}

/// Does `from` reach `to` over `succ`?
fn reaches(succ: &[Vec<u32>], from: u32, to: u32) -> bool {
    let mut seen = vec![false; succ.len()];
    let mut stack = vec![from];
    while let Some(u) = stack.pop() {
        if u == to {
            return true;
        }
        if std::mem::replace(&mut seen[u as usize], true) {
            continue;
        }
        stack.extend_from_slice(&succ[u as usize]);
    }
    false
}
