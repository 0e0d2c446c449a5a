//! Compilation of the model into the flat form the real-time side reads
//! from shared memory (see the crate docs): upstream edges (whose release
//! each node waits for), per-input sources, the activation order, feedback
//! connections.
//!
//! Threads: the server's control thread, under its state lock.

use crate::{ClientState, Connection, Graph, DRIVER};
use resound_shm::sync::switch;
use resound_shm::{self as shm, client_state, ClientEntry, PortEntry, TableHeader, View};

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
    /// Flat edges array (CSR): per node, its upstream nodes.
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
        let deps = self.dependencies();
        let active: Vec<u32> = self
            .clients()
            .map(|(s, _)| s)
            .filter(|&s| s != DRIVER && self.running(s))
            .collect();
        let flow = Flow::new(&deps, &active);
        let (clients, edges) = self.client_entries(&deps, &flow);
        let (ports, sources) = self.port_entries();
        Compiled {
            version: self.version,
            clients,
            ports,
            sources,
            edges,
            order: flow.order,
            feedback: deps.feedback,
        }
    }

    /// Client-to-client dependency edges between running clients, in
    /// connection order, with the connections that would close a loop set
    /// aside as feedback.
    fn dependencies(&self) -> Dependencies {
        let mc = self.caps.max_clients as usize;
        let mut d = Dependencies {
            succ: vec![Vec::new(); mc],
            from_driver: vec![false; mc],
            to_driver: vec![false; mc],
            feedback: Vec::new(),
        };
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
                (true, false) => d.from_driver[v as usize] = true,
                (false, true) => d.to_driver[u as usize] = true,
                (false, false) => {
                    if u == v || reaches(&d.succ, v, u) {
                        d.feedback.push(*c);
                    } else if !d.succ[u as usize].contains(&v) {
                        d.succ[u as usize].push(v);
                    }
                }
            }
        }
        d
    }

    /// Client entries (index = slot, up to the high-water mark) and the flat
    /// upstream edges they point into.
    fn client_entries(&self, deps: &Dependencies, flow: &Flow) -> (Vec<ClientEntry>, Vec<u32>) {
        let hw = self
            .clients
            .iter()
            .rposition(|c| c.is_some())
            .map_or(1, |i| i + 1);
        let mut clients = vec![shm::empty_client(); hw];
        let mut edges = Vec::new();
        let pos = |s: u32| flow.order.iter().position(|&x| x == s).unwrap_or(0) as u32;
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
            e.up_start = edges.len() as u32;
            if slot == DRIVER {
                edges.extend_from_slice(&flow.sinks);
            } else if e.state == client_state::ACTIVE {
                if flow.roots.contains(&slot) {
                    edges.push(DRIVER);
                }
                edges.extend(
                    flow.order
                        .iter()
                        .copied()
                        .filter(|&u| u != DRIVER && deps.succ[u as usize].contains(&slot)),
                );
            }
            e.up_count = edges.len() as u32 - e.up_start;
        }
        (clients, edges)
    }

    /// Port entries (index = slot, up to the high-water mark) and the flat
    /// sources array of the input ports.
    fn port_entries(&self) -> (Vec<PortEntry>, Vec<u32>) {
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
        (ports, sources)
    }
}

/// The dependency edges between running clients.
struct Dependencies {
    /// Per slot: the clients it feeds (feedback connections excluded).
    succ: Vec<Vec<u32>>,
    /// Per slot: fed by the driver's capture ports.
    from_driver: Vec<bool>,
    /// Per slot: feeds the driver's playback ports.
    to_driver: Vec<bool>,
    /// Connections that close a loop.
    feedback: Vec<Connection>,
}

/// How activation flows: the clients the driver starts and those that end
/// the graph, and the topological order.
struct Flow {
    /// Clients fed by capture or with no client upstream (the driver triggers them).
    roots: Vec<u32>,
    /// Clients that end the graph (they signal the driver).
    sinks: Vec<u32>,
    /// Activation order (driver first; Kahn, lowest slot first).
    order: Vec<u32>,
}

impl Flow {
    /// The flow of `deps` over the `active` clients.
    fn new(deps: &Dependencies, active: &[u32]) -> Flow {
        let mut indeg = vec![0u32; deps.succ.len()];
        for &u in active {
            for &v in &deps.succ[u as usize] {
                indeg[v as usize] += 1;
            }
        }
        let roots = active
            .iter()
            .copied()
            .filter(|&s| deps.from_driver[s as usize] || indeg[s as usize] == 0)
            .collect();
        let sinks = active
            .iter()
            .copied()
            .filter(|&s| deps.to_driver[s as usize] || deps.succ[s as usize].is_empty())
            .collect();
        let order = topological_order(deps, active, &indeg);
        Flow {
            roots,
            sinks,
            order,
        }
    }
}

/// Topological order of the active clients (Kahn, lowest slot first),
/// driver first: for display and for the order of each node's upstream list.
fn topological_order(deps: &Dependencies, active: &[u32], indeg: &[u32]) -> Vec<u32> {
    let mut order = vec![DRIVER];
    let mut deg = indeg.to_vec();
    let mut ready: std::collections::BTreeSet<u32> = active
        .iter()
        .copied()
        .filter(|&s| deg[s as usize] == 0)
        .collect();
    while let Some(u) = ready.pop_first() {
        order.push(u);
        for &v in &deps.succ[u as usize] {
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
    order
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

impl Compiled {
    /// The upstream nodes of `slot` (its range in `edges`).
    pub fn upstream(&self, slot: u32) -> &[u32] {
        self.clients.get(slot as usize).map_or(&[][..], |e| {
            let start = e.up_start as usize;
            self.edges
                .get(start..start + e.up_count as usize)
                .unwrap_or(&[])
        })
    }

    /// Per node (index = slot), the nodes downstream of it: the upstream
    /// edges turned around (the driver's: the nodes it starts).
    pub fn downstream(&self) -> Vec<Vec<u32>> {
        let mut down = vec![Vec::new(); self.clients.len()];
        for v in 0..self.clients.len() as u32 {
            for &u in self.upstream(v) {
                if let Some(d) = down.get_mut(u as usize) {
                    d.push(v);
                }
            }
        }
        down
    }

    /// Writes this graph into the *next* table of `view` and marks it
    /// pending (`switch::begin_write` … `end_write`); the driver switches to
    /// it at its next cycle start. The one way a compiled graph reaches
    /// shared memory: the server's publication and the engine's tests both
    /// use it. Control thread only (not real-time).
    ///
    /// # Safety
    /// The caller must be the only graph writer of `view` for the duration
    /// of the call (the server holds its state lock), and `view` must be the
    /// server's own, writable mapping of the control segment.
    pub unsafe fn write_next_table(&self, view: &View) {
        let h = view.header();
        let next = switch::begin_write(&h.switch);
        {
            // SAFETY: the caller guarantees it is the single graph writer
            // (this function's contract), and `next` comes from begin_write.
            let mut t = unsafe { view.table_mut(next) };
            for (i, e) in self.clients.iter().enumerate() {
                t.set_client(i as u32, e);
            }
            for (i, e) in self.ports.iter().enumerate() {
                t.set_port(i as u32, e);
            }
            t.set_arrays(&self.sources, &self.edges, &self.order);
            t.set_header(TableHeader {
                version: self.version,
                client_hw: self.clients.len() as u32,
                port_hw: self.ports.len() as u32,
                n_sources: self.sources.len() as u32,
                n_edges: self.edges.len() as u32,
                n_order: self.order.len() as u32,
                _pad: 0,
            });
        }
        switch::end_write(&h.switch);
    }
}
