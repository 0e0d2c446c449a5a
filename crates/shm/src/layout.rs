//! Shared-memory segments and their `#[repr(C)]` layouts.
//!
//! A server owns two memfd segments and passes both to every client over its
//! socket (SCM_RIGHTS); nothing is ever created in /dev/shm, so nothing leaks.
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
//! must decrement when it finishes; node 0 is the driver) and `order` (the
//! activation order, for display).
//!
//! ## The shared segment (everyone maps read-write)
//!
//! Sealed against shrinking and growing (a client truncating it would
//! otherwise SIGBUS the server).
//!
//! ```text
//!   0                     ActivationRecord[max_clients]  (slot 0 = driver)
//!   buffers_offset        port buffers: max_ports x buffer_stride bytes,
//!                         port i at buffers_offset + i * buffer_stride
//!                         (audio: max_frames f32; MIDI: a crate::midi buffer)
//!   mailbox_offset        Mailbox[max_clients]: each client's requests to the
//!                         driver (transport commands, relocation, slow-sync
//!                         readiness, timebase output), sanitised by the driver
//! ```
//!
//! A client can write anything here. The server therefore only reads numbers
//! it sanitises (times, status values) and never follows an index from this
//! segment; indices come from the read-only control segment, and even those
//! are bounds-checked by every reader ([`View`]).

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::transport::{PositionCell, TransportCell};
use rustix::fd::{AsFd, OwnedFd};
use rustix::mm::{MapFlags, ProtFlags};
use std::io;
use std::ptr::NonNull;

/// `b"RESOUND\0"` as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"RESOUND\0");
/// Layout version; bumped on any change of the structs below.
pub const LAYOUT_VERSION: u32 = 4;
/// Bytes reserved for the control header (one page).
pub const HEADER_BYTES: usize = 4096;
/// Alignment of each port buffer (bytes).
pub const BUFFER_ALIGN: usize = 64;

/// Status of a node's activation record (`ActivationRecord::status`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Not part of the running graph.
    Idle = 0,
    /// Armed by the driver for this cycle, waiting for its inputs.
    Waiting = 1,
    /// Its counter reached zero; its thread has been woken.
    Triggered = 2,
    /// Its thread is running the process callback.
    Running = 3,
    /// It finished this cycle and signalled its outputs.
    Finished = 4,
}

impl NodeStatus {
    /// Decodes a raw value a client may have scribbled on.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => Self::Idle,
            1 => Self::Waiting,
            2 => Self::Triggered,
            3 => Self::Running,
            4 => Self::Finished,
            _ => return None,
        })
    }
}

