//! # resound-graph
//!
//! The server's authoritative model of the graph: clients, ports and
//! connections, with every validation a request needs (names, directions,
//! types, capacities), and [`Graph::compile`], which turns the model into the
//! flat form the real-time side reads from shared memory: per node the
//! activation count armed at cycle start and the list of nodes to decrement
//! when it finishes (seed 002's data-flow activation), per input port its
//! sources.
//!
//! Loops are allowed: connections are considered in the order they were made,
//! and one that would close a cycle among clients becomes a *feedback*
//! connection that does not count as a dependency, so its reader sees the
//! writer's previous cycle (one period of delay). This is the jackdmp rule
//! ("the feedback connection is introduced at the place where the loop is
//! established") applied afresh on every change, so breaking a loop elsewhere
//! turns the feedback connection back into a normal one.
//!
//! Node 0 is the driver: it owns the `system:*` ports, triggers the clients
//! that depend only on it (or on nothing), and counts the clients that end the
//! graph (those feeding playback or feeding no client) to know when a cycle is
//! complete.
//!
//! Threads: everything here runs on the server's control thread, under the
//! server's state lock. Nothing is real-time.

use resound_protocol::wire::{ErrorCode, WireError};
use resound_shm::limits::{CLIENT_NAME_MAX, PORT_NAME_MAX};
use resound_shm::{
    self as shm, client_state, port_flags, port_type, Capacities, ClientEntry, PortEntry,
};

/// Slot of the driver node.
pub const DRIVER: u32 = 0;

/// Type bits of client UUIDs (JACK's `JackUUIDClient << 32`), so UUIDs read
/// like jackd's and libjack can hand them out unchanged.
pub const CLIENT_UUID_TYPE: u64 = 2 << 32;
/// Type bits of port UUIDs (JACK's `JackUUIDPort << 32`).
pub const PORT_UUID_TYPE: u64 = 1 << 32;

/// Client state in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientState {
    /// Open, not activated.
    Open,
    /// In the activation graph.
    Active,
}

/// A client (or the driver, slot 0).
#[derive(Debug, Clone)]
pub struct Client {
    /// Name.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// State.
    pub state: ClientState,
    /// Unique id (never reused).
    pub uuid: u64,
}

/// A port.
#[derive(Debug, Clone)]
pub struct Port {
    /// Owning client slot.
    pub owner: u32,
    /// Short name (after "client:").
    pub short: String,
    /// JACK flags.
    pub flags: u32,
    /// [`port_type`] value.
    pub ptype: u32,
    /// Unique id.
    pub uuid: u64,
    /// Aliases (at most two).
    pub aliases: Vec<String>,
    /// Latency ranges: capture (min,max), playback (min,max).
    pub latency: [u32; 4],
    /// Monitor requests (jack_port_request_monitor count).
    pub monitor: u32,
}

impl Port {
    /// True for input ports.
    pub fn is_input(&self) -> bool {
        self.flags & port_flags::IS_INPUT != 0
    }
}

/// A connection, in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// Output port slot.
    pub src: u32,
    /// Input port slot.
    pub dst: u32,
}

/// What removing a client took with it: its connections, and its ports with their former full names.
pub type Removed = (Vec<Connection>, Vec<(u32, String)>);

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

/// The graph model.
#[derive(Debug, Clone)]
pub struct Graph {
    caps: Capacities,
    clients: Vec<Option<Client>>,
    ports: Vec<Option<Port>>,
    connections: Vec<Connection>,
    version: u64,
    next_uuid: u64,
}

fn err(code: ErrorCode, msg: impl Into<String>) -> WireError {
    WireError::new(code, msg)
}

