//! [`ProfileRing`]: typed access to a mapped profile segment, for the
//! writer (driver and control thread, see `write`) and every reader (see
//! `read`). Creating or opening one runs on a non-real-time thread.

use super::records::{CycleRecord, NameRecord, NodeRecord, ProfileHeader, ProfileLayout};
use super::{PROFILE_HEADER_BYTES, PROFILE_MAGIC, PROFILE_VERSION};
use crate::sync::Ordering;

/// Typed access to a mapped profile segment (either side).
///
/// Holds a base pointer; the owner keeps the mapping alive (see
/// `resound_shm::Segment`).
#[derive(Debug, Clone, Copy)]
pub struct ProfileRing {
    /// Start of the mapping.
    base: *const u8,
    /// Where the rings lie in it.
    pub(super) layout: ProfileLayout,
}

// SAFETY: all access through the pointer is to atomics; the mapping outlives
// the ring by the contract of `ProfileRing::init` / `ProfileRing::open`.
unsafe impl Send for ProfileRing {}
// SAFETY: every access through a shared ring is an atomic load or store (the
// writer's single-writer rule is a protocol, not a memory-safety, matter);
// the mapping outlives the ring by the contract of `init` / `open`.
unsafe impl Sync for ProfileRing {}

impl ProfileRing {
    /// Initialises the header of a fresh zeroed segment (server side).
    ///
    /// # Safety
    /// `base` must point at a writable, zeroed, 4096-aligned mapping of
    /// `layout.bytes` bytes that stays mapped as long as the returned ring
    /// (and its copies) are used, and nobody else may use it yet.
    pub unsafe fn init(base: *mut u8, layout: ProfileLayout) -> ProfileRing {
        // SAFETY: the caller guarantees a private, writable, aligned mapping;
        // ProfileHeader is valid when zeroed.
        let h = unsafe { &mut *(base as *mut ProfileHeader) };
        h.magic = PROFILE_MAGIC;
        h.version = PROFILE_VERSION;
        h.header_size = std::mem::size_of::<ProfileHeader>() as u32;
        h.cycle_capacity = layout.cycle_capacity;
        h.node_capacity = layout.node_capacity;
        h.name_capacity = layout.name_capacity;
        ProfileRing { base, layout }
    }

    /// Validates a mapped segment of `len` bytes received from a server.
    ///
    /// # Safety
    /// `base` must point at a readable, 4096-aligned mapping of `len` bytes
    /// that stays mapped as long as the returned ring (and copies) are used.
    pub unsafe fn open(base: *const u8, len: usize) -> Result<ProfileRing, String> {
        if len < PROFILE_HEADER_BYTES {
            return Err("profile segment smaller than its header".into());
        }
        // SAFETY: len ≥ one page, aligned; the header is plain integers and atomics.
        let h = unsafe { &*(base as *const ProfileHeader) };
        if h.magic != PROFILE_MAGIC
            || h.version != PROFILE_VERSION
            || h.header_size as usize != std::mem::size_of::<ProfileHeader>()
        {
            return Err(format!(
                "server's profile layout is version {} (ours {PROFILE_VERSION}); rebuild client and server together",
                h.version
            ));
        }
        let layout = ProfileLayout::new(h.cycle_capacity, h.node_capacity, h.name_capacity)?;
        if layout.bytes != len {
            return Err(format!(
                "profile segment is {len} bytes, its header says {}",
                layout.bytes
            ));
        }
        Ok(ProfileRing { base, layout })
    }

    /// The layout.
    pub fn layout(&self) -> &ProfileLayout {
        &self.layout
    }

    /// The header.
    pub fn header(&self) -> &ProfileHeader {
        // SAFETY: validated at init/open; the mapping outlives self.
        unsafe { &*(self.base as *const ProfileHeader) }
    }

    pub(super) fn cycle_slot(&self, n: u64) -> &CycleRecord {
        let i = (n % self.layout.cycle_capacity as u64) as usize;
        // SAFETY: i < cycle_capacity keeps the record inside the cycle ring;
        // all fields are atomics, valid for any bit pattern.
        unsafe { &*(self.base.add(self.layout.cycles_at) as *const CycleRecord).add(i) }
    }

    pub(super) fn node_slot(&self, r: u64) -> &NodeRecord {
        let i = (r % self.layout.node_capacity as u64) as usize;
        // SAFETY: i < node_capacity; atomics only.
        unsafe { &*(self.base.add(self.layout.nodes_at) as *const NodeRecord).add(i) }
    }

    pub(super) fn name_slot(&self, n: u64) -> &NameRecord {
        let i = (n % self.layout.name_capacity as u64) as usize;
        // SAFETY: i < name_capacity; atomics only.
        unsafe { &*(self.base.add(self.layout.names_at) as *const NameRecord).add(i) }
    }

    /// Cycle records completed so far.
    pub fn cycles_written(&self) -> u64 {
        self.header().cycles_written.load(Ordering::Acquire)
    }
}
