//! Edits of the model: adding and removing clients, (un)registering and
//! renaming ports, aliases, activation state.
//!
//! Threads: the server's control thread, under its state lock.

use crate::error::{err, GraphError, GraphErrorKind};
use crate::validate::{check_client_name, port_type_of};
use crate::{
    Client, ClientState, Connection, Graph, Port, Removed, CLIENT_UUID_TYPE, DRIVER, PORT_UUID_TYPE,
};
use resound_shm::limits::{CLIENT_NAME_MAX, PORT_NAME_MAX};
use resound_shm::port_flags;

impl Graph {
    /// Adds a client. Without `exact`, a taken name gets a "-NN" suffix as in JACK.
    pub fn add_client(
        &mut self,
        name: &str,
        exact: bool,
        pid: u32,
    ) -> Result<(u32, String), GraphError> {
        check_client_name(name)?;
        let mut actual = name.to_string();
        if self.client_by_name(&actual).is_some() {
            if exact {
                return Err(err(
                    GraphErrorKind::NameTaken,
                    format!("client name {name:?} is already in use"),
                ));
            }
            actual = (1..100)
                .map(|i| format!("{name}-{i:02}"))
                .find(|n| n.len() <= CLIENT_NAME_MAX && self.client_by_name(n).is_none())
                .ok_or_else(|| {
                    err(
                        GraphErrorKind::NameTaken,
                        format!("no free variant of client name {name:?}"),
                    )
                })?;
        }
        let slot = (1..self.caps.max_clients)
            .find(|&s| self.clients[s as usize].is_none())
            .ok_or_else(|| {
                err(
                    GraphErrorKind::Full,
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
    pub fn remove_client(&mut self, slot: u32) -> Result<Removed, GraphError> {
        if slot == DRIVER || self.client(slot).is_none() {
            return Err(err(
                GraphErrorKind::NotAllowed,
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
    pub fn set_active(&mut self, slot: u32, active: bool) -> Result<(), GraphError> {
        let c = self
            .clients
            .get_mut(slot as usize)
            .and_then(|c| c.as_mut())
            .filter(|_| slot != DRIVER)
            .ok_or_else(|| {
                err(
                    GraphErrorKind::NotAllowed,
                    format!("no client in slot {slot}"),
                )
            })?;
        c.state = if active {
            ClientState::Active
        } else {
            ClientState::Open
        };
        self.bump();
        Ok(())
    }
    /// Registers a port for `owner`.
    pub fn register_port(
        &mut self,
        owner: u32,
        short: &str,
        type_name: &str,
        flags: u32,
    ) -> Result<u32, GraphError> {
        self.check_port_short(owner, short)?;
        let ptype = port_type_of(type_name).ok_or_else(|| {
            err(
                GraphErrorKind::UnknownType,
                format!("unknown port type {type_name:?}"),
            )
        })?;
        let dir = flags & (port_flags::IS_INPUT | port_flags::IS_OUTPUT);
        if dir != port_flags::IS_INPUT && dir != port_flags::IS_OUTPUT {
            return Err(err(
                GraphErrorKind::InvalidName,
                "a port must be exactly one of input or output",
            ));
        }
        let slot = (0..self.caps.max_ports)
            .find(|&s| self.ports[s as usize].is_none())
            .ok_or_else(|| {
                err(
                    GraphErrorKind::Full,
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
    pub fn unregister_port(
        &mut self,
        owner: u32,
        port: u32,
    ) -> Result<Vec<Connection>, GraphError> {
        self.owned(owner, port)?;
        let gone = self.drop_connections_of(port);
        self.ports[port as usize] = None;
        self.bump();
        Ok(gone)
    }

    /// Renames a port owned by `owner`.
    pub fn rename_port(&mut self, owner: u32, port: u32, short: &str) -> Result<(), GraphError> {
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
    pub fn set_alias(&mut self, port: u32, alias: &str) -> Result<(), GraphError> {
        if alias.is_empty() || alias.len() > PORT_NAME_MAX || alias.contains('\0') {
            return Err(err(
                GraphErrorKind::InvalidName,
                format!("invalid port alias {alias:?} (1 to {PORT_NAME_MAX} bytes, no NUL)"),
            ));
        }
        let p = self.port_mut(port).ok_or_else(|| {
            err(
                GraphErrorKind::NoSuchPort,
                format!("no port with id {port}"),
            )
        })?;
        if p.aliases.iter().any(|a| a == alias) {
            return Ok(());
        }
        if p.aliases.len() >= 2 {
            return Err(err(
                GraphErrorKind::Full,
                format!("port {port} already has two aliases"),
            ));
        }
        p.aliases.push(alias.to_string());
        self.bump();
        Ok(())
    }

    /// Removes an alias of a port.
    pub fn unset_alias(&mut self, port: u32, alias: &str) -> Result<(), GraphError> {
        let p = self.port_mut(port).ok_or_else(|| {
            err(
                GraphErrorKind::NoSuchPort,
                format!("no port with id {port}"),
            )
        })?;
        let Some(i) = p.aliases.iter().position(|a| a == alias) else {
            return Err(err(
                GraphErrorKind::NotFound,
                format!("port {port} has no alias {alias:?}"),
            ));
        };
        p.aliases.remove(i);
        self.bump();
        Ok(())
    }

    pub(crate) fn owned(&self, owner: u32, port: u32) -> Result<&Port, GraphError> {
        match self.port(port) {
            Some(p) if p.owner == owner => Ok(p),
            Some(_) => Err(err(
                GraphErrorKind::NotAllowed,
                format!("port {port} belongs to another client"),
            )),
            None => Err(err(
                GraphErrorKind::NoSuchPort,
                format!("no port with id {port}"),
            )),
        }
    }

    pub(crate) fn drop_connections_of(&mut self, port: u32) -> Vec<Connection> {
        let (gone, keep): (Vec<_>, Vec<_>) = self
            .connections
            .iter()
            .partition(|c| c.src == port || c.dst == port);
        self.connections = keep;
        gone
    }
}
