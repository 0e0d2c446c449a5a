//! [`View`]: the control segment and every node segment of one server
//! mapped in this process, with bounds-checked accessors for everything in
//! them. Created on a non-real-time thread; node segments are added and
//! retired on non-real-time threads (a client's reader thread, the server's
//! session threads); every accessor is real-time safe.

use crate::sync::{AtomicU64, Ordering};
use crate::{
    ActivationRecord, Capacities, ControlHeader, Layout, Mailbox, Segment, Table, TableMut, Timer,
    HEADER_BYTES, LAYOUT_VERSION, MAGIC,
};
use rustix::fd::OwnedFd;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::AtomicPtr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a node segment that left stays reachable, then mapped: its
/// address is published for this long after its client left (so the
/// driver still reads a request the client posted just before it closed,
/// as `jack_transport` does), then cleared, and the mapping is dropped
/// after this long again (a real-time thread that read the address just
/// before may still be reading it: a late thread, a few periods at most).
pub const RETIRE_AFTER: Duration = Duration::from_secs(2);

/// A node segment that left: since when, its slot, whether its address has
/// been cleared (or replaced) yet.
struct Retired {
    since: Instant,
    slot: usize,
    seg: Arc<Segment>,
    cleared: bool,
}

/// The node segments behind [`View`]'s per-slot addresses: the live one of
/// each slot with its client's uuid, and those that left (see
/// [`RETIRE_AFTER`]).
struct Nodes {
    live: Vec<Option<(u64, Arc<Segment>)>>,
    retired: VecDeque<Retired>,
}

/// Bounds-checked access to the control segment and the node segments.
/// Every accessor is real-time safe.
pub struct View {
    ctl: Segment,
    layout: Layout,
    /// Base address of each slot's node segment (null: none mapped here).
    /// Writers: [`View::install_node`] / [`View::retire_node`] under
    /// `nodes`' lock (release). Readers: every accessor (acquire).
    bases: Box<[AtomicPtr<u8>]>,
    /// Per slot, how many node segments were installed there (a new one
    /// is a new client's). Writer: [`View::install_node`]. Readers: the
    /// driver's transport (whose request words to start afresh).
    installs: Box<[AtomicU64]>,
    /// The segments those addresses point into (non-real-time side only).
    nodes: Mutex<Nodes>,
}

impl View {
    fn with_control(ctl: Segment, layout: Layout) -> View {
        let mc = layout.caps.max_clients as usize;
        View {
            ctl,
            layout,
            bases: (0..mc)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            installs: (0..mc).map(|_| AtomicU64::new(0)).collect(),
            nodes: Mutex::new(Nodes {
                live: vec![None; mc],
                retired: VecDeque::new(),
            }),
        }
    }

    /// Server side: creates the control segment and the driver's node
    /// segment (slot 0) for `caps`, initialises the header.
    pub fn create(
        caps: Capacities,
        sample_rate: u32,
        frames: u32,
        sync: bool,
        prio: i32,
    ) -> io::Result<View> {
        let layout = Layout::new(caps).map_err(io::Error::other)?;
        let ctl = Segment::create("resound-control", layout.control_bytes)?;
        let driver = Segment::create("resound-driver", layout.node_bytes)?;
        let v = View::with_control(ctl, layout);
        v.install_node(0, 0, driver);
        // SAFETY: the header page is inside the fresh zeroed control segment,
        // which nobody else maps yet; ControlHeader is valid when zeroed.
        let h = unsafe { &mut *(v.ctl.base() as *mut ControlHeader) };
        h.magic = MAGIC;
        h.version = LAYOUT_VERSION;
        h.header_size = std::mem::size_of::<ControlHeader>() as u32;
        h.max_clients = caps.max_clients;
        h.max_ports = caps.max_ports;
        h.max_connections = caps.max_connections;
        h.max_frames = caps.max_frames;
        h.sample_rate.store(sample_rate, Ordering::Relaxed);
        h.buffer_frames.store(frames, Ordering::Relaxed);
        h.sync_mode = sync as u32;
        h.client_priority = prio;
        h.running.store(1, Ordering::Relaxed);
        h.period_ns.store(
            crate::time::frames_to_ns(frames as u64, sample_rate),
            Ordering::Relaxed,
        );
        h.sync_timeout_us.store(2_000_000, Ordering::Relaxed);
        h.transport.publish(&crate::transport::Transport {
            pos: crate::transport::Position {
                frame_rate: sample_rate,
                ..Default::default()
            },
            ..Default::default()
        });
        Ok(v)
    }

