//! The [`Client`] requests that shape the graph: registering, renaming and
//! aliasing ports, disconnecting them, their latencies and monitoring,
//! freewheeling; and the graph read back from shared memory
//! ([`Client::snapshot`], [`Client::clients`]). Non-real-time threads only.

use crate::client::Client;
use crate::error::{unexpected, Result};
use crate::port::{Port, PortFlags, PortKind};
use crate::requests::Requests;
use crate::snapshot::{clients, snapshot, ClientSnap, Snapshot};
use resound_protocol::wire::{Reply, Request};

impl Client {
    /// Registers a port ("short" name; the full name is "client:short").
    pub fn register_port(&self, short: &str, kind: PortKind, flags: PortFlags) -> Result<Port> {
        self.register_port_raw(short, kind.type_name(), flags.0)
    }

    /// Registers a port of any type name (for bindings).
    pub fn register_port_raw(&self, short: &str, type_name: &str, flags: u32) -> Result<Port> {
        match self.call(Request::RegisterPort {
            name: short.into(),
            port_type: type_name.into(),
            flags,
        })? {
            Reply::Port { port, name } => {
                self.clear_own_buffer(port);
                Ok(Port::new(port, name, self.slot()))
            }
            other => Err(unexpected(other)),
        }
    }

    /// Zeroes a new port's buffer in this client's own node segment (a
    /// slot used by an earlier port of this client keeps its old samples
    /// otherwise; zero bytes also read as an empty MIDI buffer). Touching
    /// its pages here, off the real-time thread, also allocates them.
    fn clear_own_buffer(&self, port: u32) {
        let view = &self.inner.view;
        if let Some(b) = view.port_buffer(self.slot(), port) {
            // SAFETY: `b` is the buffer of port `port` (max_frames f32) in
            // this client's own node segment, mapped read-write in this
            // process; the port was just registered, so no connection reads
            // it yet and this client's process code has no handle on it.
            unsafe { std::ptr::write_bytes(b, 0, view.layout().caps.max_frames as usize) };
        }
    }

    /// Unregisters a port.
    pub fn unregister_port(&self, port: Port) -> Result<()> {
        self.ok(Request::UnregisterPort { port: port.id() })
    }

    /// Unregisters a port of this client by id (for bindings that keep ids, not [`Port`]s).
    pub fn unregister_port_id(&self, id: u32) -> Result<()> {
        self.ok(Request::UnregisterPort { port: id })
    }

    /// Loads one of the server's built-in in-process clients (JACK's internal
    /// clients), e.g. `load_internal("", "profiler", "-c -p -e")`. It stays
    /// loaded until [`Client::unload_internal`], whatever happens to this client.
    /// Removes every connection of a port.
    pub fn disconnect_all(&self, port: &str) -> Result<()> {
        self.ok(Request::DisconnectAll { port: port.into() })
    }

    /// Server status.
    /// A consistent snapshot of the graph read from shared memory (no server
    /// round trip), with every connection change the server has answered
    /// (see [`Client::settle`]).
    pub fn snapshot(&self) -> Snapshot {
        crate::client::settle(&self.inner.view);
        snapshot(&self.inner.view)
    }

    /// The same without waiting for a pending connection change: for
    /// lookups of names, ports and clients, which a connection change does
    /// not alter. Not real-time safe (it allocates).
    pub fn snapshot_now(&self) -> Snapshot {
        snapshot(&self.inner.view)
    }

    /// Every client of the graph, read from shared memory.
    pub fn clients(&self) -> Vec<ClientSnap> {
        crate::client::settle(&self.inner.view);
        clients(&self.inner.view)
    }

    /// Renames one of this client's ports (new short name).
    pub fn rename_port(&self, port: u32, short: &str) -> Result<()> {
        self.ok(Request::RenamePort {
            port,
            name: short.into(),
        })
    }

    /// Adds an alias to any port.
    pub fn set_port_alias(&self, port: u32, alias: &str) -> Result<()> {
        self.ok(Request::SetPortAlias {
            port,
            alias: alias.into(),
        })
    }

    /// Removes an alias of a port.
    pub fn unset_port_alias(&self, port: u32, alias: &str) -> Result<()> {
        self.ok(Request::UnsetPortAlias {
            port,
            alias: alias.into(),
        })
    }

    /// Sets the latency range (frames) of one of this client's ports;
    /// `playback` picks the playback range, else the capture range.
    pub fn set_latency_range(&self, port: u32, playback: bool, min: u32, max: u32) -> Result<()> {
        self.ok(Request::SetLatencyRange {
            port,
            mode: playback as u32,
            min,
            max,
        })
    }

    /// Whether this client sets its ports' latencies itself (in response to
    /// [`crate::Event::Latency`]); otherwise the server applies JACK's default rule.
    pub fn set_latency_callback(&self, on: bool) -> Result<()> {
        self.ok(Request::SetLatencyCallback { on })
    }

    /// Recomputes all latencies (and notifies clients with latency callbacks).
    pub fn recompute_latencies(&self) -> Result<()> {
        self.ok(Request::RecomputeLatencies)
    }

    /// Requests (or withdraws a request for) monitoring on a port.
    pub fn request_monitor(&self, port: u32, on: bool) -> Result<()> {
        self.ok(Request::RequestMonitor { port, on })
    }

    /// Turns monitoring of a port on if it is off, or off.
    pub fn ensure_monitor(&self, port: u32, on: bool) -> Result<()> {
        self.ok(Request::EnsureMonitor { port, on })
    }

    /// Starts or stops freewheeling (the server runs cycles as fast as the graph allows).
    pub fn set_freewheel(&self, on: bool) -> Result<()> {
        self.ok(Request::SetFreewheel { on })
    }
}
