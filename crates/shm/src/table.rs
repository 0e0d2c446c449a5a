//! The graph tables of the control segment: [`TableHeader`],
//! [`ClientEntry`], [`PortEntry`] and their value sets, the bounds-checked
//! [`Table`] reader (real-time threads of server and clients) and the
//! [`TableMut`] writer (the server's control thread, on the next table only,
//! see [`crate::sync::switch`]).
//!
//! Every field of the three structs has the same writer and readers: the
//! server's control thread writes a whole table (header, entries, arrays)
//! while it is the *next* table (between `switch::begin_write` and
//! `switch::end_write`), and never touches the current one; the driver
//! switches tables at a cycle start; readers (driver and client threads,
//! real-time; control sessions, not) read the current table through
//! [`Table`], which clamps every count and range to the capacities, so even
//! a table read while rewritten (a late reader) gives wrong numbers, never
//! an access outside the segment. The control segment is sealed: clients
//! cannot write tables.

use crate::Layout;

/// Header of one graph table (see the module docs for writer and readers).
#[repr(C)]
pub struct TableHeader {
    /// Graph version this table holds (server-side counter, +1 per change).
    /// Readers compare it to notice graph changes.
    pub version: u64,
    /// Client slots in use are all below this bound (clamped by readers to
    /// `max_clients`).
    pub client_hw: u32,
    /// Port slots in use are all below this bound (clamped to `max_ports`).
    pub port_hw: u32,
    /// Used length of `sources` (entries).
    pub n_sources: u32,
    /// Used length of `edges` (entries).
    pub n_edges: u32,
    /// Used length of `order` (entries; clamped to `max_clients`).
    pub n_order: u32,
    /// Padding.
    pub _pad: u32,
}

/// `ClientEntry::state` values.
pub mod client_state {
    /// Slot unused.
    pub const FREE: u32 = 0;
    /// Client open, not activated: its ports exist but it does not run.
    pub const OPEN: u32 = 1;
    /// Client active: part of the activation graph.
    pub const ACTIVE: u32 = 2;
}

/// One node (client or driver) in a graph table, at its slot index. Writer:
/// the server's control thread; readers: see the module docs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ClientEntry {
    /// [`client_state`] value.
    pub state: u32,
    /// Process id of the client (the server's own for the driver).
    pub pid: u32,
    /// Start of this node's range in `edges`: its upstream nodes, the
    /// nodes whose release it waits for (the driver, for a node fed by
    /// capture or by nobody; the clients feeding it over non-feedback
    /// connections; for the driver itself, the graph's ends). In entries;
    /// readers clamp (start, count) into `edges`.
    pub up_start: u32,
    /// Length of that range: ≥ 1 for an active client.
    pub up_count: u32,
    /// Position of the node in activation order (0 = driver).
    pub order: u32,
    /// Unique id of the client for its lifetime in this server (never reused).
    pub uuid: u64,
    /// NUL-terminated UTF-8 name (at most 63 bytes).
    pub name: [u8; 64],
}

/// `PortEntry::flags` bits: JACK's `JackPortFlags` values.
pub mod port_flags {
    /// JackPortIsInput.
    pub const IS_INPUT: u32 = 0x1;
    /// JackPortIsOutput.
    pub const IS_OUTPUT: u32 = 0x2;
    /// JackPortIsPhysical.
    pub const IS_PHYSICAL: u32 = 0x4;
    /// JackPortCanMonitor.
    pub const CAN_MONITOR: u32 = 0x8;
    /// JackPortIsTerminal.
    pub const IS_TERMINAL: u32 = 0x10;
}

/// `PortEntry::ptype` values.
pub mod port_type {
    /// 32-bit float mono audio.
    pub const AUDIO: u32 = 0;
    /// 8-bit raw MIDI (JACK event buffers).
    pub const MIDI: u32 = 1;
}

/// One port in a graph table, at its port slot index. Writer: the server's
/// control thread; readers: see the module docs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PortEntry {
    /// 0 unused, 1 in use.
    pub state: u32,
    /// Slot of the owning client (0: the driver, for `system:*` ports).
    pub owner: u32,
    /// [`port_flags`] bits.
    pub flags: u32,
    /// [`port_type`] value.
    pub ptype: u32,
    /// Input ports: start of the connected output ports in `sources`, in
    /// entries. Readers clamp (start, count) into `sources`.
    pub src_start: u32,
    /// Input ports: number of connected outputs.
    pub src_count: u32,
    /// Number of connections of this port (either direction).
    pub n_connections: u32,
    /// Monitoring requests (jack_port_request_monitor count).
    pub monitor: u32,
    /// Latency ranges in frames: capture min, capture max, playback min,
    /// playback max (JACK's latency callback figures, set by the owner via
    /// the server).
    pub latency: [u32; 4],
    /// Unique id of the port for its lifetime in this server.
    pub uuid: u64,
    /// NUL-terminated full name `client:port`.
    pub name: [u8; 320],
    /// Two NUL-terminated aliases (empty when unset).
    pub aliases: [[u8; 320]; 2],
}

