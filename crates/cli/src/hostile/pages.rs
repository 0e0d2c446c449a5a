//! The shared-page scribbler of `resound hostile`: every file descriptor
//! the server passes to a session (with a `Welcome` or any later frame) is
//! mapped shared and writable over its whole size if the kernel allows it,
//! and random bytes are then written into every page of it, again and
//! again during the run. Nothing here knows what a segment holds: a
//! segment the kernel lets this process write is written, whatever it is.
//! One the kernel refuses to map writable (a sealed, read-only segment) is
//! mapped read-only once, to confirm that it can be read, and counted as
//! refused.
//!
//! Segments are told apart by their inode, so the same segment passed to
//! many sessions is one row of the report. At most [`MAX_MAPPED`] are
//! mapped at once (the oldest unmapped first; mapped again when the server
//! passes it again).
//!
//! Runs on the command's main thread.

use fastrand::Rng;
use rustix::fs::{fstat, Stat};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

/// Step of the page walk: Linux's smallest page size, so every page is
/// written whatever the machine's page size is.
const PAGE: usize = 4096;

/// Random words written into each page per pass, at most.
const WORDS_PER_PAGE: usize = 64;

/// Writable segments mapped at once, at most.
const MAX_MAPPED: usize = 16;

/// What the kernel allowed with a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Mapped shared and writable.
    Writable,
    /// Writable mapping refused (the error), read-only mapping allowed.
    ReadOnly(String),
    /// Not even a read-only mapping (the error).
    Unmappable(String),
    /// Size 0: nothing to map.
    Empty,
}

impl Access {
    /// Its words in the report.
    pub fn describe(&self) -> String {
        match self {
            Access::Writable => "writable".into(),
            Access::ReadOnly(e) => format!("read-only, refused ({e})"),
            Access::Unmappable(e) => format!("not mappable ({e})"),
            Access::Empty => "empty".into(),
        }
    }
}