/// The server's global state, first page of the control segment.
/// Writer: the server (driver thread for the per-cycle fields, otherwise the
/// control thread). Readers: everybody.
#[repr(C)]
pub struct ControlHeader {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// `size_of::<ControlHeader>()`, to catch mismatched builds.
    pub header_size: u32,
    /// Client slots, the driver's slot 0 included.
    pub max_clients: u32,
    /// Port slots.
    pub max_ports: u32,
    /// Capacity of the `sources` array of each table (port-to-port connections).
    pub max_connections: u32,
    /// Frames each port buffer can hold (the largest period the server allows).
    pub max_frames: u32,
    /// Sample rate in Hz.
    pub sample_rate: AtomicU32,
    /// Current period in frames (≤ max_frames).
    pub buffer_frames: AtomicU32,
    /// 1 in sync mode (cycle ends when the graph has finished), 0 in async mode.
    pub sync_mode: u32,
    /// SCHED_FIFO priority for client process threads; 0: not real-time.
    pub client_priority: i32,
    /// 1 while the server runs; 0 once it is stopping (client threads then exit).
    pub running: AtomicU32,
    /// The graph switch word, see [`crate::sync::switch`]. Writer: control thread and driver.
    pub switch: AtomicU32,
    /// Number of the current cycle (first cycle is 1). Writer: driver.
    pub cycle: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the current cycle began. Writer: driver.
    pub cycle_start_ns: AtomicU64,
    /// Frames processed before the current cycle (JACK frame time of its first frame). Writer: driver.
    pub frame_time: AtomicU64,
    /// Nominal period in ns (buffer_frames / sample_rate).
    pub period_ns: AtomicU64,
    /// Expected start of the next cycle, CLOCK_MONOTONIC ns. Writer: driver.
    pub next_start_ns: AtomicU64,
    /// Xruns since the server started. Writer: driver.
    pub xruns: AtomicU64,
    /// Seqlock over the timer fields (cycle, cycle_start_ns, frame_time,
    /// next_start_ns, cycle_frames): odd while the driver writes them.
    pub timer_seq: AtomicU32,
    /// Frames of the current cycle: `buffer_frames` as the driver read it at
    /// cycle start (a buffer-size change takes effect at the next cycle). Writer: driver.
    pub cycle_frames: AtomicU32,
    // ---- layout 3: transport, freewheel, statistics (libjack) ----
    /// Transport state and position of the current cycle
    /// ([`crate::transport::Transport`]). Writer: driver, every cycle start.
    pub transport: TransportCell,
    /// Slot of the timebase master client; 0: none. Writer: control thread.
    pub timebase_master: AtomicU32,
    /// Incremented by the control thread whenever a client becomes timebase
    /// master, so the master calls its callback with `new_pos` once.
    pub timebase_gen: AtomicU32,
    /// Slow-sync timeout in microseconds (JACK default 2 s). Writer: control thread.
    pub sync_timeout_us: AtomicU64,
    /// Bitmap of slow-sync client slots (bit `slot % 64` of word `slot / 64`):
    /// clients with a sync callback the driver waits for in Starting.
    /// Writer: control thread.
    pub sync_clients: [AtomicU64; 16],
    /// 1 while freewheeling (the driver runs cycles back to back without the
    /// clock, each waiting for the whole graph). Writer: control thread.
    pub freewheel: AtomicU32,
    /// DSP load in percent as f32 bits: the graph's busy time over the
    /// period, smoothed like jackd. Writer: driver.
    pub cpu_load: AtomicU32,
    /// Largest wake-up delay of the driver (µs) since start or the last
    /// reset. Writer: driver (fetch_max), control thread (reset to 0).
    pub max_delayed_us: AtomicU32,
    /// Wake-up delay (µs) of the driver in the last cycle with an xrun. Writer: driver.
    pub xrun_delayed_us: AtomicU32,
}

/// The timer fields of the current cycle, read consistently ([`View::timer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timer {
    /// Cycle number.
    pub cycle: u64,
    /// CLOCK_MONOTONIC ns at which it began (its nominal deadline).
    pub start_ns: u64,
    /// Frame time of its first frame.
    pub frame_time: u64,
    /// Expected start of the next cycle.
    pub next_start_ns: u64,
    /// Frames in this cycle.
    pub frames: u32,
}

/// Header of one graph table.
#[repr(C)]
pub struct TableHeader {
    /// Graph version this table holds (server-side counter, +1 per change).
    pub version: u64,
    /// Client slots in use are all below this bound.
    pub client_hw: u32,
    /// Port slots in use are all below this bound.
    pub port_hw: u32,
    /// Used length of `sources`.
    pub n_sources: u32,
    /// Used length of `edges`.
    pub n_edges: u32,
    /// Used length of `order`.
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

/// One node (client or driver) in a graph table. Writer: server control thread.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ClientEntry {
    /// [`client_state`] value.
    pub state: u32,
    /// Process id of the client (the server's own for the driver).
    pub pid: u32,
    /// Activation count armed at cycle start: number of distinct upstream
    /// nodes, the driver included, over non-feedback connections. ≥ 1 when active.
    pub init_count: u32,
    /// Start of this node's range in `edges` (the nodes it decrements when finished).
    pub down_start: u32,
    /// Length of that range.
    pub down_count: u32,
    /// Position of the node in activation order (0 = driver).
    pub order: u32,
    /// Unique id of the client for its lifetime in this server (never reused).
    pub uuid: u64,
    /// NUL-terminated UTF-8 name.
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

/// One port in a graph table. Writer: server control thread.
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
    /// Input ports: start of the connected output ports in `sources`.
    pub src_start: u32,
    /// Input ports: number of connected outputs.
    pub src_count: u32,
    /// Number of connections of this port (either direction).
    pub n_connections: u32,
    /// Monitoring requests (jack_port_request_monitor count).
    pub monitor: u32,
    /// Latency ranges in frames: capture min, capture max, playback min, playback max.
    pub latency: [u32; 4],
    /// Unique id of the port for its lifetime in this server.
    pub uuid: u64,
    /// NUL-terminated full name `client:port`.
    pub name: [u8; 320],
    /// Two NUL-terminated aliases (empty when unset).
    pub aliases: [[u8; 320]; 2],
}