/// Checks a client name against JACK's rules.
pub fn check_client_name(name: &str) -> Result<(), WireError> {
    if name.is_empty() {
        return Err(err(ErrorCode::InvalidName, "client name is empty"));
    }
    if name.len() > CLIENT_NAME_MAX {
        return Err(err(
            ErrorCode::InvalidName,
            format!(
                "client name {name:?} is {} bytes; the limit is {CLIENT_NAME_MAX}",
                name.len()
            ),
        ));
    }
    if name.contains(':') || name.contains('\0') {
        return Err(err(
            ErrorCode::InvalidName,
            format!("client name {name:?} must not contain ':' or NUL"),
        ));
    }
    Ok(())
}

/// Maps a JACK port type name to a [`port_type`] value.
pub fn port_type_of(name: &str) -> Option<u32> {
    match name {
        resound_shm::limits::AUDIO_TYPE => Some(port_type::AUDIO),
        resound_shm::limits::MIDI_TYPE => Some(port_type::MIDI),
        _ => None,
    }
}

/// The JACK type name of a [`port_type`] value.
pub fn port_type_name(t: u32) -> &'static str {
    if t == port_type::MIDI {
        resound_shm::limits::MIDI_TYPE
    } else {
        resound_shm::limits::AUDIO_TYPE
    }
}

impl Graph {
    /// An empty graph with the driver node ("system") in slot 0.
    pub fn new(caps: Capacities, driver_name: &str, server_pid: u32) -> Graph {
        let mut g = Graph {
            caps,
            clients: vec![None; caps.max_clients as usize],
            ports: vec![None; caps.max_ports as usize],
            connections: Vec::new(),
            version: 0,
            next_uuid: 1,
        };
        g.clients[0] = Some(Client {
            name: driver_name.into(),
            pid: server_pid,
            state: ClientState::Active,
            uuid: CLIENT_UUID_TYPE,
        });
        g
    }

    /// Capacities.
    pub fn caps(&self) -> Capacities {
        self.caps
    }

    /// Graph version (+1 per change).
    pub fn version(&self) -> u64 {
        self.version
    }

    fn bump(&mut self) {
        self.version += 1;
    }

    /// A fresh UUID with the given type bits; the counter is shared, so no two
    /// clients or ports ever get the same one in one server's lifetime.
    fn uuid(&mut self, kind: u64) -> u64 {
        let u = self.next_uuid;
        self.next_uuid += 1;
        kind | (u & 0xffff_ffff)
    }

    /// A client by slot.
    pub fn client(&self, slot: u32) -> Option<&Client> {
        self.clients.get(slot as usize)?.as_ref()
    }

