//! Memfd shared-memory segments: create, map (checking the size), seal,
//! lock in memory, unmap on drop. Non-real-time threads only (setup and
//! teardown); the mapping they return is what real-time code reads.

use rustix::fd::{AsFd, OwnedFd};
use rustix::mm::{MapFlags, ProtFlags};
use std::io;
use std::ptr::NonNull;

/// A mapped memfd segment.
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; all concurrent access goes
// through atomics or through the documented single-writer protocols.
unsafe impl Send for Segment {}
// SAFETY: shared references only hand out the base pointer, length and fd;
// every access through the pointer is by atomics or under the documented
// single-writer protocols, so concurrent use from several threads is sound.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a zeroed, read-write, sealable memfd segment of `len` bytes,
    /// close-on-exec and mode 0600.
    pub fn create(name: &str, len: usize) -> io::Result<Segment> {
        use rustix::fs::{ftruncate, memfd_create, MemfdFlags};
        let fd = memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        // The kernel makes a memfd 0777; nobody may open it again by path
        // (`/proc/PID/fd/N`) but its owner. Clients get the descriptor itself.
        rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(0o600))?;
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

    /// Maps, read-only, a node segment another process created and sealed
    /// (the server adopting a client's, a client the others'): it must be
    /// a memfd of exactly `expected` bytes that nobody can map writable any
    /// more, shrink or grow (`F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK |
    /// F_SEAL_GROW`). Any other descriptor (a file on disk, a socket, an
    /// unsealed memfd someone could still write through, or truncate under
    /// a reader) is refused with a message saying why.
    pub fn map_sealed(fd: OwnedFd, expected: usize) -> io::Result<Segment> {
        use rustix::fs::{fcntl_get_seals, FileType, SealFlags};
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(bad("a node segment must be a memfd".into()));
        }
        let seals = fcntl_get_seals(&fd)
            .map_err(|_| bad("a node segment must be a sealable memfd".into()))?;
        let needed = SealFlags::FUTURE_WRITE | SealFlags::SHRINK | SealFlags::GROW;
        if !seals.contains(needed) {
            return Err(bad(
                "a node segment must be sealed against writable mappings, shrinking and growing"
                    .into(),
            ));
        }
        Self::map(fd, expected, false)
    }

    /// Device and inode of the file behind the segment: two descriptors of
    /// one memfd give the same pair.
    pub fn identity(&self) -> io::Result<(u64, u64)> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok((st.st_dev, st.st_ino))
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
