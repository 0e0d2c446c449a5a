//! The graph model: clients, ports, connections and the [`Graph`] that
//! holds them, with lookups by slot and by name. Edits live in
//! [`crate::edit`] and [`crate::connections`], checks in [`crate::validate`].
//!
//! Threads: the server's control thread, under its state lock.

use crate::CLIENT_UUID_TYPE;
use resound_shm::{port_flags, Capacities};

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
    /// [`resound_shm::port_type`] value.
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

/// The graph model.
#[derive(Debug, Clone)]
pub struct Graph {
    /// Capacities (fixed at server start).
    pub(crate) caps: Capacities,
    /// Clients by slot (slot 0 is the driver).
    pub(crate) clients: Vec<Option<Client>>,
    /// Ports by slot.
    pub(crate) ports: Vec<Option<Port>>,
    /// Connections in creation order.
    pub(crate) connections: Vec<Connection>,
    /// Graph version (+1 per change).
    pub(crate) version: u64,
    /// Next UUID counter (shared by clients and ports).
    pub(crate) next_uuid: u64,
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

    pub(crate) fn bump(&mut self) {
        self.version += 1;
    }

    /// A fresh UUID with the given type bits; the counter is shared, so no two
    /// clients or ports ever get the same one in one server's lifetime.
    pub(crate) fn uuid(&mut self, kind: u64) -> u64 {
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
}