/// Read access to one graph table. All reads are volatile copies of single
/// fields, bounds-checked, so a table being rewritten (a late or non-real-time
/// reader) yields wrong numbers at worst, never out-of-range access.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    /// Start of the table in the mapped control segment.
    pub(crate) base: *const u8,
    /// The layout the table was computed with.
    pub(crate) layout: &'a Layout,
    /// Ties the table's lifetime to the mapping.
    pub(crate) _v: std::marker::PhantomData<&'a crate::View>,
}

macro_rules! vread {
    ($p:expr) => {
        // SAFETY: callers pass pointers to fields inside the mapped table;
        // volatile because another process may rewrite them (seqlock readers).
        unsafe { std::ptr::read_volatile($p) }
    };
}

impl<'a> Table<'a> {
    fn header_ptr(&self) -> *const TableHeader {
        self.base as *const TableHeader
    }

    /// Graph version held by this table.
    /// Real-time safe.
    pub fn version(&self) -> u64 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).version))
    }

    /// Upper bound of used client slots (clamped to capacity).
    /// Real-time safe.
    #[inline]
    pub fn client_hw(&self) -> u32 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).client_hw)).min(self.layout.caps.max_clients)
    }

    /// Upper bound of used port slots (clamped to capacity).
    /// Real-time safe.
    #[inline]
    pub fn port_hw(&self) -> u32 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).port_hw)).min(self.layout.caps.max_ports)
    }

    /// Number of entries in the activation order (clamped).
    /// Real-time safe.
    pub fn order_len(&self) -> u32 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).n_order)).min(self.layout.caps.max_clients)
    }

    /// Node slot at position `i` of the activation order.
    /// Real-time safe.
    pub fn order_at(&self, i: u32) -> Option<u32> {
        if i >= self.order_len() {
            return None;
        }
        // SAFETY: i < max_clients, `order` has max_clients entries.
        Some(vread!(
            (self.base.add(self.layout.order_at) as *const u32).add(i as usize)
        ))
    }

    #[inline]
    fn client_ptr(&self, slot: u32) -> Option<*const ClientEntry> {
        if slot >= self.layout.caps.max_clients {
            return None;
        }
        // SAFETY: slot < max_clients keeps the pointer inside the client array.
        Some(unsafe {
            (self.base.add(self.layout.clients_at) as *const ClientEntry).add(slot as usize)
        })
    }

    #[inline]
    fn port_ptr(&self, port: u32) -> Option<*const PortEntry> {
        if port >= self.layout.caps.max_ports {
            return None;
        }
        // SAFETY: port < max_ports keeps the pointer inside the port array.
        Some(unsafe {
            (self.base.add(self.layout.ports_at) as *const PortEntry).add(port as usize)
        })
    }

    /// State of a client slot ([`client_state`]); FREE when out of range.
    /// Real-time safe.
    #[inline]
    pub fn client_state(&self, slot: u32) -> u32 {
        match self.client_ptr(slot) {
            Some(p) => vread!(std::ptr::addr_of!((*p).state)),
            None => client_state::FREE,
        }
    }

    /// Number of upstream nodes of a node (bounds-checked against the edge array).
    /// Real-time safe.
    #[inline]
    pub fn up_count(&self, slot: u32) -> u32 {
        self.up_range(slot).1
    }

    #[inline]
    fn up_range(&self, slot: u32) -> (u32, u32) {
        let Some(p) = self.client_ptr(slot) else {
            return (0, 0);
        };
        let start = vread!(std::ptr::addr_of!((*p).up_start));
        let count = vread!(std::ptr::addr_of!((*p).up_count));
        clamp_range(start, count, self.layout.max_edges)
    }

    /// The i-th upstream node of a node.
    /// Real-time safe.
    #[inline]
    pub fn up_at(&self, slot: u32, i: u32) -> Option<u32> {
        let (start, count) = self.up_range(slot);
        if i >= count {
            return None;
        }
        // SAFETY: start + i < max_edges by clamp_range.
        Some(vread!(
            (self.base.add(self.layout.edges_at) as *const u32).add((start + i) as usize)
        ))
    }

    /// The upstream nodes of a node, in table order (each as [`Self::up_at`]
    /// gives it). Real-time safe (no allocation).
    #[inline]
    pub fn ups(self, slot: u32) -> impl Iterator<Item = u32> + 'a {
        (0..self.up_count(slot)).filter_map(move |i| self.up_at(slot, i))
    }

    /// Uuid of the client in a slot (0 when out of range).
    /// Real-time safe.
    #[inline]
    pub fn client_uuid(&self, slot: u32) -> u64 {
        match self.client_ptr(slot) {
            Some(p) => vread!(std::ptr::addr_of!((*p).uuid)),
            None => 0,
        }
    }

    /// Copy of a client entry (non-real-time: 96 bytes).
    pub fn client(&self, slot: u32) -> Option<ClientEntry> {
        self.client_ptr(slot).map(|p| vread!(p))
    }

    /// Hot fields of a port: (state, owner, flags, ptype).
    /// Real-time safe.
    #[inline]
    pub fn port_info(&self, port: u32) -> Option<(u32, u32, u32, u32)> {
        let p = self.port_ptr(port)?;
        Some((
            vread!(std::ptr::addr_of!((*p).state)),
            vread!(std::ptr::addr_of!((*p).owner)),
            vread!(std::ptr::addr_of!((*p).flags)),
            vread!(std::ptr::addr_of!((*p).ptype)),
        ))
    }

    /// Number of sources of an input port (bounds-checked).
    /// Real-time safe.
    #[inline]
    pub fn source_count(&self, port: u32) -> u32 {
        self.src_range(port).1
    }

    #[inline]
    fn src_range(&self, port: u32) -> (u32, u32) {
        let Some(p) = self.port_ptr(port) else {
            return (0, 0);
        };
        let start = vread!(std::ptr::addr_of!((*p).src_start));
        let count = vread!(std::ptr::addr_of!((*p).src_count));
        clamp_range(start, count, self.layout.caps.max_connections as usize)
    }

    /// The i-th source (output port slot) of an input port.
    /// Real-time safe.
    #[inline]
    pub fn source_at(&self, port: u32, i: u32) -> Option<u32> {
        let (start, count) = self.src_range(port);
        if i >= count {
            return None;
        }
        // SAFETY: start + i < max_connections by clamp_range.
        Some(vread!((self.base.add(self.layout.sources_at)
            as *const u32)
            .add((start + i) as usize)))
    }

    /// Address of a port's NUL-terminated full-name field in this table (for
    /// C bindings, which hand out `const char *` names): stays mapped while
    /// the view lives; its bytes change if the port is renamed or its slot reused.
    /// Real-time safe.
    pub fn port_name_ptr(&self, port: u32) -> Option<*const u8> {
        let p = self.port_ptr(port)?;
        // SAFETY: a field address inside the in-range entry; nothing is read.
        Some(unsafe { std::ptr::addr_of!((*p).name) } as *const u8)
    }

    /// Hot fields of a port beyond [`Table::port_info`]: (uuid, connection count, monitor requests).
    /// Real-time safe.
    pub fn port_extra(&self, port: u32) -> Option<(u64, u32, u32)> {
        let p = self.port_ptr(port)?;
        Some((
            vread!(std::ptr::addr_of!((*p).uuid)),
            vread!(std::ptr::addr_of!((*p).n_connections)),
            vread!(std::ptr::addr_of!((*p).monitor)),
        ))
    }

    /// Latency ranges of a port: capture min/max, playback min/max.
    /// Real-time safe.
    pub fn port_latency(&self, port: u32) -> Option<[u32; 4]> {
        let p = self.port_ptr(port)?;
        Some(vread!(std::ptr::addr_of!((*p).latency)))
    }

    /// Copy of a port entry (non-real-time: about 1 KiB).
    pub fn port(&self, port: u32) -> Option<PortEntry> {
        self.port_ptr(port).map(|p| vread!(p))
    }
}