    /// All clients with their slots (driver included).
    pub fn clients(&self) -> impl Iterator<Item = (u32, &Client)> {
        self.clients
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i as u32, c)))
    }

    /// A port by slot.
    pub fn port(&self, slot: u32) -> Option<&Port> {
        self.ports.get(slot as usize)?.as_ref()
    }

    /// All ports with their slots.
    pub fn ports(&self) -> impl Iterator<Item = (u32, &Port)> {
        self.ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.as_ref().map(|p| (i as u32, p)))
    }

    /// Connections in creation order.
    pub fn connections(&self) -> &[Connection] {
        &self.connections
    }

    /// Full name of a port.
    pub fn port_name(&self, slot: u32) -> Option<String> {
        let p = self.port(slot)?;
        Some(format!("{}:{}", self.client(p.owner)?.name, p.short))
    }

    /// Finds a port by full name or alias.
    pub fn port_by_name(&self, name: &str) -> Option<u32> {
        let (client, short) = name.split_once(':')?;
        let slot = self
            .clients()
            .find(|(_, c)| c.name == client)
            .map(|(s, _)| s);
        if let Some(slot) = slot {
            if let Some((i, _)) = self
                .ports()
                .find(|(_, p)| p.owner == slot && p.short == short)
            {
                return Some(i);
            }
        }
        self.ports()
            .find(|(_, p)| p.aliases.iter().any(|a| a == name))
            .map(|(i, _)| i)
    }

    /// Finds a client by name.
    pub fn client_by_name(&self, name: &str) -> Option<u32> {
        self.clients().find(|(_, c)| c.name == name).map(|(s, _)| s)
    }

    /// Adds a client. Without `exact`, a taken name gets a "-NN" suffix as in JACK.
    pub fn add_client(
        &mut self,
        name: &str,
        exact: bool,
        pid: u32,
    ) -> Result<(u32, String), WireError> {
        check_client_name(name)?;
        let mut actual = name.to_string();
        if self.client_by_name(&actual).is_some() {
            if exact {
                return Err(err(
                    ErrorCode::NameTaken,
                    format!("client name {name:?} is already in use"),
                ));
            }
            actual = (1..100)
                .map(|i| format!("{name}-{i:02}"))
                .find(|n| n.len() <= CLIENT_NAME_MAX && self.client_by_name(n).is_none())
                .ok_or_else(|| {
                    err(
                        ErrorCode::NameTaken,
                        format!("no free variant of client name {name:?}"),
                    )
                })?;
        }
        let slot = (1..self.caps.max_clients)
            .find(|&s| self.clients[s as usize].is_none())
            .ok_or_else(|| {
                err(
                    ErrorCode::Full,
                    format!("server is full: {} clients", self.caps.max_clients - 1),
                )
            })?;
        let uuid = self.uuid(CLIENT_UUID_TYPE);
        self.clients[slot as usize] = Some(Client {
            name: actual.clone(),
            pid,
            state: ClientState::Open,
            uuid,
        });
        self.bump();
        Ok((slot, actual))
    }

    /// Removes a client with its ports and their connections. Returns the
    /// removed connections and ports (with their former full names) for notifications.
    pub fn remove_client(&mut self, slot: u32) -> Result<Removed, WireError> {
        if slot == DRIVER || self.client(slot).is_none() {
            return Err(err(
                ErrorCode::NotAllowed,
                format!("no client in slot {slot}"),
            ));
        }
        let ports: Vec<u32> = self
            .ports()
            .filter(|(_, p)| p.owner == slot)
            .map(|(i, _)| i)
            .collect();
        let mut gone_conns = Vec::new();
        let mut gone_ports = Vec::new();
        for p in ports {
            let name = self.port_name(p).unwrap_or_default();
            gone_conns.extend(self.drop_connections_of(p));
            self.ports[p as usize] = None;
            gone_ports.push((p, name));
        }
        self.clients[slot as usize] = None;
        self.bump();
        Ok((gone_conns, gone_ports))
    }

    /// Sets a client's state.
    pub fn set_active(&mut self, slot: u32, active: bool) -> Result<(), WireError> {
        let c = self
            .clients
            .get_mut(slot as usize)
            .and_then(|c| c.as_mut())
            .filter(|_| slot != DRIVER)
            .ok_or_else(|| err(ErrorCode::NotAllowed, format!("no client in slot {slot}")))?;
        c.state = if active {
            ClientState::Active
        } else {
            ClientState::Open
        };
        self.bump();
        Ok(())
    }

    fn check_port_short(&self, owner: u32, short: &str) -> Result<(), WireError> {
        let cname = &self
            .client(owner)
            .ok_or_else(|| err(ErrorCode::NotAllowed, "no such client"))?
            .name;
        if short.is_empty() {
            return Err(err(ErrorCode::InvalidName, "port name is empty"));
        }
        if short.contains('\0') {
            return Err(err(ErrorCode::InvalidName, "port name contains NUL"));
        }
        let full = cname.len() + 1 + short.len();
        if full > PORT_NAME_MAX {
            return Err(err(
                ErrorCode::InvalidName,
                format!("full port name \"{cname}:{short}\" is {full} bytes; the limit is {PORT_NAME_MAX}"),
            ));
        }
        if self
            .ports()
            .any(|(_, p)| p.owner == owner && p.short == short)
        {
            return Err(err(
                ErrorCode::NameTaken,
                format!("port \"{cname}:{short}\" already exists"),
            ));
        }
        Ok(())
    }

    /// Registers a port for `owner`.
    pub fn register_port(
        &mut self,
        owner: u32,
        short: &str,
        type_name: &str,
        flags: u32,
    ) -> Result<u32, WireError> {
        self.check_port_short(owner, short)?;
        let ptype = port_type_of(type_name).ok_or_else(|| {
            err(
                ErrorCode::UnknownType,
                format!("unknown port type {type_name:?}"),
            )
        })?;
        let dir = flags & (port_flags::IS_INPUT | port_flags::IS_OUTPUT);
        if dir != port_flags::IS_INPUT && dir != port_flags::IS_OUTPUT {
            return Err(err(
                ErrorCode::InvalidName,
                "a port must be exactly one of input or output",
            ));
        }
        let slot = (0..self.caps.max_ports)
            .find(|&s| self.ports[s as usize].is_none())
            .ok_or_else(|| {
                err(
                    ErrorCode::Full,
                    format!("server is full: {} ports", self.caps.max_ports),
                )
            })?;
        let uuid = self.uuid(PORT_UUID_TYPE);
        self.ports[slot as usize] = Some(Port {
            owner,
            short: short.into(),
            flags,
            ptype,
            uuid,
            aliases: Vec::new(),
            latency: [0; 4],
            monitor: 0,
        });
        self.bump();
        Ok(slot)
    }

    /// Unregisters a port owned by `owner`; returns the connections removed.
    pub fn unregister_port(&mut self, owner: u32, port: u32) -> Result<Vec<Connection>, WireError> {
        self.owned(owner, port)?;
        let gone = self.drop_connections_of(port);
        self.ports[port as usize] = None;
        self.bump();
        Ok(gone)
    }

    /// Renames a port owned by `owner`.
    pub fn rename_port(&mut self, owner: u32, port: u32, short: &str) -> Result<(), WireError> {
        self.owned(owner, port)?;
        self.check_port_short(owner, short)?;
        if let Some(p) = self.ports[port as usize].as_mut() {
            p.short = short.into();
        }
        self.bump();
        Ok(())
    }

    /// Mutable access to a port (latency and monitor bookkeeping; names and
    /// connections change only through the checked methods).
    pub fn port_mut(&mut self, slot: u32) -> Option<&mut Port> {
        self.ports.get_mut(slot as usize)?.as_mut()
    }

    /// Marks the graph changed (after edits through [`Graph::port_mut`]).
    pub fn touch(&mut self) {
        self.bump();
    }

    /// Adds an alias to any port (at most two, as in JACK).
    pub fn set_alias(&mut self, port: u32, alias: &str) -> Result<(), WireError> {
        if alias.is_empty() || alias.len() > PORT_NAME_MAX || alias.contains('\0') {
            return Err(err(
                ErrorCode::InvalidName,
                format!("invalid port alias {alias:?} (1 to {PORT_NAME_MAX} bytes, no NUL)"),
            ));
        }
        let p = self
            .port_mut(port)
            .ok_or_else(|| err(ErrorCode::NoSuchPort, format!("no port with id {port}")))?;
        if p.aliases.iter().any(|a| a == alias) {
            return Ok(());
        }
        if p.aliases.len() >= 2 {
            return Err(err(
                ErrorCode::Full,
                format!("port {port} already has two aliases"),
            ));
        }
        p.aliases.push(alias.to_string());
        self.bump();
        Ok(())
    }

    /// Removes an alias of a port.
    pub fn unset_alias(&mut self, port: u32, alias: &str) -> Result<(), WireError> {
        let p = self
            .port_mut(port)
            .ok_or_else(|| err(ErrorCode::NoSuchPort, format!("no port with id {port}")))?;
        let Some(i) = p.aliases.iter().position(|a| a == alias) else {
            return Err(err(
                ErrorCode::NotFound,
                format!("port {port} has no alias {alias:?}"),
            ));
        };
        p.aliases.remove(i);
        self.bump();
        Ok(())
    }

    fn owned(&self, owner: u32, port: u32) -> Result<&Port, WireError> {
        match self.port(port) {
            Some(p) if p.owner == owner => Ok(p),
            Some(_) => Err(err(
                ErrorCode::NotAllowed,
                format!("port {port} belongs to another client"),
            )),
            None => Err(err(
                ErrorCode::NoSuchPort,
                format!("no port with id {port}"),
            )),
        }
    }

    fn drop_connections_of(&mut self, port: u32) -> Vec<Connection> {
        let (gone, keep): (Vec<_>, Vec<_>) = self
            .connections
            .iter()
            .partition(|c| c.src == port || c.dst == port);
        self.connections = keep;
        gone
    }

    fn resolve(&self, name: &str) -> Result<u32, WireError> {
        self.port_by_name(name)
            .ok_or_else(|| err(ErrorCode::NoSuchPort, format!("no port named {name:?}")))
    }

    /// Resolves and checks a connection request; JACK also accepts the pair
    /// in input→output order, so we normalise it.
    fn pair(&self, a: &str, b: &str) -> Result<Connection, WireError> {
        let (pa, pb) = (self.resolve(a)?, self.resolve(b)?);
        let (ia, ib) = (
            self.port(pa).map(Port::is_input),
            self.port(pb).map(Port::is_input),
        );
        let (src, dst) = match (ia, ib) {
            (Some(false), Some(true)) => (pa, pb),
            (Some(true), Some(false)) => (pb, pa),
            (Some(true), Some(true)) => {
                return Err(err(
                    ErrorCode::Incompatible,
                    format!("{a:?} and {b:?} are both inputs"),
                ))
            }
            _ => {
                return Err(err(
                    ErrorCode::Incompatible,
                    format!("{a:?} and {b:?} are both outputs"),
                ))
            }
        };
        let (ts, td) = (
            self.ports[src as usize].as_ref().unwrap().ptype,
            self.ports[dst as usize].as_ref().unwrap().ptype,
        );
        if ts != td {
            return Err(err(
                ErrorCode::Incompatible,
                format!(
                    "cannot connect {} port {a:?} to {} port {b:?}",
                    port_type_name(ts),
                    port_type_name(td)
                ),
            ));
        }
        Ok(Connection { src, dst })
    }

    /// Connects two ports by name.
    pub fn connect(&mut self, a: &str, b: &str) -> Result<Connection, WireError> {
        let c = self.pair(a, b)?;
        if self.connections.contains(&c) {
            return Err(err(
                ErrorCode::Exists,
                format!("{a:?} and {b:?} are already connected"),
            ));
        }
        if self.connections.len() >= self.caps.max_connections as usize {
            return Err(err(
                ErrorCode::Full,
                format!("server is full: {} connections", self.caps.max_connections),
            ));
        }
        self.connections.push(c);
        self.bump();
        Ok(c)
    }

    /// Disconnects two ports by name.
    pub fn disconnect(&mut self, a: &str, b: &str) -> Result<Connection, WireError> {
        let c = self.pair(a, b)?;
        let i = self
            .connections
            .iter()
            .position(|x| *x == c)
            .ok_or_else(|| {
                err(
                    ErrorCode::NotConnected,
                    format!("{a:?} and {b:?} are not connected"),
                )
            })?;
        self.connections.remove(i);
        self.bump();
        Ok(c)
    }

    /// Removes all connections of a port by name.
    pub fn disconnect_all(&mut self, name: &str) -> Result<Vec<Connection>, WireError> {
        let p = self.resolve(name)?;
        let gone = self.drop_connections_of(p);
        if !gone.is_empty() {
            self.bump();
        }
        Ok(gone)
    }

    /// Full names of the ports connected to `port`.
    pub fn connections_of(&self, port: u32) -> Vec<u32> {
        self.connections
            .iter()
            .filter_map(|c| {
                if c.src == port {
                    Some(c.dst)
                } else if c.dst == port {
                    Some(c.src)
                } else {
                    None
                }
            })
            .collect()
    }

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

#[cfg(test)]
mod tests;