/// Per-node activation record in the shared segment, one cache-line pair each.
/// Every field may be scribbled on by any client; readers sanitise.
#[repr(C, align(128))]
pub struct ActivationRecord {
    /// Cycle-tagged activation counter ([`crate::sync::activation`]).
    /// Writers: driver (reset), upstream nodes (decrement).
    pub counter: AtomicU64,
    /// Futex word the node's thread sleeps on; bumped by whoever triggers it.
    pub trigger: AtomicU32,
    /// [`NodeStatus`] as u32. Writers: driver (Waiting), triggerer (Triggered), the node (Running, Finished).
    pub status: AtomicU32,
    /// Cycle the node was last triggered for. Writer: triggerer, before bumping `trigger`.
    pub cycle: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node was triggered. Writer: triggerer.
    pub signal_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which the node's thread woke for `cycle`. Writer: the node.
    pub awake_ns: AtomicU64,
    /// CLOCK_MONOTONIC ns at which its process callback returned. Writer: the node.
    pub finish_ns: AtomicU64,
    /// CPU time its thread used in one cycle, from wake-up to going back to
    /// sleep (CLOCK_THREAD_CPUTIME_ID delta), *tagged with that cycle*:
    /// `(cycle as u32) << 32 | min(ns, u32::MAX)`. One atomic store, so a
    /// reader never pairs one cycle's tag with another's time. Writer: the
    /// node, as its last store of the cycle, *after* `finished_cycle` and
    /// signalling downstream (so the figure includes that work): a reader
    /// that sees `finished_cycle == k` may still find the tag of `k - 1`
    /// here, and must then treat the CPU time of `k` as not yet known.
    /// Use [`ActivationRecord::store_cpu`] / [`ActivationRecord::cpu_of`].
    pub cpu: AtomicU64,
    /// Last cycle the node completed. Writer: the node.
    pub finished_cycle: AtomicU64,
}

impl ActivationRecord {
    /// Writer side: records `cpu_ns` as the CPU time used in `cycle`
    /// (saturated at u32::MAX ns, 4.3 s). Real-time safe.
    pub fn store_cpu(&self, cycle: u64, cpu_ns: u64) {
        let packed = ((cycle as u32 as u64) << 32) | cpu_ns.min(u32::MAX as u64);
        self.cpu.store(packed, Ordering::Release);
    }

    /// CPU time (ns) the node used in `cycle`, or None if the value stored
    /// belongs to another cycle (not stored yet, or stale). Real-time safe.
    pub fn cpu_of(&self, cycle: u64) -> Option<u64> {
        let (tag, ns) = self.last_cpu();
        (tag == cycle as u32).then_some(ns)
    }

    /// The last CPU time stored, whatever its cycle: (cycle tag, ns). For
    /// displays that only want "the latest figure". Real-time safe.
    pub fn last_cpu(&self) -> (u32, u64) {
        let v = self.cpu.load(Ordering::Acquire);
        ((v >> 32) as u32, v & u32::MAX as u64)
    }
}

/// A client's requests to the driver, one per node slot in the shared
/// segment. Writer: the client (any of its threads, real-time safe: plain
/// atomics). Reader: the driver, which sanitises everything and follows no
/// index from here. Reset by the server when a client takes the slot
/// (except the two request counters, see [`Mailbox::reset`]).
#[repr(C, align(64))]
pub struct Mailbox {
    /// Transport command: `(sequence << 8) | command`
    /// ([`crate::transport::command`]); a new sequence is a new command.
    pub transport_cmd: AtomicU64,
    /// Relocation request counter: a new value means `locate_pos` holds a new request.
    pub locate_req: AtomicU64,
    /// Requested position (frame, and BBT/timecode fields if their valid bits are set).
    pub locate_pos: PositionCell,
    /// The transport `sync_gen` this slow-sync client is ready to roll for.
    pub sync_ready: AtomicU64,
    /// Cycle in which the timebase master wrote `timebase_pos`.
    pub timebase_cycle: AtomicU64,
    /// The timebase master's extended position for the cycle after `timebase_cycle`.
    pub timebase_pos: PositionCell,
}

