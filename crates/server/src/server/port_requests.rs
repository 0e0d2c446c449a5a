//! Port requests: registering, unregistering and renaming ports, aliases,
//! latency ranges and monitor requests.
//!
//! Threads: session threads, under the state lock.

use super::dispatch::{graph_error, need_client, werr};
use super::{Server, State};
use resound_protocol::wire::{ErrorCode, Notification, Reply, Request, WireError};
use resound_shm::port_flags;

impl Server {
    /// Handles one port request.
    pub(super) fn port_request(
        &self,
        st: &mut State,
        slot: Option<u32>,
        req: Request,
    ) -> Result<Reply, WireError> {
        match req {
            Request::RegisterPort {
                name,
                port_type,
                flags,
            } => self.register_port(st, need_client(slot)?, &name, &port_type, flags),
            Request::UnregisterPort { port } => self.unregister_port(st, need_client(slot)?, port),
            Request::RenamePort { port, name } => {
                let me = need_client(slot)?;
                let old = st.graph.port_name(port).unwrap_or_default();
                st.graph.rename_port(me, port, &name).map_err(graph_error)?;
                self.publish(st);
                let new = st.graph.port_name(port).unwrap_or_default();
                Self::notify(st, Notification::PortRename { port, old, new });
                Ok(Reply::Ok)
            }
            Request::SetPortAlias { port, alias } => {
                st.graph.set_alias(port, &alias).map_err(graph_error)?;
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::UnsetPortAlias { port, alias } => {
                st.graph.unset_alias(port, &alias).map_err(graph_error)?;
                self.publish(st);
                Ok(Reply::Ok)
            }
            Request::SetLatencyRange {
                port,
                mode,
                min,
                max,
            } => self.set_latency_range(st, need_client(slot)?, port, mode, [min, max]),
            Request::RequestMonitor { port, on } => self.monitor(st, port, on, false),
            Request::EnsureMonitor { port, on } => self.monitor(st, port, on, true),
            other => Err(werr(
                ErrorCode::Protocol,
                format!("unexpected request {other:?}"),
            )),
        }
    }

    /// Registers a port for client `me` (its buffer is in the client's own
    /// node segment, which only the client writes: the client library
    /// clears it).
    fn register_port(
        &self,
        st: &mut State,
        me: u32,
        name: &str,
        port_type: &str,
        flags: u32,
    ) -> Result<Reply, WireError> {
        let flags = flags & !(port_flags::IS_PHYSICAL);
        let p = st
            .graph
            .register_port(me, name, port_type, flags)
            .map_err(graph_error)?;
        self.publish(st);
        let full = st.graph.port_name(p).unwrap_or_default();
        // As jackd: a port is announced when its client is active (here, or
        // when it activates; see `announce_ports`).
        if Self::is_active(st, me) {
            Self::notify(
                st,
                Notification::PortRegistration {
                    port: p,
                    name: full.clone(),
                    registered: true,
                },
            );
        }
        Ok(Reply::Port {
            port: p,
            name: full,
        })
    }

    /// Unregisters port `port` of client `me`, with its connections and properties.
    fn unregister_port(&self, st: &mut State, me: u32, port: u32) -> Result<Reply, WireError> {
        let name = st.graph.port_name(port).unwrap_or_default();
        let uuid = st.graph.port(port).map(|p| p.uuid);
        let conns = st.graph.unregister_port(me, port).map_err(graph_error)?;
        if let Some(u) = uuid {
            Self::forget_subject(st, u);
        }
        self.publish(st);
        Self::tell_disconnected(st, &conns);
        // Withdrawn only if it was announced (its client is active).
        if Self::is_active(st, me) {
            Self::notify(
                st,
                Notification::PortRegistration {
                    port,
                    name,
                    registered: false,
                },
            );
        }
        Ok(Reply::Ok)
    }

    /// Sets the capture (`mode` 0) or playback (1) latency range of an own port.
    fn set_latency_range(
        &self,
        st: &mut State,
        me: u32,
        port: u32,
        mode: u32,
        [min, max]: [u32; 2],
    ) -> Result<Reply, WireError> {
        Self::own_port(st, me, port)?;
        if mode > 1 || min > max {
            return Err(werr(
                ErrorCode::NotAllowed,
                format!("invalid latency range mode {mode} [{min}, {max}]"),
            ));
        }
        if let Some(p) = st.graph.port_mut(port) {
            let i = mode as usize * 2;
            p.latency[i] = min;
            p.latency[i + 1] = max;
        }
        st.graph.touch();
        self.publish(st);
        Ok(Reply::Ok)
    }

    /// Counts a monitor request (`ensure`: sets it on or off instead).
    fn monitor(
        &self,
        st: &mut State,
        port: u32,
        on: bool,
        ensure: bool,
    ) -> Result<Reply, WireError> {
        let p = st
            .graph
            .port_mut(port)
            .ok_or_else(|| werr(ErrorCode::NoSuchPort, format!("no port with id {port}")))?;
        p.monitor = match (ensure, on) {
            (false, true) => p.monitor.saturating_add(1),
            (false, false) => p.monitor.saturating_sub(1),
            (true, true) => p.monitor.max(1),
            (true, false) => 0,
        };
        st.graph.touch();
        self.publish(st);
        Ok(Reply::Ok)
    }

    /// Refuses unless `port` exists and belongs to client `me`.
    fn own_port(st: &State, me: u32, port: u32) -> Result<(), WireError> {
        match st.graph.port(port) {
            Some(p) if p.owner == me => Ok(()),
            Some(_) => Err(werr(
                ErrorCode::NotAllowed,
                format!("port {port} belongs to another client"),
            )),
            None => Err(werr(
                ErrorCode::NoSuchPort,
                format!("no port with id {port}"),
            )),
        }
    }
}
