//! Connections: resolving port names, checking directions and types,
//! connecting and disconnecting.
//!
//! Threads: the server's control thread, under its state lock.

use crate::error::{err, GraphError, GraphErrorKind};
use crate::validate::port_type_name;
use crate::{Connection, Graph, Port};

impl Graph {
    fn resolve(&self, name: &str) -> Result<u32, GraphError> {
        self.port_by_name(name).ok_or_else(|| {
            err(
                GraphErrorKind::NoSuchPort,
                format!("no port named {name:?}"),
            )
        })
    }

    /// Resolves and checks a connection request; JACK also accepts the pair
    /// in input→output order, so we normalise it.
    fn pair(&self, a: &str, b: &str) -> Result<Connection, GraphError> {
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
                    GraphErrorKind::Incompatible,
                    format!("{a:?} and {b:?} are both inputs"),
                ))
            }
            _ => {
                return Err(err(
                    GraphErrorKind::Incompatible,
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
                GraphErrorKind::Incompatible,
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
    pub fn connect(&mut self, a: &str, b: &str) -> Result<Connection, GraphError> {
        let c = self.pair(a, b)?;
        if self.connections.contains(&c) {
            return Err(err(
                GraphErrorKind::Exists,
                format!("{a:?} and {b:?} are already connected"),
            ));
        }
        if self.connections.len() >= self.caps.max_connections as usize {
            return Err(err(
                GraphErrorKind::Full,
                format!("server is full: {} connections", self.caps.max_connections),
            ));
        }
        self.connections.push(c);
        self.bump();
        Ok(c)
    }

    /// Disconnects two ports by name.
    pub fn disconnect(&mut self, a: &str, b: &str) -> Result<Connection, GraphError> {
        let c = self.pair(a, b)?;
        let i = self
            .connections
            .iter()
            .position(|x| *x == c)
            .ok_or_else(|| {
                err(
                    GraphErrorKind::NotConnected,
                    format!("{a:?} and {b:?} are not connected"),
                )
            })?;
        self.connections.remove(i);
        self.bump();
        Ok(c)
    }

    /// Removes all connections of a port by name.
    pub fn disconnect_all(&mut self, name: &str) -> Result<Vec<Connection>, GraphError> {
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
}