/// A shared, writable mapping of a whole segment; unmapped on drop.
struct Mapping {
    fd: OwnedFd,
    base: NonNull<u8>,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned, and no reference
        // into the mapping outlives a scribble pass.
        let _ = unsafe { munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One segment the server passed, with what was done to it.
pub struct Segment {
    /// (device, inode): the same segment passed again is recognised.
    id: (u64, u64),
    /// What `/proc/self/fd` called it when first received.
    pub label: String,
    /// Its size in bytes when first received.
    pub size: u64,
    /// What the kernel allowed.
    pub access: Access,
    /// Times the server passed it.
    pub received: u64,
    /// Scribble passes over it.
    pub scribbled: u64,
    map: Option<Mapping>,
}

/// Every segment received, the writable ones mapped.
#[derive(Default)]
pub struct Pages {
    segments: Vec<Segment>,
    /// Indices of the mapped segments, oldest first.
    mapped: VecDeque<usize>,
    /// Pages written so far (all segments, all passes).
    pub pages_written: u64,
}

impl Pages {
    /// Takes a descriptor the server passed: a new segment is mapped (or
    /// found read-only), a known one counted (and mapped again if it was
    /// unmapped to make room).
    pub fn take(&mut self, fd: OwnedFd) {
        let Ok(st) = fstat(&fd) else { return };
        let id = inode(&st);
        if let Some(i) = self.segments.iter().position(|s| s.id == id) {
            self.segments[i].received += 1;
            if self.segments[i].access == Access::Writable && self.segments[i].map.is_none() {
                self.map_again(i, fd);
            }
            return;
        }
        let size = st.st_size.max(0) as u64;
        let label = label(&fd);
        let (access, map) = open(fd, size);
        self.segments.push(Segment {
            id,
            label,
            size,
            access,
            received: 1,
            scribbled: 0,
            map,
        });
        if self.segments.last().is_some_and(|s| s.map.is_some()) {
            self.note_mapped(self.segments.len() - 1);
        }
    }

    /// A node segment of the tool's own, as a client library makes one: a
    /// memfd of `size` bytes mapped read-write here, then sealed against
    /// any other writable mapping, shrinking and growing. It is scribbled
    /// on like every writable segment (it is the one page set a client can
    /// always write); the returned descriptor is for `AttachNode`.
    pub fn own_node(&mut self, size: usize) -> std::io::Result<OwnedFd> {
        // Made and sealed the way the client library makes its own
        // (`resound_shm::Segment`); this mapping of it is taken before the
        // seal, which refuses any later writable one.
        let seg = resound_shm::Segment::create("hostile-node", size)?;
        let fd = seg.fd().try_clone_to_owned()?;
        let base = map(&fd, size, ProtFlags::READ | ProtFlags::WRITE)?;
        let mapping = Mapping {
            fd,
            base,
            len: size,
        };
        seg.seal(true)?;
        let send = mapping.fd.try_clone()?;
        let id = inode(&fstat(&mapping.fd)?);
        self.segments.push(Segment {
            id,
            label: "/memfd:hostile-node (its own)".into(),
            size: size as u64,
            access: Access::Writable,
            received: 0,
            scribbled: 0,
            map: Some(mapping),
        });
        self.note_mapped(self.segments.len() - 1);
        Ok(send)
    }

    /// Writes random bytes into every page of every mapped segment; returns
    /// the pages written.
    pub fn scribble(&mut self, rng: &mut Rng) -> u64 {
        let mut pages = 0;
        for &i in &self.mapped {
            let s = &mut self.segments[i];
            if let Some(m) = &s.map {
                pages += scribble_mapping(m, rng);
                s.scribbled += 1;
            }
        }
        self.pages_written += pages;
        pages
    }

    /// Every segment received, in order of arrival.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Maps segment `i` again from the descriptor `fd` just received.
    fn map_again(&mut self, i: usize, fd: OwnedFd) {
        let (access, map) = open(fd, self.segments[i].size);
        if map.is_some() {
            self.segments[i].map = map;
            self.note_mapped(i);
        } else {
            self.segments[i].access = access;
        }
    }

    /// Records that segment `i` is mapped, unmapping the oldest beyond
    /// [`MAX_MAPPED`].
    fn note_mapped(&mut self, i: usize) {
        self.mapped.push_back(i);
        while self.mapped.len() > MAX_MAPPED {
            if let Some(old) = self.mapped.pop_front() {
                self.segments[old].map = None;
            }
        }
    }
}

/// (device, inode) of a descriptor's file.
fn inode(st: &Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

/// What `/proc/self/fd` shows for `fd` ("/memfd:NAME"), without " (deleted)".
fn label(fd: &OwnedFd) -> String {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_or_else(
        |_| "?".into(),
        |p| {
            let s = p.to_string_lossy();
            s.strip_suffix(" (deleted)").unwrap_or(&s).to_string()
        },
    )
}

/// Maps `fd` (of `size` bytes) writable if allowed, else checks that it
/// maps read-only.
fn open(fd: OwnedFd, size: u64) -> (Access, Option<Mapping>) {
    let Ok(len) = usize::try_from(size) else {
        return (Access::Unmappable("too large".into()), None);
    };
    if len == 0 {
        return (Access::Empty, None);
    }
    match map(&fd, len, ProtFlags::READ | ProtFlags::WRITE) {
        Ok(base) => (Access::Writable, Some(Mapping { fd, base, len })),
        Err(refused) => match map(&fd, len, ProtFlags::READ) {
            Ok(base) => {
                // SAFETY: base/len are exactly what mmap just returned and
                // nothing else refers to this mapping.
                let _ = unsafe { munmap(base.as_ptr().cast(), len) };
                (Access::ReadOnly(refused.to_string()), None)
            }
            Err(e) => (Access::Unmappable(e.to_string()), None),
        },
    }
}

/// A shared mapping of the first `len` bytes of `fd` with `prot`.
fn map(fd: &OwnedFd, len: usize, prot: ProtFlags) -> rustix::io::Result<NonNull<u8>> {
    // SAFETY: a fresh region chosen by the kernel (null hint), so no
    // existing memory of this process is replaced; the result is used only
    // through raw pointers within `len`, and unmapped exactly once.
    let p = unsafe { mmap(std::ptr::null_mut(), len, prot, MapFlags::SHARED, fd, 0)? };
    NonNull::new(p.cast::<u8>()).ok_or(rustix::io::Errno::INVAL)
}

/// One pass over mapping `m`: a run of random words at a random place in
/// every page within the segment's current size. Returns the pages written.
fn scribble_mapping(m: &Mapping, rng: &mut Rng) -> u64 {
    // Never past the file's current end: a page beyond it would SIGBUS.
    let Ok(st) = fstat(&m.fd) else { return 0 };
    let end = m.len.min(st.st_size.max(0) as usize);
    let mut pages = 0;
    for start in (0..end).step_by(PAGE) {
        let (first, last) = (start / 8, (start + PAGE).min(end) / 8);
        if last <= first {
            continue;
        }
        let n = rng.usize(1..=(last - first).min(WORDS_PER_PAGE));
        let at = rng.usize(first..=last - n);
        for w in at..at + n {
            // SAFETY: word w lies within the first `end` bytes of the
            // mapping (w < last <= end / 8), which are mapped shared and
            // writable and backed by the file (end <= its current size);
            // the base is page-aligned, so the u64 is aligned. This process
            // touches the mapping only through these atomic stores; what
            // other processes do with those bytes is theirs to survive.
            let word = unsafe { AtomicU64::from_ptr(m.base.as_ptr().cast::<u64>().add(w)) };
            word.store(rng.u64(..), Ordering::Relaxed);
        }
        pages += 1;
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{fcntl_add_seals, ftruncate, memfd_create, MemfdFlags, SealFlags};

    /// A memfd of `len` zero bytes, sealed like a read-only segment if asked.
    fn memfd(len: u64, read_only: bool) -> OwnedFd {
        let fd = memfd_create(
            "hostile-test",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .unwrap();
        ftruncate(&fd, len).unwrap();
        if read_only {
            fcntl_add_seals(&fd, SealFlags::FUTURE_WRITE | SealFlags::SHRINK).unwrap();
        }
        fd
    }

    /// Pages of `fd` with at least one non-zero byte, read with pread.
    fn dirty_pages(fd: &OwnedFd, len: usize) -> usize {
        let mut buf = vec![0u8; len];
        rustix::io::pread(fd, &mut buf, 0).unwrap();
        buf.chunks(PAGE)
            .filter(|p| p.iter().any(|&b| b != 0))
            .count()
    }

    #[test]
    fn a_writable_segment_gets_every_page_written() {
        let len = 10 * PAGE + 100;
        let fd = memfd(len as u64, false);
        let mut pages = Pages::default();
        pages.take(fd.try_clone().unwrap());
        let mut rng = Rng::with_seed(1);
        assert_eq!(pages.scribble(&mut rng), 11);
        assert_eq!(dirty_pages(&fd, len), 11);
        let s = &pages.segments()[0];
        assert_eq!(
            (s.access.clone(), s.size, s.scribbled),
            (Access::Writable, len as u64, 1)
        );
        assert!(s.label.contains("hostile-test"), "{}", s.label);
    }

    #[test]
    fn a_sealed_segment_is_refused_and_left_alone() {
        let fd = memfd(4 * PAGE as u64, true);
        let mut pages = Pages::default();
        pages.take(fd.try_clone().unwrap());
        assert_eq!(pages.scribble(&mut Rng::with_seed(2)), 0);
        assert!(matches!(pages.segments()[0].access, Access::ReadOnly(_)));
        assert_eq!(dirty_pages(&fd, 4 * PAGE), 0);
    }

    #[test]
    fn the_same_segment_passed_twice_is_one_row() {
        let fd = memfd(PAGE as u64, false);
        let mut pages = Pages::default();
        pages.take(fd.try_clone().unwrap());
        pages.take(fd.try_clone().unwrap());
        pages.take(memfd(0, false));
        assert_eq!(pages.segments().len(), 2);
        assert_eq!(pages.segments()[0].received, 2);
        assert_eq!(pages.segments()[1].access, Access::Empty);
    }

    #[test]
    fn at_most_max_mapped_stay_mapped_and_come_back_when_passed_again() {
        let fds: Vec<OwnedFd> = (0..MAX_MAPPED + 2)
            .map(|_| memfd(PAGE as u64, false))
            .collect();
        let mut pages = Pages::default();
        for fd in &fds {
            pages.take(fd.try_clone().unwrap());
        }
        assert_eq!(pages.scribble(&mut Rng::with_seed(3)), MAX_MAPPED as u64);
        assert_eq!(pages.segments()[0].scribbled, 0);
        pages.take(fds[0].try_clone().unwrap());
        pages.scribble(&mut Rng::with_seed(4));
        assert_eq!(pages.segments()[0].scribbled, 1);
    }
}
