//! The layout of the shared-memory segments: where everything lies,
//! computed the same way by the server and every client from four
//! capacities ([`Layout::new`]). The structs themselves live in
//! [`crate::header`], [`crate::table`] and [`crate::record`]; the memfd
//! mapping in [`crate::segment`]; bounds-checked access in [`crate::view`].
//! Runs on non-real-time threads (setup), the results are plain numbers.
//!
//! ## Segments
//!
//! A server owns the control segment and the driver's node segment and
//! passes both to every client over its socket (SCM_RIGHTS); each client
//! adds its own node segment, which the server passes on to the others.
//! Nothing is ever created in /dev/shm, so nothing leaks.
//!
//! ## The control segment (server writes, clients map read-only)
//!
//! Sealed with `F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW` after the
//! server mapped it, so a client *cannot* write it: whatever a client does,
//! the graph the server and the other clients read is the server's.
//!
//! ```text
//!   0                     ControlHeader (one page)
//!   table_offset[0]       graph table 0  ┐ current/next pair, switched by
//!   table_offset[1]       graph table 1  ┘ ControlHeader::switch (crate::sync::switch)
//!   silence_offset        max_frames zeroed f32 (the buffer of an unconnected input;
//!                         at least MIDI_BUFFER_BYTES, so it is also an empty MIDI buffer)
//! ```
//!
//! A graph table is a [`TableHeader`], then `max_clients` [`ClientEntry`],
//! `max_ports` [`PortEntry`], and three flat `u32` arrays addressed by
//! (start, count) ranges from the entries (CSR form): `sources` (per input
//! port, the output ports connected to it), `edges` (per node, the nodes it
//! waits for, its upstream nodes; node 0 is the driver) and `order` (the
//! activation order, for display).
//!
//! ## Node segments (each writable by its owner only)
//!
//! One memfd per node slot: slot 0's belongs to the driver (the server
//! creates it), a client's is created by its own client library, which maps
//! it read-write and then seals it (`F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK |
//! F_SEAL_GROW`) before it hands the descriptor to the server. The server
//! checks the seals and maps it read-only, and passes it on to the other
//! clients, which can only map it read-only too. So a client can write its
//! own activation record, mailbox and port buffers, and nothing of anybody
//! else's: whatever it scribbles reaches at most the clients its own
//! outputs feed, as a bad signal would.
//!
//! ```text
//!   0                     ActivationRecord (the owner's cycle stamps and done word)
//!   mailbox_offset        Mailbox: the owner's requests to the driver (transport
//!                         commands, relocation, slow-sync readiness, timebase
//!                         output), sanitised by the driver
//!   buffers_offset        port buffers: max_ports x buffer_stride bytes,
//!                         port i at buffers_offset + i * buffer_stride in the
//!                         segment of the port's owner (audio: max_frames f32;
//!                         MIDI: a crate::midi buffer). Only the owner's ports
//!                         are ever touched: the rest of the file stays a hole
//!                         and costs no memory.
//! ```
//!
//! The server and every reader sanitise what they read from a node segment
//! (times, status values) and never follow an index from one; indices come
//! from the read-only control segment, and even those are bounds-checked by
//! every reader ([`crate::View`]).

use crate::{ActivationRecord, ClientEntry, Mailbox, PortEntry, TableHeader};

/// `b"RESOUND\0"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"RESOUND\0");
/// Layout version; bumped on any change of the structs below.
pub const LAYOUT_VERSION: u32 = 12;
/// Bytes reserved for the control header (one page).
pub const HEADER_BYTES: usize = 4096;
/// Alignment of each port buffer (bytes).
pub const BUFFER_ALIGN: usize = 64;

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Mailbox>().is_multiple_of(64));
    assert!(std::mem::size_of::<crate::ControlHeader>() <= HEADER_BYTES);
    assert!(std::mem::size_of::<ActivationRecord>() == 128);
    assert!(std::mem::size_of::<ClientEntry>() == 96);
    assert!(std::mem::size_of::<TableHeader>() == 32);
};

/// Capacities from which both sides compute the same layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacities {
    /// Client slots including the driver's.
    pub max_clients: u32,
    /// Port slots.
    pub max_ports: u32,
    /// Connection capacity.
    pub max_connections: u32,
    /// Frames per port buffer.
    pub max_frames: u32,
}

