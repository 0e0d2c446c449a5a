//! [`View`]: both segments of one server mapped in this process, with
//! bounds-checked accessors for everything in them. Created on a
//! non-real-time thread; every accessor is real-time safe.

use crate::sync::Ordering;
use crate::{
    ActivationRecord, Capacities, ControlHeader, Layout, Mailbox, Segment, Table, TableMut, Timer,
    HEADER_BYTES, LAYOUT_VERSION, MAGIC,
};
use rustix::fd::OwnedFd;
use std::io;

/// Bounds-checked access to both segments. Cheap to copy around by reference;
/// every accessor is real-time safe.
pub struct View {
    ctl: Segment,
    shared: Segment,
    layout: Layout,
}

impl View {
    /// Server side: creates both segments for `caps`, initialises the header.
    pub fn create(
        caps: Capacities,
        sample_rate: u32,
        frames: u32,
        sync: bool,
        prio: i32,
    ) -> io::Result<View> {
        let layout = Layout::new(caps).map_err(io::Error::other)?;
        let ctl = Segment::create("resound-control", layout.control_bytes)?;
        let shared = Segment::create("resound-shared", layout.shared_bytes)?;
        let v = View {
            ctl,
            shared,
            layout,
        };
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

    /// Client side: maps the two segments received from the server and validates them.
    pub fn open(ctl_fd: OwnedFd, shared_fd: OwnedFd) -> io::Result<View> {
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
        let shared = Segment::map(shared_fd, layout.shared_bytes, true)?;
        Ok(View {
            ctl,
            shared,
            layout,
        })
    }

    /// The layout.
    /// Real-time safe.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Both segments (server: to send their fds).
    pub fn segments(&self) -> (&Segment, &Segment) {
        (&self.ctl, &self.shared)
    }

    /// The control header.
    /// Real-time safe.
    #[inline]
    pub fn header(&self) -> &ControlHeader {
        // SAFETY: validated at creation/open; lives as long as self.
        unsafe { &*(self.ctl.base() as *const ControlHeader) }
    }

    /// Activation record of a node slot, None when out of range.
    /// Real-time safe.
    #[inline]
    pub fn record(&self, slot: u32) -> Option<&ActivationRecord> {
        if slot >= self.layout.caps.max_clients {
            return None;
        }
        // SAFETY: slot < max_clients, records are laid out from offset 0 of the
        // shared segment which is at least buffers_offset ≥ max_clients*128 long.
        // ActivationRecord is all atomics: any bit pattern is valid.
        Some(unsafe { &*(self.shared.base() as *const ActivationRecord).add(slot as usize) })
    }

    /// Mailbox of a node slot, None when out of range.
    /// Real-time safe.
    #[inline]
    pub fn mailbox(&self, slot: u32) -> Option<&Mailbox> {
        if slot >= self.layout.caps.max_clients {
            return None;
        }
        // SAFETY: slot < max_clients; the mailboxes lie at mailbox_offset in the
        // shared segment (inside shared_bytes by construction), 64-byte
        // aligned; Mailbox is all atomics: any bit pattern is valid.
        Some(unsafe {
            &*(self.shared.base().add(self.layout.mailbox_offset) as *const Mailbox)
                .add(slot as usize)
        })
    }

    /// Whether `slot` is flagged as a slow-sync client.
    /// Real-time safe.
    #[inline]
    pub fn is_sync_client(&self, slot: u32) -> bool {
        let w = (slot / 64) as usize;
        w < 16 && self.header().sync_clients[w].load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    /// Pointer to the buffer of port slot `port` (max_frames f32), None when out of range.
    /// Real-time safe.
    #[inline]
    pub fn port_buffer(&self, port: u32) -> Option<*mut f32> {
        if port >= self.layout.caps.max_ports {
            return None;
        }
        let off = self.layout.buffers_offset + port as usize * self.layout.buffer_stride;
        // SAFETY: off + stride ≤ shared_bytes by construction of the layout.
        Some(unsafe { self.shared.base().add(off) } as *mut f32)
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
    fn sealed_control_segment_cannot_be_mapped_writable() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        v.segments().0.seal(true).unwrap();
        v.segments().1.seal(false).unwrap();
        let dup = |s: &Segment| rustix::io::fcntl_dupfd_cloexec(s.fd(), 0).unwrap();
        let ctl = dup(v.segments().0);
        let sh = dup(v.segments().1);
        // A client trying to get write access to the control segment fails...
        assert!(Segment::map(dup(v.segments().0), v.layout().control_bytes, true).is_err());
        // ...and cannot shrink the shared one.
        assert!(rustix::fs::ftruncate(&sh, 0).is_err());
        let c = View::open(ctl, sh).unwrap();
        assert_eq!(c.header().sample_rate.load(Ordering::Relaxed), 48000);
        assert_eq!(c.layout(), v.layout());
        // Writes through the server's mapping are visible to the client's.
        v.header().cycle.store(42, Ordering::Relaxed);
        assert_eq!(c.header().cycle.load(Ordering::Relaxed), 42);
    }
}