fn clamp_range(start: u32, count: u32, cap: usize) -> (u32, u32) {
    let s = (start as usize).min(cap);
    let c = (count as usize).min(cap - s);
    (s as u32, c as u32)
}

/// Write access to the next graph table (server control thread only).
pub struct TableMut<'a> {
    /// Start of the table in the mapped control segment.
    pub(crate) base: *mut u8,
    /// The layout the table was computed with.
    pub(crate) layout: &'a Layout,
    /// Ties the table's lifetime to the mapping.
    pub(crate) _v: std::marker::PhantomData<&'a crate::View>,
}

impl TableMut<'_> {
    /// Writes the table header.
    pub fn set_header(&mut self, h: TableHeader) {
        // SAFETY: exclusive writer of this table (contract of View::table_mut).
        unsafe { std::ptr::write_volatile(self.base as *mut TableHeader, h) }
    }

    /// Writes a client entry; panics on a slot out of range (server bug).
    pub fn set_client(&mut self, slot: u32, e: &ClientEntry) {
        assert!(slot < self.layout.caps.max_clients);
        // SAFETY: slot < max_clients (asserted) keeps the entry inside the
        // client array of this table; the caller of View::table_mut is the
        // only writer of this (next) table, and readers only copy it.
        unsafe {
            let p = (self.base.add(self.layout.clients_at) as *mut ClientEntry).add(slot as usize);
            std::ptr::write_volatile(p, *e);
        }
    }

    /// Writes a port entry; panics on a slot out of range (server bug).
    pub fn set_port(&mut self, port: u32, e: &PortEntry) {
        assert!(port < self.layout.caps.max_ports);
        // SAFETY: port < max_ports (asserted) keeps the entry inside the port
        // array of this table; the caller of View::table_mut is the only
        // writer of this (next) table, and readers only copy it.
        unsafe {
            let p = (self.base.add(self.layout.ports_at) as *mut PortEntry).add(port as usize);
            std::ptr::write_volatile(p, *e);
        }
    }

    /// Writes the `sources`, `edges` and `order` arrays; panics if over capacity (server bug).
    pub fn set_arrays(&mut self, sources: &[u32], edges: &[u32], order: &[u32]) {
        assert!(sources.len() <= self.layout.caps.max_connections as usize);
        assert!(edges.len() <= self.layout.max_edges);
        assert!(order.len() <= self.layout.caps.max_clients as usize);
        for (at, arr) in [
            (self.layout.sources_at, sources),
            (self.layout.edges_at, edges),
            (self.layout.order_at, order),
        ] {
            for (i, v) in arr.iter().enumerate() {
                // SAFETY: i < capacity of that array (asserted above); exclusive writer.
                unsafe { std::ptr::write_volatile((self.base.add(at) as *mut u32).add(i), *v) }
            }
        }
    }
}

