//! [`ProfileSegment`]: a profile ring together with the memfd mapping it
//! lives in. Created by the server's control thread, opened by readers;
//! non-real-time.

use super::{ProfileLayout, ProfileRing};

/// A profile ring together with the memfd mapping it lives in.
pub struct ProfileSegment {
    seg: crate::Segment,
    ring: ProfileRing,
}

impl ProfileSegment {
    /// Server side: creates, initialises and seals (read-only for everyone
    /// else, fixed size) a profile segment.
    pub fn create(layout: ProfileLayout) -> std::io::Result<ProfileSegment> {
        let seg = crate::Segment::create("resound-profile", layout.bytes)?;
        // Touch every page now, so the driver never takes a page fault (a
        // trip into the kernel to allocate memory) on its first pass through
        // the ring.
        for off in (0..layout.bytes).step_by(4096) {
            // SAFETY: off < layout.bytes, inside our private writable mapping,
            // which nobody else has yet.
            unsafe { std::ptr::write_volatile(seg.base().add(off), 0u8) };
        }
        // SAFETY: a fresh zeroed, page-aligned private mapping of layout.bytes;
        // the ring is stored beside the segment, which outlives it.
        let ring = unsafe { ProfileRing::init(seg.base(), layout) };
        seg.seal(true)?;
        Ok(ProfileSegment { seg, ring })
    }

    /// Reader side: maps a profile segment received from the server (read-only).
    pub fn open(fd: rustix::fd::OwnedFd) -> std::io::Result<ProfileSegment> {
        let len = rustix::fs::fstat(&fd)?.st_size as usize;
        let seg = crate::Segment::map(fd, len, false)?;
        // SAFETY: a read-only mapping of exactly `len` bytes, page-aligned,
        // stored beside the ring, so it outlives every use through `ring()`.
        let ring = unsafe { ProfileRing::open(seg.base(), len) }
            .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
        Ok(ProfileSegment { seg, ring })
    }

    /// The ring (valid as long as this segment lives).
    pub fn ring(&self) -> &ProfileRing {
        &self.ring
    }

    /// The memfd (server: to pass to readers).
    pub fn fd(&self) -> rustix::fd::BorrowedFd<'_> {
        self.seg.fd()
    }

    /// Locks the ring's pages in memory (see [`crate::Segment::lock`]).
    pub fn lock(&self) -> std::io::Result<()> {
        self.seg.lock()
    }
}