    /// Client side: maps the control segment and the driver's node segment
    /// received from the server, and validates them.
    pub fn open(ctl_fd: OwnedFd, driver_fd: OwnedFd) -> io::Result<View> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let st = rustix::fs::fstat(&ctl_fd)?;
        if (st.st_size as usize) < HEADER_BYTES {
            return Err(bad("control segment smaller than its header".into()));
        }
        let ctl = Segment::map(ctl_fd, st.st_size as usize, false)?;
        // SAFETY: the segment is at least HEADER_BYTES long and page aligned;
        // ControlHeader has no invalid bit patterns (integers and atomics).
        let h = unsafe { &*(ctl.base() as *const ControlHeader) };
        if h.magic != MAGIC
            || h.version != LAYOUT_VERSION
            || h.header_size as usize != std::mem::size_of::<ControlHeader>()
        {
            return Err(bad(format!(
                "server speaks shared-memory layout {} (ours is {LAYOUT_VERSION}); rebuild client and server together",
                h.version
            )));
        }
        let caps = Capacities {
            max_clients: h.max_clients,
            max_ports: h.max_ports,
            max_connections: h.max_connections,
            max_frames: h.max_frames,
        };
        let layout = Layout::new(caps).map_err(bad)?;
        if layout.control_bytes != ctl.len() {
            return Err(bad("control segment size does not match its header".into()));
        }
        let driver = Segment::map_sealed(driver_fd, layout.node_bytes)?;
        let v = View::with_control(ctl, layout);
        v.install_node(0, 0, driver);
        Ok(v)
    }

    /// A fresh node segment for this process to own (a client's own, or an
    /// in-server client's): created read-write, mapped here, then sealed so
    /// that nobody else can ever map it writable. Hand its descriptor to the
    /// server; install it with [`View::install_node`].
    pub fn create_node(&self) -> io::Result<Segment> {
        let seg = Segment::create("resound-node", self.layout.node_bytes)?;
        seg.seal(true)?;
        Ok(seg)
    }

    /// For a process that plays the clients of `slots` itself (engine
    /// tests, fuzz targets, benches): a fresh node segment of its own for
    /// each, installed with the slot number as uuid. Non-real-time.
    pub fn own_nodes(&self, slots: std::ops::Range<u32>) -> io::Result<()> {
        for slot in slots {
            if !self.install_node(slot, slot as u64, self.create_node()?) {
                return Err(io::Error::other(format!("slot {slot} out of range")));
            }
        }
        Ok(())
    }

    /// Maps a node segment received from elsewhere (read-only, seals
    /// checked, see [`Segment::map_sealed`]).
    pub fn map_node(&self, fd: OwnedFd) -> io::Result<Segment> {
        Segment::map_sealed(fd, self.layout.node_bytes)
    }

    /// Makes `seg` the node segment of `slot`, for the client `uuid` (0:
    /// the driver). The one it replaces, if any, is retired. Refused when
    /// `slot` is out of range or `seg` is already another slot's segment
    /// (the same memfd passed off as a second client's). Non-real-time.
    pub fn install_node(&self, slot: u32, uuid: u64, seg: Segment) -> bool {
        let Some(base) = self.bases.get(slot as usize) else {
            return false;
        };
        let mut n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(id) = seg.identity() {
            let taken = n.live.iter().enumerate().any(|(s, e)| {
                s != slot as usize
                    && e.as_ref()
                        .is_some_and(|(_, o)| o.identity().is_ok_and(|i| i == id))
            });
            if taken {
                return false;
            }
        }
        let seg = Arc::new(seg);
        self.installs[slot as usize].fetch_add(1, Ordering::AcqRel);
        base.store(seg.base(), Ordering::Release);
        let since = Instant::now();
        if let Some((_, old)) = n.live[slot as usize].replace((uuid, seg)) {
            n.retired.push_back(Retired {
                since,
                slot: slot as usize,
                seg: old,
                cleared: true,
            });
        }
        for r in n.retired.iter_mut().filter(|r| r.slot == slot as usize) {
            // Its address was just replaced.
            if !r.cleared {
                (r.since, r.cleared) = (since, true);
            }
        }
        self.purge(&mut n);
        true
    }

    /// The node segment of `slot` goes away if it still belongs to client
    /// `uuid`: it is no longer passed on, its address stays published for
    /// [`RETIRE_AFTER`] (or until a new client takes the slot), its
    /// mapping for [`RETIRE_AFTER`] more ([`View::purge_retired`]).
    /// Non-real-time.
    pub fn retire_node(&self, slot: u32, uuid: u64) {
        let mut n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = n.live.get_mut(slot as usize) else {
            return;
        };
        if !matches!(entry, Some((u, _)) if *u == uuid) {
            return;
        }
        if let Some((_, seg)) = entry.take() {
            n.retired.push_back(Retired {
                since: Instant::now(),
                slot: slot as usize,
                seg,
                cleared: false,
            });
        }
        self.purge(&mut n);
    }

    /// Moves the retired segments on (see [`RETIRE_AFTER`]): clears the
    /// addresses of those that left long enough ago, unmaps those cleared
    /// long enough ago. Call it now and then (the server's housekeeping,
    /// a client's reader); installing and retiring call it too.
    /// Non-real-time.
    pub fn purge_retired(&self) {
        self.purge(&mut self.nodes.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn purge(&self, n: &mut Nodes) {
        for r in n.retired.iter_mut() {
            if !r.cleared && r.since.elapsed() >= RETIRE_AFTER {
                let base = &self.bases[r.slot];
                // Only if the slot still shows this segment.
                let _ = base.compare_exchange(
                    r.seg.base(),
                    std::ptr::null_mut(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                (r.since, r.cleared) = (Instant::now(), true);
            }
        }
        n.retired
            .retain(|r| !(r.cleared && r.since.elapsed() >= RETIRE_AFTER));
    }

    /// The node segment of `slot` if it belongs to client `uuid` (0: the
    /// driver's), to pass its descriptor on. Non-real-time.
    pub fn node(&self, slot: u32, uuid: u64) -> Option<Arc<Segment>> {
        let n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        match n.live.get(slot as usize)? {
            Some((u, seg)) if *u == uuid => Some(seg.clone()),
            _ => None,
        }
    }

    /// The slots with a node segment mapped here, with their uuids.
    /// Non-real-time.
    pub fn nodes(&self) -> Vec<(u32, u64)> {
        let n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        n.live
            .iter()
            .enumerate()
            .filter_map(|(s, e)| e.as_ref().map(|(u, _)| (s as u32, *u)))
            .collect()
    }

    /// Node segments mapped here, retired ones included (status figures).
    /// Non-real-time.
    pub fn mapped_nodes(&self) -> usize {
        let n = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        n.live.iter().flatten().count() + n.retired.len()
    }

    /// How many node segments have been installed in `slot` (a change
    /// means a new client's). Real-time safe.
    #[inline]
    pub fn node_installs(&self, slot: u32) -> u64 {
        self.installs
            .get(slot as usize)
            .map_or(0, |n| n.load(Ordering::Acquire))
    }

    /// Base address of `slot`'s node segment, None when out of range or
    /// none is mapped. Real-time safe.
    #[inline]
    fn node_base(&self, slot: u32) -> Option<*mut u8> {
        let p = self.bases.get(slot as usize)?.load(Ordering::Acquire);
        (!p.is_null()).then_some(p)
    }

    /// The layout.
    /// Real-time safe.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The control segment (server: to send its descriptor).
    pub fn control(&self) -> &Segment {
        &self.ctl
    }

    /// The control header.
    /// Real-time safe.
    #[inline]
    pub fn header(&self) -> &ControlHeader {
        // SAFETY: validated at creation/open; lives as long as self.
        unsafe { &*(self.ctl.base() as *const ControlHeader) }
    }

    /// Activation record of a node slot, None when out of range or its
    /// node segment is not mapped here. Real-time safe.
    #[inline]
    pub fn record(&self, slot: u32) -> Option<&ActivationRecord> {
        let base = self.node_base(slot)?;
        // SAFETY: the record lies at offset 0 of a node segment of
        // node_bytes ≥ 128 bytes, mapped for as long as the address is
        // published and RETIRE_AFTER beyond; ActivationRecord is all
        // atomics: any bit pattern is valid.
        Some(unsafe { &*(base as *const ActivationRecord) })
    }

    /// Mailbox of a node slot, None when out of range or not mapped.
    /// Real-time safe.
    #[inline]
    pub fn mailbox(&self, slot: u32) -> Option<&Mailbox> {
        let base = self.node_base(slot)?;
        // SAFETY: the mailbox lies at mailbox_offset inside the node
        // segment (node_bytes by construction of the layout), 64-byte
        // aligned; Mailbox is all atomics: any bit pattern is valid.
        Some(unsafe { &*(base.add(self.layout.mailbox_offset) as *const Mailbox) })
    }

    /// Whether `slot` is flagged as a slow-sync client.
    /// Real-time safe.
    #[inline]
    pub fn is_sync_client(&self, slot: u32) -> bool {
        let w = (slot / 64) as usize;
        w < 16 && self.header().sync_clients[w].load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    /// Pointer to the buffer of port slot `port` owned by the client in
    /// slot `owner` (max_frames f32, in that client's node segment), None
    /// when out of range or that segment is not mapped here. Writable only
    /// through the owner's own mapping. Real-time safe.
    #[inline]
    pub fn port_buffer(&self, owner: u32, port: u32) -> Option<*mut f32> {
        if port >= self.layout.caps.max_ports {
            return None;
        }
        let base = self.node_base(owner)?;
        let off = self.layout.buffers_offset + port as usize * self.layout.buffer_stride;
        // SAFETY: off + stride ≤ node_bytes by construction of the layout.
        Some(unsafe { base.add(off) } as *mut f32)
    }

    /// The buffer of port `port`, in the node segment of its owner as
    /// `table` says. Real-time safe.
    #[inline]
    pub fn port_buffer_in(&self, table: &Table<'_>, port: u32) -> Option<*mut f32> {
        let (_, owner, _, _) = table.port_info(port)?;
        self.port_buffer(owner, port)
    }

    /// The zeroed buffer of unconnected inputs (max_frames f32, read-only).
    /// Real-time safe.
    #[inline]
    pub fn silence(&self) -> *const f32 {
        // SAFETY: silence_offset + max_frames*4 ≤ control_bytes by construction.
        unsafe { self.ctl.base().add(self.layout.silence_offset) as *const f32 }
    }

    /// The graph table at index 0 or 1.
    /// Real-time safe.
    #[inline]
    pub fn table(&self, index: usize) -> Table<'_> {
        let off = self.layout.table_offset[index & 1];
        // SAFETY: the table lies within the control segment by construction.
        Table {
            base: unsafe { self.ctl.base().add(off) },
            layout: &self.layout,
            _v: std::marker::PhantomData,
        }
    }

    /// Index of the current table.
    /// Real-time safe.
    #[inline]
    pub fn current_index(&self) -> usize {
        crate::sync::switch::cur(self.header().switch.load(Ordering::Acquire))
    }

    /// Writable access to a table (server only: the control segment is read-only
    /// for clients, so this would fault there).
    ///
    /// # Safety
    /// The caller must be the single graph writer and `index` must be the
    /// next table obtained from `switch::begin_write`.
    pub unsafe fn table_mut(&self, index: usize) -> TableMut<'_> {
        let off = self.layout.table_offset[index & 1];
        // SAFETY: in range by construction; exclusivity is the caller's contract.
        TableMut {
            base: unsafe { self.ctl.base().add(off) },
            layout: &self.layout,
            _v: std::marker::PhantomData,
        }
    }

    /// The timer fields of the current cycle (see
    /// [`ControlHeader::try_timer`]). The driver holds the sequence odd for
    /// a few stores; only a server killed in the middle of them leaves it
    /// odd. Bounded ([`crate::TIMER_TRIES`]), so a reader, a real-time
    /// thread among them, never spins forever on a dead server: it then gets
    /// the fields as they are. Real-time safe.
    pub fn timer(&self) -> Timer {
        let h = self.header();
        h.try_timer(crate::TIMER_TRIES)
            .unwrap_or_else(|| h.timer_fields())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    use crate::layout::test_caps as caps;

    #[test]
    fn sealed_segments_cannot_be_mapped_writable() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        v.control().seal(true).unwrap();
        let driver = v.node(0, 0).unwrap();
        driver.seal(true).unwrap();
        let dup = |s: &Segment| rustix::io::fcntl_dupfd_cloexec(s.fd(), 0).unwrap();
        // A client trying to get write access to the control segment fails...
        assert!(Segment::map(dup(v.control()), v.layout().control_bytes, true).is_err());
        // ...or to the driver's node segment, which it cannot shrink either.
        assert!(Segment::map(dup(&driver), v.layout().node_bytes, true).is_err());
        assert!(rustix::fs::ftruncate(dup(&driver), 0).is_err());
        let c = View::open(dup(v.control()), dup(&driver)).unwrap();
        assert_eq!(c.header().sample_rate.load(Ordering::Relaxed), 48000);
        assert_eq!(c.layout(), v.layout());
        // Writes through the server's mapping are visible to the client's.
        v.header().cycle.store(42, Ordering::Relaxed);
        assert_eq!(c.header().cycle.load(Ordering::Relaxed), 42);
        v.record(0).unwrap().done.store(7, Ordering::Relaxed);
        assert_eq!(c.record(0).unwrap().done.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn a_client_node_is_writable_by_its_owner_only() {
        let server = View::create(caps(), 48000, 128, true, 0).unwrap();
        let own = server.create_node().unwrap();
        let fd = rustix::io::fcntl_dupfd_cloexec(own.fd(), 0).unwrap();
        // The owner's mapping writes; the server maps it read-only.
        assert!(server.install_node(3, 30, server.map_node(fd).unwrap()));
        // SAFETY: offset 0 of the owner's own read-write mapping.
        unsafe {
            (*(own.base() as *const ActivationRecord))
                .done
                .store(9, Ordering::Relaxed)
        };
        assert_eq!(server.record(3).unwrap().done.load(Ordering::Relaxed), 9);
        let again = rustix::io::fcntl_dupfd_cloexec(own.fd(), 0).unwrap();
        assert!(Segment::map(again, server.layout().node_bytes, true).is_err());
        // The same memfd cannot be passed off as a second client's.
        let twice = rustix::io::fcntl_dupfd_cloexec(own.fd(), 0).unwrap();
        assert!(!server.install_node(4, 40, server.map_node(twice).unwrap()));
        // An unsealed memfd is refused.
        let open = Segment::create("x", server.layout().node_bytes).unwrap();
        let fd = rustix::io::fcntl_dupfd_cloexec(open.fd(), 0).unwrap();
        assert!(server.map_node(fd).is_err());
        // Retired: still readable for a while (a request posted just before
        // leaving), no longer passed on.
        server.retire_node(3, 30);
        assert!(server.record(3).is_some());
        assert!(server.node(3, 30).is_none());
        assert_eq!(server.mapped_nodes(), 2, "kept mapped for late readers");
        // A new client of the slot replaces the address at once.
        let next = server.create_node().unwrap();
        let fd = rustix::io::fcntl_dupfd_cloexec(next.fd(), 0).unwrap();
        assert!(server.install_node(3, 31, server.map_node(fd).unwrap()));
        assert_eq!(server.record(3).unwrap().done.load(Ordering::Relaxed), 0);
    }
}
