//! The graph read back from shared memory without a server round trip:
//! [`Snapshot`] (clients, ports, connections) and [`ClientSnap`] lists, each
//! read consistently from the current graph table. Non-real-time threads
//! (they allocate).

use resound_shm::limits::{AUDIO_TYPE, MIDI_TYPE};
use resound_shm::sync::switch;
use resound_shm::{self as shm, client_state, port_flags, View};

/// A port in a [`Snapshot`].
#[derive(Debug, Clone, PartialEq)]
pub struct PortSnap {
    /// Port id.
    pub id: u32,
    /// Full name.
    pub name: String,
    /// Owning client slot.
    pub owner: u32,
    /// JACK flags.
    pub flags: u32,
    /// Type name.
    pub type_name: &'static str,
    /// Aliases.
    pub aliases: Vec<String>,
    /// Connected ports (ids): for an input its sources, for an output its destinations.
    pub connections: Vec<u32>,
}

/// A consistent copy of the graph from shared memory.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Graph version.
    pub version: u64,
    /// Clients: (slot, name, active).
    pub clients: Vec<(u32, String, bool)>,
    /// Ports.
    pub ports: Vec<PortSnap>,
}

impl Snapshot {
    /// A port by full name or alias.
    pub fn port(&self, name: &str) -> Option<&PortSnap> {
        self.ports
            .iter()
            .find(|p| p.name == name || p.aliases.iter().any(|a| a == name))
    }

    /// A port by id.
    pub fn port_by_id(&self, id: u32) -> Option<&PortSnap> {
        self.ports.iter().find(|p| p.id == id)
    }
}

/// Reads a consistent snapshot of the current graph table.
pub fn snapshot(view: &View) -> Snapshot {
    switch::read_consistent(&view.header().switch, |idx| {
        let t = view.table(idx);
        let mut s = Snapshot {
            version: t.version(),
            ..Default::default()
        };
        for slot in 0..t.client_hw() {
            if let Some(c) = t.client(slot) {
                if c.state != client_state::FREE {
                    s.clients.push((
                        slot,
                        shm::get_name(&c.name),
                        c.state == client_state::ACTIVE,
                    ));
                }
            }
        }
        for id in 0..t.port_hw() {
            let Some(p) = t.port(id) else { continue };
            if p.state != 1 {
                continue;
            }
            let sources: Vec<u32> = (0..t.source_count(id))
                .filter_map(|i| t.source_at(id, i))
                .collect();
            s.ports.push(PortSnap {
                id,
                name: shm::get_name(&p.name),
                owner: p.owner,
                flags: p.flags,
                type_name: if p.ptype == shm::port_type::MIDI {
                    MIDI_TYPE
                } else {
                    AUDIO_TYPE
                },
                aliases: p
                    .aliases
                    .iter()
                    .map(|a| shm::get_name(a))
                    .filter(|a| !a.is_empty())
                    .collect(),
                connections: sources,
            });
        }
        // Outputs: their destinations are the inputs listing them as a source.
        let dests: Vec<(u32, u32)> = s
            .ports
            .iter()
            .flat_map(|p| p.connections.iter().map(move |&src| (src, p.id)))
            .collect();
        for p in s
            .ports
            .iter_mut()
            .filter(|p| p.flags & port_flags::IS_OUTPUT != 0)
        {
            p.connections = dests
                .iter()
                .filter(|(src, _)| *src == p.id)
                .map(|(_, d)| *d)
                .collect();
        }
        s
    })
}

/// A client in the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSnap {
    /// Slot.
    pub slot: u32,
    /// Name.
    pub name: String,
    /// Active (in the activation graph).
    pub active: bool,
    /// UUID.
    pub uuid: u64,
    /// Process id.
    pub pid: u32,
}

/// Every client of the current graph table, read consistently.
pub fn clients(view: &View) -> Vec<ClientSnap> {
    switch::read_consistent(&view.header().switch, |idx| {
        let t = view.table(idx);
        (0..t.client_hw())
            .filter_map(|slot| {
                let c = t.client(slot)?;
                (c.state != client_state::FREE).then(|| ClientSnap {
                    slot,
                    name: shm::get_name(&c.name),
                    active: c.state == client_state::ACTIVE,
                    uuid: c.uuid,
                    pid: c.pid,
                })
            })
            .collect()
    })
}