/// Copies a name into a fixed NUL-terminated field (truncating; callers validate lengths first).
pub fn put_name<const N: usize>(dst: &mut [u8; N], s: &str) {
    *dst = [0; N];
    let n = s.len().min(N - 1);
    dst[..n].copy_from_slice(&s.as_bytes()[..n]);
}

/// Reads a NUL-terminated name field (lossy on invalid UTF-8).
pub fn get_name(src: &[u8]) -> String {
    let n = src.iter().position(|&b| b == 0).unwrap_or(src.len());
    String::from_utf8_lossy(&src[..n]).into_owned()
}

/// An empty client entry.
pub fn empty_client() -> ClientEntry {
    ClientEntry {
        state: 0,
        pid: 0,
        up_start: 0,
        up_count: 0,
        order: 0,
        uuid: 0,
        name: [0; 64],
    }
}

/// An empty port entry.
pub fn empty_port() -> PortEntry {
    PortEntry {
        state: 0,
        owner: 0,
        flags: 0,
        ptype: 0,
        src_start: 0,
        src_count: 0,
        n_connections: 0,
        monitor: 0,
        latency: [0; 4],
        uuid: 0,
        name: [0; 320],
        aliases: [[0; 320]; 2],
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::layout::test_caps as caps;
    use crate::View;

    #[test]
    fn garbage_ranges_are_clamped() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        let next = crate::sync::switch::begin_write(&v.header().switch);
        // SAFETY: single writer in this test, next table from begin_write.
        let mut t = unsafe { v.table_mut(next) };
        let mut e = empty_port();
        e.src_start = u32::MAX - 1;
        e.src_count = 1000;
        t.set_port(3, &e);
        let mut c = empty_client();
        c.up_start = 5;
        c.up_count = u32::MAX;
        t.set_client(2, &c);
        let r = v.table(next);
        assert_eq!(r.source_count(3), 0);
        assert!(r.source_at(3, 0).is_none());
        assert!(r.up_count(2) as usize <= v.layout().max_edges - 5);
        assert!(r.port_info(16).is_none());
        assert!(v.record(8).is_none());
        assert!(v.port_buffer(0, 16).is_none());
    }
}