impl Mailbox {
    /// Back to the state of a fresh slot (server, when a client opens).
    ///
    /// `transport_cmd` and `locate_req` are left alone: the driver detects a
    /// request by the word *changing* from the value it last saw, and clients
    /// always advance the word from its current value. Zeroing them could
    /// lose a request: if the driver never observed the zero, the new
    /// client's first word could equal the previous occupant's last one.
    pub fn reset(&self) {
        self.sync_ready.store(0, Ordering::Relaxed);
        self.timebase_cycle.store(0, Ordering::Relaxed);
        self.locate_pos.seq.store(0, Ordering::Relaxed);
        self.timebase_pos.seq.store(0, Ordering::Release);
    }
}

#[cfg(not(loom))]
const _: () = {
    assert!(std::mem::size_of::<Mailbox>().is_multiple_of(64));
    assert!(std::mem::size_of::<ControlHeader>() <= HEADER_BYTES);
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

/// Byte offsets of everything in both segments.
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
    /// Offset of the port buffers in the shared segment.
    pub buffers_offset: usize,
    /// Bytes between two port buffers.
    pub buffer_stride: usize,
    /// Offset of the mailboxes in the shared segment.
    pub mailbox_offset: usize,
    /// Total bytes of the shared segment.
    pub shared_bytes: usize,
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
        let buffers_offset = align_up(mc * std::mem::size_of::<ActivationRecord>(), 4096);
        let buffer_stride = align_up(port_bytes, BUFFER_ALIGN);
        let mailbox_offset = align_up(buffers_offset + mp * buffer_stride, 4096);
        let shared_bytes = align_up(mailbox_offset + mc * std::mem::size_of::<Mailbox>(), 4096);
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
            shared_bytes,
        })
    }
}