/// Byte offsets of everything in the control segment and in a node segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The capacities this layout was computed from.
    pub caps: Capacities,
    /// Offsets of the two tables in the control segment.
    pub table_offset: [usize; 2],
    /// Bytes of one table.
    pub table_bytes: usize,
    /// Within a table: offset of the client array.
    pub clients_at: usize,
    /// Within a table: offset of the port array.
    pub ports_at: usize,
    /// Within a table: offset of `sources`.
    pub sources_at: usize,
    /// Within a table: offset of `edges`.
    pub edges_at: usize,
    /// Within a table: offset of `order`.
    pub order_at: usize,
    /// Capacity of `edges`.
    pub max_edges: usize,
    /// Offset of the silence buffer in the control segment.
    pub silence_offset: usize,
    /// Total bytes of the control segment.
    pub control_bytes: usize,
    /// Offset of the port buffers in a node segment.
    pub buffers_offset: usize,
    /// Bytes between two port buffers.
    pub buffer_stride: usize,
    /// Offset of the mailbox in a node segment.
    pub mailbox_offset: usize,
    /// Total bytes of a node segment.
    pub node_bytes: usize,
}

fn align_up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

impl Layout {
    /// Computes the layout; errors on capacities outside the hard limits.
    pub fn new(caps: Capacities) -> Result<Layout, String> {
        use crate::limits::*;
        if caps.max_clients < 2 || caps.max_clients > HARD_MAX_CLIENTS {
            return Err(format!("max clients must be 2..={HARD_MAX_CLIENTS}"));
        }
        if caps.max_ports < 1 || caps.max_ports > HARD_MAX_PORTS {
            return Err(format!("max ports must be 1..={HARD_MAX_PORTS}"));
        }
        if caps.max_connections < 1 || caps.max_connections > HARD_MAX_CONNECTIONS {
            return Err(format!(
                "max connections must be 1..={HARD_MAX_CONNECTIONS}"
            ));
        }
        if caps.max_frames < MIN_BUFFER_FRAMES || caps.max_frames > MAX_BUFFER_FRAMES {
            return Err(format!(
                "max frames must be {MIN_BUFFER_FRAMES}..={MAX_BUFFER_FRAMES}"
            ));
        }
        let mc = caps.max_clients as usize;
        let mp = caps.max_ports as usize;
        let mx = caps.max_connections as usize;
        let max_edges = mx + 2 * mc;
        let clients_at = align_up(std::mem::size_of::<TableHeader>(), 64);
        let ports_at = align_up(clients_at + mc * std::mem::size_of::<ClientEntry>(), 64);
        let sources_at = align_up(ports_at + mp * std::mem::size_of::<PortEntry>(), 64);
        let edges_at = align_up(sources_at + mx * 4, 64);
        let order_at = align_up(edges_at + max_edges * 4, 64);
        let table_bytes = align_up(order_at + mc * 4, 4096);
        let t0 = HEADER_BYTES;
        let t1 = t0 + table_bytes;
        let silence_offset = t1 + table_bytes;
        // Every port buffer (and the silence buffer) also holds a MIDI buffer.
        let port_bytes = (caps.max_frames as usize * 4).max(crate::midi::MIDI_BUFFER_BYTES);
        let control_bytes = align_up(silence_offset + port_bytes, 4096);
        let mailbox_offset = align_up(std::mem::size_of::<ActivationRecord>(), 64);
        let buffers_offset = align_up(mailbox_offset + std::mem::size_of::<Mailbox>(), 4096);
        let buffer_stride = align_up(port_bytes, BUFFER_ALIGN);
        let node_bytes = align_up(buffers_offset + mp * buffer_stride, 4096);
        Ok(Layout {
            caps,
            table_offset: [t0, t1],
            table_bytes,
            clients_at,
            ports_at,
            sources_at,
            edges_at,
            order_at,
            max_edges,
            silence_offset,
            control_bytes,
            buffers_offset,
            buffer_stride,
            mailbox_offset,
            node_bytes,
        })
    }
}

/// Small capacities for the crate's unit tests (8 clients, 16 ports, 32
/// connections, 256 frames).
#[cfg(all(test, not(loom)))]
pub(crate) fn test_caps() -> Capacities {
    Capacities {
        max_clients: 8,
        max_ports: 16,
        max_connections: 32,
        max_frames: 256,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    use super::test_caps as caps;

    #[test]
    fn layout_is_disjoint_and_in_bounds() {
        let l = Layout::new(caps()).unwrap();
        assert!(l.table_offset[0] >= HEADER_BYTES);
        assert!(l.table_offset[1] >= l.table_offset[0] + l.table_bytes);
        assert!(l.silence_offset >= l.table_offset[1] + l.table_bytes);
        assert!(l.control_bytes >= l.silence_offset + 256 * 4);
        assert!(l.order_at + 8 * 4 <= l.table_bytes);
        assert!(l.mailbox_offset >= 128);
        assert!(l.buffers_offset >= l.mailbox_offset + std::mem::size_of::<Mailbox>());
        assert_eq!(l.buffer_stride % BUFFER_ALIGN, 0);
        assert!(l.node_bytes >= l.buffers_offset + 16 * l.buffer_stride);
        assert!(Layout::new(Capacities {
            max_frames: 1,
            ..caps()
        })
        .is_err());
    }
}