/// A mapped memfd segment.
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes
// through atomics or through the documented single-writer protocols.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a zeroed, read-write, sealable memfd segment of `len` bytes.
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
        let fd = memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        ftruncate(&fd, len as u64)?;
        Self::map_fd(fd, len, true)
    }

    /// Maps a segment received from the server, checking its size is `expected` bytes.
    pub fn map(fd: OwnedFd, expected: usize, writable: bool) -> io::Result<Segment> {
        let st = rustix::fs::fstat(&fd)?;
        if st.st_size as usize != expected {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "shared segment is {} bytes, layout expects {expected}",
                    st.st_size
                ),
            ));
        }
        Self::map_fd(fd, expected, writable)
    }

    fn map_fd(fd: OwnedFd, len: usize, writable: bool) -> io::Result<Segment> {
        let prot = if writable {
            ProtFlags::READ | ProtFlags::WRITE
        } else {
            ProtFlags::READ
        };
        // SAFETY: mapping a fresh region chosen by the kernel (null hint) of a
        // memfd whose size is `len`; the mapping lives until `Drop` unmaps it.
        let p =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, &fd, 0)? };
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Segment { ptr, len, fd })
    }

    /// Seals the size and, with `readonly_for_others`, any future writable mapping
    /// (our own existing mapping stays writable).
    pub fn seal(&self, readonly_for_others: bool) -> io::Result<()> {
        use rustix::fs::{fcntl_add_seals, SealFlags};
        let mut s = SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL;
        if readonly_for_others {
            s |= SealFlags::FUTURE_WRITE;
        }
        fcntl_add_seals(&self.fd, s)?;
        Ok(())
    }

    /// Locks the segment's pages in memory (and faults them in), so the
    /// real-time threads that use it never wait for a page to be allocated or
    /// swapped in. Fails under a low RLIMIT_MEMLOCK without CAP_IPC_LOCK.
    pub fn lock(&self) -> io::Result<()> {
        // SAFETY: locking pages of our own live mapping has no memory-safety
        // preconditions; ptr/len are exactly the mapping.
        unsafe { rustix::mm::mlock(self.ptr.as_ptr().cast(), self.len)? };
        Ok(())
    }

    /// Base address.
    pub fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (segments have a header), provided for API completeness.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memfd, to pass to clients.
    pub fn fd(&self) -> rustix::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nothing borrows the
        // mapping past the Segment's lifetime (views borrow the Segment).
        unsafe {
            let _ = rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

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
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Both segments (server: to send their fds).
    pub fn segments(&self) -> (&Segment, &Segment) {
        (&self.ctl, &self.shared)
    }

    /// The control header.
    #[inline]
    pub fn header(&self) -> &ControlHeader {
        // SAFETY: validated at creation/open; lives as long as self.
        unsafe { &*(self.ctl.base() as *const ControlHeader) }
    }

    /// Activation record of a node slot, None when out of range.
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
    #[inline]
    pub fn is_sync_client(&self, slot: u32) -> bool {
        let w = (slot / 64) as usize;
        w < 16 && self.header().sync_clients[w].load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    /// Pointer to the buffer of port slot `port` (max_frames f32), None when out of range.
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
    #[inline]
    pub fn silence(&self) -> *const f32 {
        // SAFETY: silence_offset + max_frames*4 ≤ control_bytes by construction.
        unsafe { self.ctl.base().add(self.layout.silence_offset) as *const f32 }
    }

    /// The graph table at index 0 or 1.
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

    /// Reads the timer fields of the current cycle consistently (seqlock).
    pub fn timer(&self) -> Timer {
        let h = self.header();
        let read = || Timer {
            cycle: h.cycle.load(Ordering::Acquire),
            start_ns: h.cycle_start_ns.load(Ordering::Acquire),
            frame_time: h.frame_time.load(Ordering::Acquire),
            next_start_ns: h.next_start_ns.load(Ordering::Acquire),
            frames: h.cycle_frames.load(Ordering::Acquire),
        };
        // The driver holds the sequence odd for a few stores; only a server
        // killed in the middle of them leaves it odd. Bounded, so a reader
        // (a real-time thread among them) never spins forever on a dead
        // server: it then gets the fields as they are.
        for _ in 0..TIMER_TRIES {
            let s1 = h.timer_seq.load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let v = read();
            if h.timer_seq.load(Ordering::Acquire) == s1 {
                return v;
            }
        }
        read()
    }
}

/// Attempts of [`View::timer`] before it gives up on a consistent copy.
pub const TIMER_TRIES: u32 = 100_000;

/// Read access to one graph table. All reads are volatile copies of single
/// fields, bounds-checked, so a table being rewritten (a late or non-real-time
/// reader) yields wrong numbers at worst, never out-of-range access.
#[derive(Clone, Copy)]
pub struct Table<'a> {
    base: *const u8,
    layout: &'a Layout,
    _v: std::marker::PhantomData<&'a View>,
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
    pub fn version(&self) -> u64 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).version))
    }

    /// Upper bound of used client slots (clamped to capacity).
    #[inline]
    pub fn client_hw(&self) -> u32 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).client_hw)).min(self.layout.caps.max_clients)
    }

    /// Upper bound of used port slots (clamped to capacity).
    #[inline]
    pub fn port_hw(&self) -> u32 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).port_hw)).min(self.layout.caps.max_ports)
    }

    /// Number of entries in the activation order (clamped).
    pub fn order_len(&self) -> u32 {
        vread!(std::ptr::addr_of!((*self.header_ptr()).n_order)).min(self.layout.caps.max_clients)
    }

    /// Node slot at position `i` of the activation order.
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
    #[inline]
    pub fn client_state(&self, slot: u32) -> u32 {
        match self.client_ptr(slot) {
            Some(p) => vread!(std::ptr::addr_of!((*p).state)),
            None => client_state::FREE,
        }
    }

    /// Activation count armed at cycle start for a node.
    #[inline]
    pub fn init_count(&self, slot: u32) -> u32 {
        match self.client_ptr(slot) {
            Some(p) => vread!(std::ptr::addr_of!((*p).init_count)),
            None => 0,
        }
    }

    /// Number of downstream nodes of a node (bounds-checked against the edge array).
    #[inline]
    pub fn down_count(&self, slot: u32) -> u32 {
        self.down_range(slot).1
    }

    #[inline]
    fn down_range(&self, slot: u32) -> (u32, u32) {
        let Some(p) = self.client_ptr(slot) else {
            return (0, 0);
        };
        let start = vread!(std::ptr::addr_of!((*p).down_start));
        let count = vread!(std::ptr::addr_of!((*p).down_count));
        clamp_range(start, count, self.layout.max_edges)
    }

    /// The i-th downstream node of a node.
    #[inline]
    pub fn down_at(&self, slot: u32, i: u32) -> Option<u32> {
        let (start, count) = self.down_range(slot);
        if i >= count {
            return None;
        }
        // SAFETY: start + i < max_edges by clamp_range.
        Some(vread!(
            (self.base.add(self.layout.edges_at) as *const u32).add((start + i) as usize)
        ))
    }

    /// Uuid of the client in a slot (0 when out of range).
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
    pub fn port_name_ptr(&self, port: u32) -> Option<*const u8> {
        let p = self.port_ptr(port)?;
        // SAFETY: a field address inside the in-range entry; nothing is read.
        Some(unsafe { std::ptr::addr_of!((*p).name) } as *const u8)
    }

    /// Hot fields of a port beyond [`Table::port_info`]: (uuid, connection count, monitor requests).
    pub fn port_extra(&self, port: u32) -> Option<(u64, u32, u32)> {
        let p = self.port_ptr(port)?;
        Some((
            vread!(std::ptr::addr_of!((*p).uuid)),
            vread!(std::ptr::addr_of!((*p).n_connections)),
            vread!(std::ptr::addr_of!((*p).monitor)),
        ))
    }

    /// Latency ranges of a port: capture min/max, playback min/max.
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
    base: *mut u8,
    layout: &'a Layout,
    _v: std::marker::PhantomData<&'a View>,
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
        // SAFETY: in range; exclusive writer.
        unsafe {
            let p = (self.base.add(self.layout.clients_at) as *mut ClientEntry).add(slot as usize);
            std::ptr::write_volatile(p, *e);
        }
    }

    /// Writes a port entry; panics on a slot out of range (server bug).
    pub fn set_port(&mut self, port: u32, e: &PortEntry) {
        assert!(port < self.layout.caps.max_ports);
        // SAFETY: in range; exclusive writer.
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
        init_count: 0,
        down_start: 0,
        down_count: 0,
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

    fn caps() -> Capacities {
        Capacities {
            max_clients: 8,
            max_ports: 16,
            max_connections: 32,
            max_frames: 256,
        }
    }

    #[test]
    fn layout_is_disjoint_and_in_bounds() {
        let l = Layout::new(caps()).unwrap();
        assert!(l.table_offset[0] >= HEADER_BYTES);
        assert!(l.table_offset[1] >= l.table_offset[0] + l.table_bytes);
        assert!(l.silence_offset >= l.table_offset[1] + l.table_bytes);
        assert!(l.control_bytes >= l.silence_offset + 256 * 4);
        assert!(l.order_at + 8 * 4 <= l.table_bytes);
        assert!(l.buffers_offset >= 8 * 128);
        assert_eq!(l.buffer_stride % BUFFER_ALIGN, 0);
        assert!(l.shared_bytes >= l.buffers_offset + 16 * l.buffer_stride);
        assert!(Layout::new(Capacities {
            max_frames: 1,
            ..caps()
        })
        .is_err());
    }

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

    #[test]
    fn a_timer_left_half_published_does_not_hang_readers() {
        let v = View::create(caps(), 48000, 128, true, 0).unwrap();
        v.header().cycle.store(7, Ordering::Relaxed);
        // A driver killed between the two increments of the sequence.
        v.header().timer_seq.store(1, Ordering::Relaxed);
        assert_eq!(v.timer().cycle, 7);
        v.header().timer_seq.store(2, Ordering::Relaxed);
        assert_eq!(v.timer().cycle, 7);
    }

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
        c.down_start = 5;
        c.down_count = u32::MAX;
        t.set_client(2, &c);
        let r = v.table(next);
        assert_eq!(r.source_count(3), 0);
        assert!(r.source_at(3, 0).is_none());
        assert!(r.down_count(2) as usize <= v.layout().max_edges - 5);
        assert!(r.port_info(16).is_none());
        assert!(v.record(8).is_none());
        assert!(v.port_buffer(16).is_none());
    }
}
